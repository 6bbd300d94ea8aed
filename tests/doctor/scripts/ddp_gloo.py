"""Two-rank DDP on CPU (gloo) with a planted straggler: rank 1's dataset sleeps 30 ms a batch."""

import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

BATCH = 32


class Points(Dataset):
    def __init__(self, delay: float) -> None:
        self.x = torch.randn(1024, 64)
        self.y = torch.randint(0, 4, (1024,))
        self.delay = delay

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        if self.delay and i % BATCH == 0:  # once a batch: the loader is not shuffled
            time.sleep(self.delay)
        return self.x[i], self.y[i]


dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
loader = DataLoader(Points(0.03 if rank == 1 else 0.0), batch_size=BATCH)
model = DistributedDataParallel(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(10):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
dist.destroy_process_group()
