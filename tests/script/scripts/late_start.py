"""A training script whose first step comes late: ``--late`` seconds of set-up before a tiny loop
(as nanoGPT evaluates at iteration 0 before it trains), for the tune's trial time limits."""

import argparse
import time

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--late", type=float, default=2.0)
p.add_argument("--steps", type=int, default=40)
args = p.parse_args()
time.sleep(args.late)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(args.steps):
    i = (step * 16) % 64
    loss = nn.functional.mse_loss(model(x[i : i + 16]), y[i : i + 16])
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"trained {args.steps} steps")
