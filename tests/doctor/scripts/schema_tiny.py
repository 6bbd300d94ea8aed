"""A tiny training loop for the result-schema tests: a training DataLoader and a validation
one, a ``.item()`` on every step and one evaluation batch after step 3 (a measured step when
warm-up is 1), so the result has two loader roles, a sync row and an excluded step. Gradients are
zeroed in place (lint's TP402), a technique no runtime pattern measures: the result holds a
lint-only finding on any machine (TP302's autocast finding is merged with the run's own bf16
finding where the CPU's bf16 pays, as on an AVX512-BF16 EPYC, and stays lint-only elsewhere).

    python schema_tiny.py [--steps N]
"""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 20
torch.manual_seed(0)
train = DataLoader(TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,))), batch_size=8)
val = DataLoader(TensorDataset(torch.randn(32, 16), torch.randint(0, 4, (32,))), batch_size=8)
device = "cuda" if torch.cuda.is_available() else "cpu"  # as real scripts choose it
# Just over a million weights: lint leaves a smaller model's syncs alone (lint.scale), and the
# result must hold a finding that lint and the run both make (TP201 on the .item() below).
model = nn.Sequential(
    nn.Linear(16, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 4)
).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step = 0
while step < steps:
    for x, y in train:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=False)  # lint-only: no runtime pattern sees it
        loss.backward()
        opt.step()
        loss.item()  # a host read on every step
        step += 1
        if step == 3:
            with torch.no_grad():
                x, y = next(iter(val))
                model(x.to(device))
        if step == steps:
            break
