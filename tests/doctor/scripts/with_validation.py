"""Validation inside the training loop: every VAL_EVERY optimizer steps, a separate DataLoader
over a slow dataset (VAL_BATCHES batches of BATCH samples that sleep SLEEP_S each) is run under
torch.no_grad(). The training loader hands out ready-made batches (one list index each, no
collation), and the model's compute dwarfs that."""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

VAL_EVERY = 3
VAL_BATCHES = 3
BATCH = 4
SLEEP_S = 0.005


class SlowVal(Dataset):
    def __len__(self):
        return VAL_BATCHES * BATCH

    def __getitem__(self, i):
        time.sleep(SLEEP_S)
        return torch.ones(256), torch.tensor(i % 2)


torch.manual_seed(0)
batches = [(torch.randn(64, 256), torch.randint(0, 2, (64,))) for _ in range(8)]
train = DataLoader(batches, batch_size=None)
val = DataLoader(SlowVal(), batch_size=BATCH)
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.Linear(1024, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
while True:
    for x, y in train:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % VAL_EVERY == 0:
            model.eval()
            with torch.no_grad():
                for vx, _ in val:
                    model(vx)
            model.train()
