"""A loop with a GradScaler whose second and fourth steps overflow: the scaler skips their
optimizer step, and each still ends a step (runtime/steps.py)."""

import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
x = torch.randn(16, 8)
for i in range(12):
    opt.zero_grad()
    loss = model(x).pow(2).mean() * (float("inf") if i in (1, 3) else 1.0)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
print("STEPS", 12)
