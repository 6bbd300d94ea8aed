"""Planted input wait: every sample sleeps SLEEP_S, num_workers=0, and the model is tiny, so the
step is almost all data wait: SLEEP_S * BATCH per step."""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SLEEP_S = 0.008
BATCH = 4
X, Y = torch.ones(8), torch.tensor(1)
busy = "--busy" in sys.argv


class SlowDataset(Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        if busy:  # the same time spent computing instead of waiting (--busy)
            end = time.thread_time() + SLEEP_S
            while time.thread_time() < end:
                pass
        else:
            time.sleep(SLEEP_S)  # the planted cost of loading one sample; the rest is negligible
        return X, Y


def main():
    loader = DataLoader(SlowDataset(), batch_size=BATCH)  # MARK: loader
    if "--workers" in sys.argv:
        workers = int(sys.argv[sys.argv.index("--workers") + 1])
        loader = DataLoader(SlowDataset(), batch_size=BATCH, num_workers=workers)
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # --compute: a model that keeps torch's threads (every core) busy for about as long as the
    # batch takes to load, as a VAE's did beside its in-process MNIST loading. The layer count
    # is set on the machine that runs it: a fixed six layers took 14 ms of a 33 ms load on a
    # faster CPU, where workers then did help (47 ms steps, 41 with two workers).
    heavy = None
    if "--compute" in sys.argv:
        block = nn.Sequential(*[nn.Linear(512, 512) for _ in range(2)])
        h = torch.ones(256, 512)
        block(h).mean().backward()  # warm
        start = time.perf_counter()
        for _ in range(5):
            block(h).mean().backward()
        once = (time.perf_counter() - start) / 5
        heavy = nn.Sequential(*[block] * max(1, round(SLEEP_S * BATCH / once)))
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        if heavy is not None:
            loss = loss + heavy(torch.ones(256, 512)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    sys.exit("the loader ran out before the doctor stopped the script")


if __name__ == "__main__":
    main()
