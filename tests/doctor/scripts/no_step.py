"""Runs forward and backward but never steps an optimizer, then finishes normally."""

import torch
from torch import nn

model = nn.Linear(4, 1)
x = torch.randn(8, 4)
for _ in range(5):
    model(x).square().mean().backward()
print("no_step.py done")
