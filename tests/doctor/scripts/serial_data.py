"""Input wait that loader workers cannot hide: every sample takes SLEEP_S under one lock that
forked workers share, so however many workers load, one sample is read at a time (a dataset on
a single slow device, say). The doctor sees a large data wait and estimates a large gain from
workers; the change measures about 1x."""

import multiprocessing
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SLEEP_S = 0.02
BATCH = 4
LOCK = multiprocessing.get_context("fork").Lock()
X, Y = torch.ones(8), torch.tensor(1)


class SerialDataset(Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        with LOCK:
            time.sleep(SLEEP_S)
        return X, Y


loader = DataLoader(SerialDataset(), batch_size=BATCH)  # workers fork (Linux): LOCK is shared
model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
sys.exit("the loader ran out before the doctor stopped the script")
