"""A model compiled with torch.compile (the eager backend: dynamo traces, nothing is generated,
so it compiles in a moment on any machine)."""

import torch
from torch import nn

torch.manual_seed(0)
model = torch.compile(
    nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)), backend="eager"
)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 64), torch.randint(0, 8, (32,))
while True:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
