"""A CUDA training loop whose every phase costs a known time: the doctor's GPU numbers against it.

Forward, backward and the optimizer each run ``torch.cuda._sleep`` for a planted number of
milliseconds (cycles calibrated on this GPU first, with CUDA events); one ``.item()`` a step
blocks until they are done. Variants:

- ``plain``: that alone;
- ``starve``: the loader's collate sleeps ``--data-ms`` on the host each batch (no workers);
- ``pageable``: each batch carries a large pageable tensor copied with a blocking ``.to()``;
- ``side-stream``: batches are copied on a side stream ahead of use (the apex data_prefetcher
  pattern), so phase changes happen inside ``with torch.cuda.stream(side):``.

The plant (milliseconds per phase, the calibrated copy time) is written to ``--plant``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--variant", choices=("plain", "starve", "pageable", "side-stream"), default="plain")
p.add_argument("--steps", type=int, default=40)
p.add_argument("--fwd-ms", type=float, default=20.0)
p.add_argument("--bwd-ms", type=float, default=30.0)
p.add_argument("--opt-ms", type=float, default=10.0)
p.add_argument("--data-ms", type=float, default=30.0)
p.add_argument("--copy-mb", type=int, default=256)
p.add_argument("--plant", required=True)
args = p.parse_args()
dev = torch.device("cuda")


def _cycles_per_ms() -> float:
    torch.cuda._sleep(50_000_000)  # clocks up first
    rates = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(20_000_000)
        end.record()
        end.synchronize()
        rates.append(20_000_000 / start.elapsed_time(end))
    return statistics.median(rates)


RATE = _cycles_per_ms()


def cycles(ms: float) -> int:
    return int(ms * RATE)


FWD, BWD, OPT = cycles(args.fwd_ms), cycles(args.bwd_ms), cycles(args.opt_ms)


class Sleep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        torch.cuda._sleep(FWD)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        torch.cuda._sleep(BWD)
        return grad


class SleepySGD(torch.optim.SGD):
    def step(self, closure=None):  # type: ignore[no-untyped-def]
        out = super().step(closure)
        torch.cuda._sleep(OPT)
        return out


class Batches(Dataset):
    def __init__(self) -> None:
        self.x = torch.randn(64, 64)
        mb = args.copy_mb if args.variant == "pageable" else 0
        self.big = torch.randn(mb * 2**20 // 4) if mb else torch.zeros(1)

    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int) -> int:
        return i


data = Batches()


def collate(items: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    if args.variant == "starve":
        time.sleep(args.data_ms / 1e3)
    return data.x, data.big


copy_ms = None
if args.variant == "pageable":  # the blocking pageable copy, timed alone
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        data.big.to(dev)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    copy_ms = statistics.median(times)
plant = {
    "variant": args.variant,
    "forward_ms": args.fwd_ms,
    "backward_ms": args.bwd_ms,
    "optimizer_ms": args.opt_ms,
    "data_ms": args.data_ms if args.variant == "starve" else 0.0,
    "copy_ms": copy_ms,
    "cycles_per_ms": RATE,
}
with open(args.plant, "w") as f:
    json.dump(plant, f)


class Model(nn.Module):
    """The root module the doctor times as forward: a layer, then the planted sleep."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return Sleep.apply(self.layer(x))


loader = DataLoader(data, batch_size=1, collate_fn=collate)
model = Model().to(dev)
opt = SleepySGD(model.parameters(), lr=1e-3)


class Prefetcher:
    """Copies the next batch on a side stream while the current one trains (apex's pattern)."""

    def __init__(self, it):  # type: ignore[no-untyped-def]
        self.it, self.stream = it, torch.cuda.Stream()
        self.preload()

    def preload(self) -> None:
        x, big = next(self.it)
        with torch.cuda.stream(self.stream):
            self.x = x.to(dev, non_blocking=True)
            self.big = big.to(dev, non_blocking=True)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        torch.cuda.current_stream().wait_stream(self.stream)
        x, big = self.x, self.big
        x.record_stream(torch.cuda.current_stream())
        self.preload()
        return x, big


it = iter(loader)
pre = Prefetcher(it) if args.variant == "side-stream" else None
for _step in range(args.steps):
    if pre is not None:
        x, big = pre.next()
    else:
        x, big = next(it)
        x, big = x.to(dev), big.to(dev)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    loss.item()  # the one sync a step: waits for the planted work
