"""A small GPT trained on the Python standard library's sources, written the way many loops are.

Deliberately naive (see the comments marked SLOW;
`SLOW(TPxxx)` marks what `torchpace lint` reports on that line); torchpace is measured from here.

    python examples/naive_lm.py --steps 200
"""

import argparse

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from torchpace.workloads.lm import dataset
from torchpace.workloads.lm import model as gpt


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--accum", type=int, default=2, help="micro-batches per optimizer step")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--preset", default="1m")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--eval-batches", type=int, default=8)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(args.seed)
    train_loader = DataLoader(  # SLOW(TP101): no workers (pinning comes with them, TP102)
        dataset("train", preset=args.preset), batch_size=args.batch_size, shuffle=True
    )
    val_loader = DataLoader(dataset("val", preset=args.preset), batch_size=64)
    model = gpt(args.preset).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)  # SLOW: Adam, not fused AdamW

    step = 0
    micro = 0
    while step < args.steps:
        for x, y in train_loader:  # SLOW(TP302): fp32 on CUDA
            x, y = x.to(device), y.to(device)
            logits = model(x)  # SLOW: fp32
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1)) / args.accum
            loss.backward()
            micro += 1
            if micro % args.accum != 0:
                continue
            optimizer.step()
            optimizer.zero_grad()
            if step % 10 == 0:
                # Formatting a tensor syncs, but only 1 step in 10: lint lets this cadence pass.
                print(f"step {step} loss {loss * args.accum}", flush=True)
            if torch.isnan(loss).any():  # SLOW(TP204): branches on a tensor
                raise RuntimeError("loss is NaN")
            step += 1
            if step % args.eval_every == 0:
                total, count = 0.0, 0
                for vx, vy in val_loader:  # SLOW(TP403): no torch.no_grad()
                    vlogits = model(vx.to(device))
                    vloss = F.cross_entropy(
                        vlogits.view(-1, vlogits.size(-1)), vy.to(device).view(-1)
                    )
                    total += vloss.item()
                    count += 1
                    if count == args.eval_batches:
                        break
                print(f"step {step} val_loss {total / count:.4f}", flush=True)
            if step >= args.steps:
                break
    print(f"final loss {(loss * args.accum).item():.4f}")


if __name__ == "__main__":
    main()
