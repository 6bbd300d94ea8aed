"""A CUDA loop that turns TF32 on with torch >= 2.9's fp32_precision API (issue 28 bug 1)."""

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    torch.backends.cudnn.conv.fp32_precision = "tf32"
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 256, device=device)
y = torch.randint(0, 10, (256,), device=device)
for _step in range(40):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", float(loss))
