"""Large bf16 matmuls a step, for the doctor's MFU on a GPU (the kit's stage B): four 8192x8192
bias-free layers on 8192 rows under bf16 autocast, about 26 TFLOP a step."""

import torch
from torch import nn

dev = "cuda"
torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(8192, 8192, bias=False) for _ in range(4)]).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-6)
x = torch.randn(8192, 8192, device=dev)
for step in range(40):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print(step, float(loss))
