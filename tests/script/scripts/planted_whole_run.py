"""A planted whole run for `torchpace compare`: known times, known loss.

Each training step sleeps STEP_MS (the planted step time: the tiny model's own work is far
smaller), every EVAL_EVERY steps an evaluation under no_grad sleeps EVAL_MS, and the loss is a
least-squares fit with learning rate LR. Tests change the constants (and commit them) to plant a
slower step or a worse learning rate; the command line can override each.
"""

import argparse
import time

import torch

STEP_MS = 20.0
EVAL_MS = 0.0
EVAL_EVERY = 10
LR = 0.05

p = argparse.ArgumentParser()
p.add_argument("--max-steps", type=int, default=30)
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--step-ms", type=float, default=STEP_MS)
p.add_argument("--eval-ms", type=float, default=EVAL_MS)
p.add_argument("--lr", type=float, default=LR)
args = p.parse_args()

g = torch.Generator().manual_seed(1234)  # the data is the same in every run; the init is not
x = torch.randn(4096, 16, generator=g)
y = x @ torch.randn(16, 1, generator=g) + 0.1 * torch.randn(4096, 1, generator=g)
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(x, y), batch_size=args.batch_size, shuffle=True
)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
step = 0
while step < args.max_steps:
    for xb, yb in loader:
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        time.sleep(args.step_ms / 1e3)
        opt.step()
        step += 1
        if args.eval_ms and step % EVAL_EVERY == 0:
            model.eval()
            with torch.no_grad():
                model(x[:64])
            time.sleep(args.eval_ms / 1e3)
            model.train()
        if step >= args.max_steps:
            break
print(f"done: {step} steps, loss {loss.item():.4f}")
