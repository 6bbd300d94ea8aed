"""Hogwild: the model in shared memory, trained by PROCESSES child processes, each running
STEPS optimizer steps; the main process only starts and joins them (pytorch/examples'
mnist_hogwild). ``--start fork|spawn`` picks the start method. Exits 1 if a child failed."""

import argparse
import sys

import torch
import torch.multiprocessing as mp
from torch import nn

PROCESSES = 2
STEPS = 40


def train(rank: int, model: nn.Module) -> None:
    torch.manual_seed(rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randn(8, 1)
    for _ in range(STEPS):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--start", default="fork")
    args = ap.parse_args()
    ctx = mp.get_context(args.start)
    model = nn.Linear(16, 1)
    model.share_memory()
    workers = [ctx.Process(target=train, args=(r, model)) for r in range(PROCESSES)]
    for w in workers:
        w.start()  # MARK: start
    for w in workers:
        w.join()
    print("hogwild done, child exit codes", [w.exitcode for w in workers])
    sys.exit(0 if all(w.exitcode == 0 for w in workers) else 1)
