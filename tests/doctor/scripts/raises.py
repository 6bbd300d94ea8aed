"""Trains a few steps, then its dataset raises: the error comes up through the DataLoader (and
the doctor's timing of it), so the traceback must show this file's frames and none of the
doctor's."""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FAIL_AT = 40  # sample index: batch 10 of 4


class Flaky(Dataset):
    def __len__(self):
        return 1000

    def __getitem__(self, i):
        if i == FAIL_AT:
            raise RuntimeError(f"planted failure at sample {i}")  # MARK: raise
        return torch.ones(4), torch.tensor(0)


model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in DataLoader(Flaky(), batch_size=4):  # MARK: loop
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
