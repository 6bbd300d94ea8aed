"""A hand-written SGD update and no optimizer, the shape of pytorch/examples' word language model
and regression scripts: each step is forward, backward, then ``p.data.add_`` on every parameter,
which sleeps UPDATE_S (the planted cost of the update)."""

import time

import torch
from torch import nn

BATCH = 8
UPDATE_S = 0.1  # long enough that a loaded machine's slower compute cannot pass for a second update
LR = 0.1

torch.manual_seed(0)
x = torch.randn(BATCH, 16)
y = torch.randn(BATCH, 1)
model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
while True:
    model.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()  # MARK: backward
    with torch.no_grad():
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-LR)
    time.sleep(UPDATE_S)
