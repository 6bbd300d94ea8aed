"""A training script with planted truths, for torchpace's script tune and run.

It trains a small conv net on random data and can take the shapes real scripts have: gradient
accumulation, a manual SGD update with no optimizer, an LBFGS closure, its own seed, a crash at a
given step, an evaluation inside the training loop. With --losses it writes the loss of each
optimizer step (the mean over its micro-batches; an LBFGS step's first closure evaluation) to a
JSON file, the truth torchpace's loss capture is checked against. Planted costs:

- channels_last input: the logits get noise (a "numerics-preserving" technique that breaks them);
- a fused optimizer: each step sleeps 100 ms (a technique that is slower);
- gradients that are still tensors after zero_grad: 100 ms (freeing them, set_to_none, gains);
- every sample costs 3 ms, so a larger batch does not pay.
"""

import argparse
import json
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
p.add_argument("--accumulate", type=int, default=1)
p.add_argument("--manual", action="store_true", help="update p.data by hand, no optimizer")
p.add_argument("--lbfgs", action="store_true")
p.add_argument("--crash-at", type=int, default=0)
p.add_argument("--seed", type=int)
p.add_argument("--losses")
p.add_argument("--no-train", action="store_true")
p.add_argument("--eval-every", type=int, default=0, help="evaluate inside the training loop")
p.add_argument("--manual-lr", action="store_true", help="set the LR by hand each step (nanoGPT)")
p.add_argument("--lrs", help="write the LR the optimizer held at each step here")
args = p.parse_args()
if args.seed is not None:
    torch.manual_seed(args.seed)
if args.no_train:
    print("nothing to train")
    raise SystemExit(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        planted = x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
        h = torch.relu(self.bn(self.conv(x))).mean((2, 3))
        out = self.head(h)
        return out + 3.0 * torch.randn_like(out) if planted else out


model = Net()
data = torch.randn(512, 3, 8, 8)
target = torch.randint(0, 4, (512,))
loader = DataLoader(TensorDataset(data, target), batch_size=16, shuffle=True)
criterion = nn.CrossEntropyLoss()
if args.manual:
    opt = None
elif args.lbfgs:
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=3)
else:
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
truth = []
lrs = []
step = 0
micro = []
while step < args.steps:
    for i, (x, y) in enumerate(loader):
        time.sleep(0.003 * x.shape[0])
        if args.lbfgs:
            first = []

            def closure(x=x, y=y, first=first):
                opt.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                first.append(float(loss.detach()))
                return loss

            opt.step(closure)
            truth.append(first[0])
            step += 1
        else:
            loss = criterion(model(x), y) / args.accumulate
            loss.backward()
            micro.append(float(loss.detach()))
            if (i + 1) % args.accumulate:
                continue
            if opt is None:
                with torch.no_grad():
                    for q in model.parameters():
                        q.data.add_(q.grad, alpha=-0.05)
                        q.grad = None
            else:
                if opt.param_groups[0].get("fused"):
                    time.sleep(0.1)
                if args.manual_lr:
                    for group in opt.param_groups:
                        group["lr"] = 0.05 * (1 - step / (2 * args.steps))
                lrs.append(opt.param_groups[0]["lr"])
                opt.step()
                opt.zero_grad(set_to_none=False)
                if model.conv.weight.grad is not None:
                    time.sleep(0.1)
            truth.append(sum(micro) / len(micro))
            micro = []
            step += 1
        if args.eval_every and step % args.eval_every == 0:
            model.eval()
            with torch.no_grad():
                model(x)
            model(x)  # in eval mode but with grad enabled, as many scripts evaluate
            model.train()
        if args.losses:
            with open(args.losses, "w") as f:
                json.dump(truth, f)
        if args.lrs:
            with open(args.lrs, "w") as f:
                json.dump(lrs, f)
        if step == args.crash_at:
            raise RuntimeError(f"planted crash at step {step}")
        if step >= args.steps:
            break
print(f"trained {step} steps")
