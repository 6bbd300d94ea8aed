"""Step timing shared by the benchmark scripts: a child harness, compile watching and FLOPs.

The child harness runs one training run in a fresh process, a naive example script (through
``runpy``) or ``torchpace fit`` (through ``torchpace.cli.main``), under the same global hooks on
both sides, so every step is timed the same way:

- a global optimizer step post hook records ``perf_counter()`` at the end of every step;
- the DataLoader iterator is wrapped to record, for every batch handed out, when and how much
  (samples, tokens, real tokens, shape), so a step's work is the batches fetched during it;
- torch.compile's start and end callbacks record when it was compiling.

    python benchmarks/_steptimer.py --out run.json --warmup 5 --measured 30 \
        -- examples/naive_cnn.py --steps 35 --eval-every 1000000000
    python benchmarks/_steptimer.py --out run.json --warmup 5 --measured 30 \
        --fit -- fit cnn --preset fast --steps 35 --no-progress
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


# -- compile watching -----------------------------------------------------------------------------
@dataclass
class CompileWatch:
    """Compile intervals ``(start, end, label, trigger)`` from torch._dynamo's callbacks.

    ``label`` is whatever the caller set before the compile started (the variant running)."""

    label: str = ""
    events: list[tuple[float, float, str, str]] = field(default_factory=list)
    _t0: float = 0.0

    def install(self) -> CompileWatch:
        from torch._dynamo.callback import callback_handler

        callback_handler.register_start_callback(self._start)
        callback_handler.register_end_callback(self._end)
        return self

    def _start(self, args: Any) -> None:
        self._t0 = time.perf_counter()

    def _end(self, args: Any) -> None:
        trigger = getattr(getattr(args, "callback_trigger", None), "name", "?")
        self.events.append((self._t0, time.perf_counter(), self.label, trigger))

    def seconds(self, t0: float, t1: float, label: str | None = None) -> float:
        """Compiling time inside ``[t0, t1]`` (of events with ``label``, if given)."""
        return sum(
            max(0.0, min(e, t1) - max(s, t0))
            for s, e, lab, _ in self.events
            if label is None or lab == label
        )


# -- FLOPs, for a utilization figure beside each speed (STYLE rule 13) --------------------------
_FLOPS: dict[tuple[str, tuple[tuple[int, ...], ...]], int] = {}


def step_flops(workload: str, batch: Any) -> int:
    """FLOPs of one forward + backward of ``workload``'s model on a batch of ``batch``'s shapes.

    ``workload`` is a recipe as ``torchpace.recipes.load_recipe`` reads it: a built-in workload
    or a recipe file (peers.py's lm at another size).

    Counted by ``torch.utils.flop_counter`` on the meta device (shapes only, no arithmetic), so
    it costs milliseconds; cached per shape. Matmuls, convolutions and attention are counted,
    elementwise work is not (the convention of MFU figures)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from torchpace.recipes import load_recipe

    tensors = tuple(b for b in batch if isinstance(b, torch.Tensor))
    key = (workload, tuple(tuple(t.shape) for t in tensors))
    if key not in _FLOPS:
        recipe = load_recipe(workload)
        with torch.device("meta"):
            model = recipe.model()
        meta = tuple(
            torch.empty(t.shape, dtype=t.dtype, device="meta") if isinstance(t, torch.Tensor) else t
            for t in batch
        )
        with FlopCounterMode(display=False) as counter:
            recipe.loss(model, meta).backward()
        _FLOPS[key] = int(counter.get_total_flops())
    return _FLOPS[key]


# -- the child -----------------------------------------------------------------------------------
def _count(batch: Any, pad: int | None) -> dict[str, Any]:
    """Samples, tokens and real tokens of a batch whose first tensor is its input (host reads:
    the batch is still on the CPU here, so counting costs no device sync)."""
    import torch

    x = batch[0] if isinstance(batch, (tuple, list)) and batch else batch
    if not isinstance(x, torch.Tensor):
        return {"samples": 1, "tokens": 0, "real_tokens": 0, "shape": []}
    tokens = 0 if x.is_floating_point() else x.numel()  # images count no tokens
    real = int((x != pad).count_nonzero()) if pad is not None and tokens else tokens
    return {"samples": int(x.shape[0]), "tokens": tokens, "real_tokens": real, "shape": [*x.shape]}


def _reaped_cpu() -> float:
    """CPU seconds of this process's children that have exited and been waited for."""
    t = os.times()
    return t.children_user + t.children_system


def child(
    argv: list[str], *, fit: bool, warmup: int, measured: int, pad: int | None, out: str
) -> int:
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    from torchpace.measure.noise import LoadProbe

    start = time.perf_counter()
    stamps: list[float] = []
    batches: list[dict[str, Any]] = []
    load: dict[str, Any] = {}
    watch = CompileWatch().install()

    def stamp(opt: object, args: object, kwargs: object) -> None:
        stamps.append(time.perf_counter())
        if len(stamps) == warmup:  # the end of the warm-up: the measured window starts
            load.update(probe=LoadProbe(), children=_reaped_cpu(), t0=time.perf_counter())
        elif len(stamps) == warmup + measured and "probe" in load:
            raw = load["probe"].foreign_cores()
            # LoadProbe counts the live process tree only: the CPU time of children that exited
            # inside the window (the compiler's g++ runs) would read as other load.
            reaped = (_reaped_cpu() - load["children"]) / (time.perf_counter() - load["t0"])
            load["foreign_cores_raw"] = raw
            load["foreign_cores"] = None if raw is None else max(0.0, raw - reaped)

    register_optimizer_step_post_hook(stamp)
    original_next = _BaseDataLoaderIter.__next__

    def counted_next(self: Any) -> Any:
        batch = original_next(self)
        batches.append({"t": time.perf_counter(), **_count(batch, pad)})
        return batch

    _BaseDataLoaderIter.__next__ = counted_next  # type: ignore[method-assign]
    rc = 0
    if fit:
        from torchpace.cli import main

        rc = main(argv)
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")
    rel = [t - start for t in stamps]
    Path(out).write_text(
        json.dumps(
            {
                "stamps": rel,
                "batches": [{**b, "t": b["t"] - start} for b in batches],
                "compiles": [(s - start, e - start, trig) for s, e, _, trig in watch.events],
                "foreign_cores": load.get("foreign_cores"),
                "foreign_cores_raw": load.get("foreign_cores_raw"),
                "rc": rc,
            }
        )
    )
    return rc


# -- the parent's view of one child run ----------------------------------------------------------
def steady_steps(run: dict[str, Any], warmup: int, measured: int) -> list[dict[str, Any]]:
    """The measured steps ``warmup + 1 .. warmup + measured`` of a child run: each one's seconds,
    the work of the batches fetched during it, and the compile seconds inside it.

    Step k (1-based) ends at ``stamps[k - 1]`` and starts at the end of step k - 1, so the time
    between two stamps holds everything the loop does per step: fetching and collating the
    batch, moving it, forward, backward, the optimizer step, zeroing grads and logging."""
    stamps = run["stamps"]
    if warmup < 1 or len(stamps) < warmup + measured:
        raise ValueError(
            f"the run took {len(stamps)} optimizer steps, fewer than warm-up {warmup} + "
            f"measured {measured} (warm-up must be at least 1: step 1 has no start stamp)"
        )
    steps = []
    for k in range(warmup, warmup + measured):
        t0, t1 = stamps[k - 1], stamps[k]
        got = [b for b in run["batches"] if t0 < b["t"] <= t1]
        compiling = sum(max(0.0, min(e, t1) - max(s, t0)) for s, e, _ in run["compiles"])
        steps.append(
            {
                "seconds": t1 - t0,
                "compile_seconds": compiling,
                "batches": len(got),
                "samples": sum(b["samples"] for b in got),
                "tokens": sum(b["tokens"] for b in got),
                "real_tokens": sum(b["real_tokens"] for b in got),
                "shapes": [b["shape"] for b in got],
            }
        )
    return steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--measured", type=int, required=True)
    ap.add_argument("--pad", type=int, help="the padding token id, to count real tokens")
    ap.add_argument("--fit", action="store_true", help="ARGS go to torchpace.cli.main")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    argv = a.args[1:] if a.args[:1] == ["--"] else a.args
    raise SystemExit(
        child(argv, fit=a.fit, warmup=a.warmup, measured=a.measured, pad=a.pad, out=a.out)
    )


if __name__ == "__main__":
    main()
