"""Planted host reads: per step, one .item() on one line, two on another (an inner loop of two),
and one more every LOG_EVERY steps (a logging cadence, not every step). Written for a GPU where
there is one, as most scripts are: on a GPU each read waits for the queued work."""

import torch
from torch import nn

LOG_EVERY = 4

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"  # MARK: device
x = torch.randn(16, 8).to(device)
y = torch.randint(0, 2, (16,)).to(device)
model = nn.Linear(8, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
logged = []
while True:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    last = loss.item()  # MARK: once
    for p in model.parameters():
        p.grad.norm().item()  # MARK: twice
    if step % LOG_EVERY == 0:
        logged.append(loss.item())  # MARK: cadence
    opt.step()
    step += 1
