"""Saves and copies its whole model while it trains, as older scripts and EMA code do:
``torch.save(model, path)`` at step 3 and at the end (pytorch/examples' word_language_model
saves its best model so), ``copy.deepcopy(model)`` at step 3. Argument: the checkpoint path."""

import copy
import sys

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
ema = None
for step in range(1, 41):
    x = torch.randn(32, 8)
    loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 3:
        ema = copy.deepcopy(model)
        torch.save(model, sys.argv[1])
torch.save(model, sys.argv[1])
assert ema is not None and ema(torch.randn(2, 8)).shape == (2, 1)
print("saved", sys.argv[1])
