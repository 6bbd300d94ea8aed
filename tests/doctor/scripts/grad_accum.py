"""Gradient accumulation: ACCUM micro-batches of BATCH samples per optimizer step."""

import torch
from torch import nn

ACCUM = 2
BATCH = 8

torch.manual_seed(0)
x = torch.randn(BATCH, 16)
y = torch.randint(0, 2, (BATCH,))
model = nn.Linear(16, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
while True:
    for _ in range(ACCUM):
        loss = nn.functional.cross_entropy(model(x), y) / ACCUM
        loss.backward()
    opt.step()
    opt.zero_grad()
