"""A training loop in the shapes torchpace apply must handle, for its golden test."""

import torch
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset
torch.set_float32_matmul_precision("medium")

data = TensorDataset(torch.randn(64, 3, 8, 8), torch.randint(0, 2, (64,)))
loader = DataLoader(data, batch_size=8, shuffle=True, num_workers=1, persistent_workers=True)
from torchpace.speedups import bucket_by_length
loader = bucket_by_length(loader)  # batches of similar lengths
extra = {"batch_size": 8}
other = DataLoader(data, **extra)  # **kwargs may hold the settings: left alone
net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.LazyLinear(2))
opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9, fused=True)
net.to(memory_format=torch.channels_last)
net.compile()
adam = torch.optim.Adam([torch.zeros(1, requires_grad=True)], foreach=True)  # not fusable here
for x, y in loader:
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        out = net(x)
        loss = nn.functional.cross_entropy(out, y)
    loss.backward()
    opt.step()
    with torch.autocast("cpu"):
        net(x)  # already under autocast
