"""One contestant's training run in a fresh process, timed and measured the same way for all.

    python benchmarks/_peers_child.py --contestant lightning --job '{...}' --out run.json

Around the contestant's ``train(job)`` (``peer_<name>.py``), the harness:

- counts optimizer steps with a global step post hook, which fires inside every framework (the
  naive script's loop, fit(), Lightning's and Accelerate's optimizer wrappers). At the end of
  step ``warmup`` and of the last step it drains the device and reads the clock: the window
  holds whole steps and no sync inside it. There it also resets, then reads, the peak memory
  (the allocator's peak on CUDA, the RSS high-water mark on CPU: torchpace.measure.memory);
- counts the samples of every batch a DataLoader iterator hands out, and torch.compile's time
  (both from _steptimer.py); throughput is the window's samples over its seconds less any
  compiling inside it, which is reported apart;
- then, untimed: the final model's mean loss over fixed slices of the training split (the
  round's seed) and of the validation split (seed 0: the same for every run), in eval mode
  without autograd, under the autocast it trained with.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import time
from pathlib import Path
from typing import Any

import torch
from _peers_job import Job, Trained
from _steptimer import CompileWatch, _count, _reaped_cpu
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.data import DataLoader, Subset
from torch.utils.data.dataloader import _BaseDataLoaderIter

from torchpace.measure import memory
from torchpace.measure.clock import resolve_device, synchronize
from torchpace.measure.noise import LoadProbe
from torchpace.recipes import load_recipe
from torchpace.train import Plan, evaluate
from torchpace.workloads.seqcls import PAD

EVAL_SAMPLES = 512  # per split: 8 batches of 64, a few seconds on 2 cores for every workload
EVAL_BATCH = 64
VAL_SEED = 0  # the validation split every run is judged on, whatever the round's seed


class Window:
    """The measured window: steps ``warmup + 1 .. steps``, read at the step post hook."""

    def __init__(self, device: torch.device, warmup: int, steps: int, pad: int | None) -> None:
        self.device, self.warmup, self.steps, self.pad = device, warmup, steps, pad
        self.start = time.perf_counter()
        self.count = 0
        self.t0 = self.t1 = 0.0
        self.first_step_s = 0.0
        self.batches: list[dict[str, Any]] = []
        self.peak: memory.PeakMemory | None = None
        self.load: dict[str, Any] = {}
        self.watch = CompileWatch().install()

    def install(self) -> Window:
        register_optimizer_step_post_hook(self._stamp)
        original = _BaseDataLoaderIter.__next__
        window = self

        def counted(it: Any) -> Any:
            batch = original(it)
            window.batches.append({"t": time.perf_counter(), **_count(batch, window.pad)})
            return batch

        _BaseDataLoaderIter.__next__ = counted  # type: ignore[method-assign]
        return self

    def _stamp(self, opt: object, args: object, kwargs: object) -> None:
        self.count += 1
        if self.count == 1:
            self.first_step_s = time.perf_counter() - self.start
        if self.count == self.warmup:
            synchronize(self.device)  # note: a sync, once, at the window's start
            memory.reset_peak(self.device)
            self.load = {"probe": LoadProbe(), "children": _reaped_cpu()}
            self.t0 = time.perf_counter()
        elif self.count == self.steps:
            synchronize(self.device)  # note: a sync, once, at the window's end
            self.t1 = time.perf_counter()
            self.peak = memory.peak(self.device)
            raw = self.load["probe"].foreign_cores()
            # compiler processes that exited inside the window are ours, not other load
            reaped = (_reaped_cpu() - self.load["children"]) / (self.t1 - self.t0)
            self.load["foreign_cores"] = None if raw is None else max(0.0, raw - reaped)

    def summary(self) -> dict[str, Any]:
        if self.count != self.steps or self.peak is None:
            raise RuntimeError(
                f"the contestant took {self.count} optimizer steps; the job asked for {self.steps}"
            )
        got = [b for b in self.batches if self.t0 < b["t"] <= self.t1]
        seconds = self.t1 - self.t0
        compiling = self.watch.seconds(self.t0, self.t1)
        busy = seconds - compiling
        samples = sum(b["samples"] for b in got)
        return {
            "steps": self.count,
            "window_steps": self.steps - self.warmup,
            "window_s": seconds,
            "window_samples": samples,
            "window_shapes": [b["shape"] for b in got],
            "compile_s_in_window": compiling,
            "compile_s": self.watch.seconds(self.start, self.t1),
            "samples_per_s": samples / busy,
            "real_tokens_per_s": sum(b["real_tokens"] for b in got) / busy,
            "window_tokens": sum(b["tokens"] for b in got),  # padded; 0 for images
            "window_real_tokens": sum(b["real_tokens"] for b in got),
            "first_step_s": self.first_step_s,  # imports done: data, model, step 1, compiles
            "peak_memory_bytes": self.peak.bytes,
            "memory_kind": self.peak.kind,
            "foreign_cores": self.load.get("foreign_cores"),
        }


def mean_loss(trained: Trained, recipe: Any, dataset: Any, device: torch.device) -> float:
    """The trained model's loss over the first EVAL_SAMPLES of ``dataset``: the mean of its
    batches' mean losses (equal batches of EVAL_BATCH on the built-in workloads)."""
    indices = list(range(min(EVAL_SAMPLES, len(dataset))))
    lengths = getattr(dataset, "lengths", None)
    if lengths is not None:  # seqcls: batches of similar lengths pad less; the same losses
        indices.sort(key=lambda i: int(lengths[i]))
    subset = Subset(dataset, indices)
    loader = DataLoader(  # noqa: TP101 (8 batches, once: workers would cost more than they save)
        subset, batch_size=EVAL_BATCH, collate_fn=getattr(recipe, "collate", None)
    )
    model = trained.model.to(device)  # Lightning hands the model back on the CPU
    bf16 = trained.amp == "bf16"
    amp = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with amp:
        return evaluate(model, loader, recipe.loss, device=device, plan=Plan())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contestant", required=True, help="runs peer_CONTESTANT.train(job)")
    ap.add_argument("--job", required=True, help="the Job, as JSON")
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args()
    job = Job.from_json(a.job)
    if not 2 <= job.warmup < job.steps:
        # step 1's post hook is where the naive contestant finds its model: keep it out of the
        # window, and leave at least one measured step
        raise SystemExit(f"need 2 <= warmup < steps; got warmup {job.warmup}, steps {job.steps}")
    device = resolve_device(job.device)
    recipe = load_recipe(job.recipe)  # a generated lm recipe registers its preset here
    contestant = importlib.import_module(f"peer_{a.contestant}")
    pad = PAD if job.workload == "seqcls" else None  # to count real tokens
    window = Window(device, job.warmup, job.steps, pad).install()
    trained: Trained = contestant.train(job)
    measured = window.summary()
    t0 = time.perf_counter()
    train_loss = mean_loss(trained, recipe, recipe.dataset("train", seed=job.seed), device)
    val_loss = mean_loss(trained, recipe, recipe.dataset("val", seed=VAL_SEED), device)
    out = {
        "contestant": a.contestant,
        "job": json.loads(a.job),
        **measured,
        "train_loss": train_loss,
        "val_loss": val_loss,
        "eval_s": time.perf_counter() - t0,
        "amp": trained.amp,
        "techniques": list(trained.techniques),
        "settings": trained.settings,
    }
    a.out.write_text(json.dumps(out, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
