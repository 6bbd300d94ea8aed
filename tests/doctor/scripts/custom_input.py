"""Batches built by the script's own ``get_batch()`` (no DataLoader), as nanoGPT does: it takes
GET_S of each step, the model's forward FORWARD_S, so get_batch holds about 30% of the step."""

import time

import torch
from torch import nn

GET_S = 0.03
FORWARD_S = 0.07
BATCH = 8


class Model(nn.Linear):
    def forward(self, x):
        time.sleep(FORWARD_S)
        return super().forward(x)


def get_batch():
    x = torch.randn(BATCH, 16)
    time.sleep(GET_S)  # MARK: get_batch
    return x, torch.randn(BATCH, 1)


torch.manual_seed(0)
model = Model(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
while True:
    x, y = get_batch()
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
