"""A CUDA loop with an LR scheduler and gradient clipping: an fp16 plan must run on it (a
scheduler wraps ``optimizer.step``) and clip unscaled gradients (the GPU kit's stage A)."""

import argparse
import json

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=60)
p.add_argument("--json", help="write the final loss, how far the parameters moved, the first norm")
args = p.parse_args()
device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
start = [q.detach().clone() for q in model.parameters()]
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=20, gamma=0.5)
x = torch.randn(512, 64, device=device)
y = x[:, :1] * 2.0
norms = []
for _step in range(args.steps):
    loss = nn.functional.mse_loss(model(x).float(), y)
    opt.zero_grad()
    loss.backward()
    # 0.5: below this model's gradient norm (about 3), so the clip is active every step
    norms.append(nn.utils.clip_grad_norm_(model.parameters(), 0.5))
    opt.step()
    sched.step()
final = float(loss.detach())
pairs = zip(model.parameters(), start, strict=True)
moved = sum(float((q.detach() - s).norm() ** 2) for q, s in pairs) ** 0.5
print(
    f"final loss {final:.4f}, parameters moved {moved:.4g}, first grad norm {float(norms[0]):.4g}"
)
if args.json:
    with open(args.json, "w") as f:
        json.dump(
            {"final_loss": final, "displacement": moved, "first_grad_norm": float(norms[0])}, f
        )
