"""An image-style pipeline whose transforms are nn.Modules (as torchvision's are), run by the
dataset in the main process (num_workers=0): each sample's transform sleeps SLEEP_S and reads a
CPU tensor's value on the host (``int(tensor)``, marked), so the step is mostly data wait."""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SLEEP_S = 0.004
BATCH = 4


class SlowNormalize(nn.Module):
    def forward(self, x):
        time.sleep(SLEEP_S)
        scale = int(x.abs().sum()) + 1  # MARK: host read
        return x / scale


class Images(Dataset):
    def __init__(self):
        self.transform = nn.Sequential(SlowNormalize(), nn.Flatten(0))

    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        return self.transform(torch.ones(1, 4, 4)), torch.tensor(i % 2)


loader = DataLoader(Images(), batch_size=BATCH)
model = nn.Linear(16, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
sys.exit("the loader ran out before the doctor stopped the script")
