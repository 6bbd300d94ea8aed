"""Run by tests/train/test_fit_distributed.py under torchrun with 2 gloo processes.

Each rank writes what it saw to OUT/rank<r>.json; the test compares the ranks.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.utils.data import DataLoader, Dataset

from torchpace.speedups.batching import LengthBucketBatchSampler
from torchpace.speedups.distributed import init_from_env, world
from torchpace.train import Plan, fit, prepare

OUT = Path(sys.argv[1])
N = 64


class Indexed(Dataset[tuple[torch.Tensor, torch.Tensor, int]]):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(N, 16, generator=g), torch.randint(0, 4, (N,), generator=g)

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        return self.x[i], self.y[i], i


def setup(accumulate: int) -> tuple[nn.Module, torch.optim.Optimizer, Any, dict[str, int]]:
    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts them)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(
        Indexed(), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0)
    )
    model, opt, loader = prepare(model, opt, loader, plan=Plan(accumulate=accumulate))
    calls = {"allreduce": 0}

    # No annotations: DDP checks them at run time, and this file's are strings.
    def counting(state, bucket):  # type: ignore[no-untyped-def]
        calls["allreduce"] += 1
        return default_hooks.allreduce_hook(state, bucket)

    model.register_comm_hook(dist.group.WORLD, counting)  # type: ignore[operator]
    return model, opt, loader, calls


def main() -> None:
    init_from_env("cpu")
    w = world()
    seen: list[int] = []

    def loss_fn(model: nn.Module, batch: Any) -> torch.Tensor:
        x, y, idx = batch
        seen.extend(int(i) for i in idx)
        return F.cross_entropy(model(x), y)

    # One optimizer step without accumulation: how many all-reduces (buckets) one sync costs.
    model, opt, loader, calls = setup(accumulate=1)
    fit(model, opt, loader, loss_fn, plan=Plan(), steps=1, progress=False)
    per_sync = calls["allreduce"]

    # Accumulation over 4 micro-batches, 2 steps (one epoch of this rank's 8 batches):
    # grads after each step's backward, compared across ranks below.
    seen.clear()
    model, opt, loader, calls = setup(accumulate=4)
    grads: list[torch.Tensor] = []
    opt.register_step_pre_hook(
        lambda o, *a: grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    )
    result = fit(
        model,
        opt,
        loader,
        loss_fn,
        plan=Plan(accumulate=4),
        steps=2,
        progress=False,
        checkpoint_dir=OUT / "ckpt",
        checkpoint_every=1,
    )
    # Resume from the first checkpoint: the second step must come out the same on every rank.
    model, opt, loader, _ = setup(accumulate=4)
    resumed = fit(
        model,
        opt,
        loader,
        loss_fn,
        plan=Plan(accumulate=4),
        steps=2,
        progress=False,
        resume=OUT / "ckpt" / "step-1.pt",
    )
    gathered = [torch.zeros_like(grads[0]) for _ in range(w.size)]
    dist.all_gather(gathered, grads[-1])
    bucket = LengthBucketBatchSampler([1 + (i * 37) % 50 for i in range(N)], 4, seed=0)
    bucket.set_epoch(1)
    out = {
        "rank": w.rank,
        "world": w.size,
        "per_sync": per_sync,
        "allreduce_accumulating": calls["allreduce"],
        "grads_equal_across_ranks": all(torch.equal(g, gathered[0]) for g in gathered),
        "indices": seen[:32],  # the uninterrupted run's; the resumed run appends its own
        "bucket_indices": [i for batch in bucket for i in batch],
        "bucket_batches": len(bucket),
        "checkpoints": result.checkpoints,
        "losses": result.losses,
        "resumed_losses": resumed.losses,
    }
    (OUT / f"rank{w.rank}.json").write_text(json.dumps(out))
    # Both ranks done before either tears down the group: a rank that leaves while the other
    # still talks to it can abort in gloo's threads at exit.
    model = opt = loader = None  # type: ignore[assignment]
    gc.collect()  # the DDP modules, in reference cycles, go before the group (see fit's command)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
