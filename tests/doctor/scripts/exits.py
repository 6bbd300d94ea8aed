"""Trains EXIT_AFTER steps, then calls sys.exit(3)."""

import sys

import torch
from torch import nn

EXIT_AFTER = 8

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 4)
for step in range(1, 1000):
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == EXIT_AFTER:
        sys.exit(3)
