"""A training step of a known FLOP count, and an evaluation pass of VAL_BATCH samples (no
autograd) inside every step, as Lightning's validation can fall inside the doctor's probe step."""

import torch
from torch import nn

BATCH = 8
VAL_BATCH = 512
IN, OUT = 64, 32

torch.manual_seed(0)
model = nn.Linear(IN, OUT, bias=False)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(BATCH, IN), torch.randn(BATCH, OUT)
val = torch.randn(VAL_BATCH, IN)
while True:
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        model(val)
