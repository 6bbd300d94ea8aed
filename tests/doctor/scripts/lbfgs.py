"""LBFGS with a closure, the shape of pytorch/examples' time-sequence-prediction: one
``optimizer.step(closure)`` evaluates the closure up to MAX_ITER times, each a forward and a
backward, so a step holds MAX_ITER backward() calls. The model's forward sleeps FORWARD_S (the
planted cost of a closure's forward)."""

import time

import torch
from torch import nn

BATCH = 8
MAX_ITER = 4
FORWARD_S = 0.005


class Slow(nn.Sequential):
    def forward(self, x):
        time.sleep(FORWARD_S)
        return super().forward(x)


torch.manual_seed(0)
x = torch.randn(BATCH, 16)
y = torch.randn(BATCH, 1)
model = Slow(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
# tolerance_change=-1 and tolerance_grad=-1: never stop early, so every step runs MAX_ITER closures
opt = torch.optim.LBFGS(
    model.parameters(), lr=0.1, max_iter=MAX_ITER, tolerance_grad=-1.0, tolerance_change=-1.0
)


def closure():
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


while True:
    opt.step(closure)
