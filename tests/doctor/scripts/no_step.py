"""Builds an optimizer and runs forward and backward, but never steps the optimizer, then
finishes normally: nothing ends a training step."""

import torch
from torch import nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
for _ in range(5):
    model(x).square().mean().backward()
print("no_step.py done")
