"""A model in float64, as a script that builds its data with torch.from_numpy on float64 arrays
and calls .double() would be: the step is almost all forward and backward, in double precision."""

import numpy as np
import torch
from torch import nn

rng = np.random.default_rng(0)
x = torch.from_numpy(rng.standard_normal((64, 256)))  # float64, as numpy made it
y = torch.from_numpy(rng.standard_normal((64, 1)))
model = nn.Sequential(nn.Linear(256, 1024), nn.Tanh(), nn.Linear(1024, 1)).double()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
while True:
    loss = nn.functional.mse_loss(model(x), y)  # MARK: forward
    opt.zero_grad()
    loss.backward()
    opt.step()
