"""Variable-length sequences padded to each batch's longest, from a dataset that states its
samples' ``lengths``; a shuffled DataLoader, ``--epochs`` epochs (100). ``--out PATH`` writes
each step's batch (dataset indices) and padded fraction, as the script saw them."""

import argparse
import json

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

N = 48
BATCH = 4


class Sequences(Dataset):
    def __init__(self):
        gen = torch.Generator().manual_seed(1)
        self.lengths = torch.randint(2, 64, (N,), generator=gen)
        self.labels = torch.randint(0, 2, (N,), generator=gen)

    def __len__(self):
        return N

    def __getitem__(self, i):
        return i, torch.ones(int(self.lengths[i])), self.labels[i]


def pad(items):
    longest = max(len(x) for _, x, _ in items)
    batch = torch.zeros(len(items), longest)
    for row, (_, x, _) in enumerate(items):
        batch[row, : len(x)] = x
    return [i for i, _, _ in items], batch, torch.stack([y for _, _, y in items])


ap = argparse.ArgumentParser()
ap.add_argument("--out")
ap.add_argument("--epochs", type=int, default=100)
args = ap.parse_args()
loader = DataLoader(Sequences(), batch_size=BATCH, shuffle=True, collate_fn=pad)
model = nn.Linear(1, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
seen = []
for epoch in range(args.epochs):
    for idx, x, y in loader:
        padded = float((x == 0).float().mean())
        seen.append({"epoch": epoch, "batch": idx, "padded": padded})
        logits = model(x.mean(1, keepdim=True))
        opt.zero_grad()
        nn.functional.cross_entropy(logits, y).backward()
        opt.step()
        if args.out:
            with open(args.out, "w") as f:
                json.dump(seen, f)
