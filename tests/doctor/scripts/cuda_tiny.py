"""A tiny CUDA training loop with known slow spots, for the doctor's CUDA paths."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(4096, 256), torch.randint(0, 10, (4096,)))
loader = DataLoader(data, batch_size=256, shuffle=True)  # pageable memory: blocking copies
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(100):
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()  # MARK: sync
