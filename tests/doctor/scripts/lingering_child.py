"""A child process that never ends, and a main process that trains ``--steps`` steps (0: none)
and then joins it: the doctor stops the script at its first-step timeout or after its measured
steps, and the child must not outlive the doctor (pytorch/examples' mnist_hogwild was left
training as an orphan). ``--start fork|spawn`` picks the start method."""

import argparse
import multiprocessing as mp
import time


def linger() -> None:
    while True:
        time.sleep(1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--start", default="spawn")
    ap.add_argument("--steps", type=int, default=0)
    args = ap.parse_args()
    child = mp.get_context(args.start).Process(target=linger)
    child.start()  # MARK: start
    print("child", child.pid, flush=True)
    if args.steps:
        import torch

        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(args.steps):
            opt.zero_grad()
            model(torch.randn(8, 4)).sum().backward()
            opt.step()
    child.join()
