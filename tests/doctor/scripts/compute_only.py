"""No input wait: batches are made before the loop (default) or come from a DataLoader over a
small in-memory TensorDataset (--loader), and the model's compute dwarfs indexing them."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--loader", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
x = torch.randn(64, 256)
y = torch.randint(0, 10, (64,))
# ~1.7 GFLOP per step: tens of ms, against well under a millisecond to index 16 samples.
model = nn.Sequential(nn.Linear(256, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.Linear(4096, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
if args.loader:
    batches = DataLoader(TensorDataset(x, y), batch_size=16)
else:
    batches = [(x[i : i + 16], y[i : i + 16]) for i in range(0, 64, 16)]
while True:
    for xb, yb in batches:
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
