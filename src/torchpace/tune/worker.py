"""One tune trial, in this (fresh) process: ``python -m torchpace.tune.worker SPEC.json OUT.json``.

:func:`main` is every trial's process; a script's trial runs it from
``python -m torchpace.script.trial_worker`` with the script trial's ``run`` (the tune stands
below the script verb and never imports it). For a recipe, :func:`run_recipe` builds the recipe,
applies the spec's plan, trains ``warmup + steps`` optimizer steps with ``fit()`` and writes a
``TrialResult`` to OUT.json. Every step's end is stamped by a global optimizer step hook; losses
are read once, after the last step, so timing adds no loss syncs. Whatever goes wrong inside the
trial, OUT.json is written ("failed" or "oom", with the reason); only a hard crash (a segfault,
SIGKILL) leaves none, and the runner reports that from outside.
"""

from __future__ import annotations

import faulthandler
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchpace._files import atomic_write_text
from torchpace.measure.steps import StepClock
from torchpace.tune.trial import Status, TrialResult, TrialSpec, over_budget

_REASON_CHARS = 400  # one line a table can show; the full traceback is on the worker's stderr


def main(
    argv: list[str] | None = None, run: Callable[[TrialSpec], TrialResult] | None = None
) -> int:
    """Run the trial of SPEC.json (``argv``) with ``run`` (a recipe trial's, by default) and
    write its result to OUT.json, whatever happens."""
    args = sys.argv[1:] if argv is None else argv
    run = run_recipe if run is None else run
    if len(args) != 2:
        print("usage: python -m torchpace.tune.worker SPEC.json OUT.json", file=sys.stderr)
        return 2
    faulthandler.enable()  # a segfault prints its stack to stderr, which the runner keeps
    _exit_with_parent()
    spec = TrialSpec.from_dict(json.loads(Path(args[0]).read_text(encoding="utf-8")))
    try:
        result = run(spec)
    except BaseException as e:  # the result file is the answer, whatever happened
        traceback.print_exc()
        result = TrialResult(spec.key(), spec.name, status_of(e), reason=one_line(e))
    atomic_write_text(args[1], json.dumps(result.to_dict()) + "\n")
    return 0


# How often the worker checks that the tune that started it is still there (seconds).
_PARENT_POLL_S = 0.5


def _exit_with_parent() -> None:
    """End this trial, with everything it started, when the tune that ran it is gone.

    The worker has its own session (the runner kills it as one group on a timeout or Ctrl-C).
    If the tune itself is killed (``kill -9``, an OOM killer), nothing would: the trial spun on
    with no parent (issue 17). A daemon thread notices the new parent within half a second and
    kills the worker's process group, loader workers included."""
    import os
    import signal
    import threading

    if os.name != "posix":  # pragma: no cover - Windows: no process groups to kill
        return
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(_PARENT_POLL_S)
            if os.getppid() != parent:
                os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="torchpace-parent-watch", daemon=True).start()


def run_recipe(spec: TrialSpec) -> TrialResult:
    """Run the recipe trial ``spec`` describes in this process and return what it measured."""
    if spec.steps < 1 or spec.warmup < 0:
        raise ValueError(
            f"a trial needs steps >= 1 and warmup >= 0; got {spec.steps}, {spec.warmup}"
        )
    if spec.is_script:
        raise ValueError(f"{spec.recipe} is a script: its trial runs in {spec.module}")
    from torchpace.recipes import load_recipe

    recipe = load_recipe(spec.recipe)  # before torch: a broken recipe fails in a fraction of a s
    from torchpace.measure import memory
    from torchpace.measure.clock import resolve_device
    from torchpace.train import Plan, prepare
    from torchpace.train.build import build

    dev = resolve_device(spec.device)
    total = spec.warmup + spec.steps
    plan = Plan.from_dict(spec.plan, source=f"trial {spec.name!r}")
    plan = plan.replace(log_every=total)  # losses are read once, after the last timed step
    model, optimizer, loader = build(recipe, spec.seed)
    applied: list[Any] = []
    model, optimizer, loader = prepare(
        model, optimizer, loader, plan=plan, device=dev, applied=applied
    )
    clock = StepClock(dev)
    counts: list[int] = []
    count = _counter(getattr(recipe, "count_samples", None), counts)
    memory.reset_peak(dev)
    losses: tuple[float, ...] = ()
    if spec.loader_only:
        t0 = _time_loader(loader, dev, total, count, clock)
    else:
        t0, losses = _time_fit(model, optimizer, loader, recipe, plan, dev, total, count, clock)
    peak = memory.peak(dev)
    if clock.count != total:
        raise RuntimeError(
            f"{clock.count} optimizer steps were timed for {total} steps: the recipe's "
            "optimizer must call torch.optim.Optimizer.step once per step"
        )
    times = clock.times
    durations = [b - a for a, b in zip([t0, *times], times, strict=False)]
    return _result(spec, plan, recipe, durations, counts, losses, peak, applied, clock, dev)


def _time_fit(
    model: Any,
    optimizer: Any,
    loader: Any,
    recipe: Any,
    plan: Any,
    dev: Any,
    total: int,
    count: Callable[[Any], int],
    clock: StepClock,
) -> tuple[float, tuple[float, ...]]:
    """Train ``total`` steps with fit(); returns the start time and every step's loss."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from torchpace.runtime.events import on_scaler_update
    from torchpace.runtime.patching import Patches
    from torchpace.train import fit

    # fit() makes its GradScaler inside; this process runs one trial, so patching the class
    # for the length of the run touches nothing else.
    patches = Patches()
    on_scaler_update(patches, clock.on_scaler_update)
    patches.on_undo(register_optimizer_step_post_hook(clock.on_step).remove)
    try:
        t0 = time.perf_counter()
        result = fit(
            model,
            optimizer,
            loader,
            recipe.loss,
            plan=plan,
            steps=total,
            device=dev,
            base_batch_size=recipe.batch_size,
            progress=False,
            count_samples=count,
        )
    finally:
        patches.undo()
    return t0, tuple(result.losses)


def _time_loader(
    loader: Any, dev: Any, total: int, count: Callable[[Any], int], clock: StepClock
) -> float:
    """Fetch ``total`` batches as fit() does (onto the device), with no model: the input
    pipeline's ceiling. Returns the start time; ``clock`` holds each batch's arrival."""
    from torchpace.speedups.loading import DevicePrefetcher, to_device

    end = object()
    t0 = time.perf_counter()
    it = iter(loader)  # inside the timing: starting workers is part of the first batch, as in fit
    for _ in range(total):
        batch = next(it, end)
        if batch is end:  # the epoch is over: start the next one, as fit() does
            it = iter(loader)
            batch = next(it)
        if not isinstance(loader, DevicePrefetcher):
            batch = to_device(batch, dev, non_blocking=bool(getattr(loader, "pin_memory", False)))
        count(batch)
        clock.stamp()
    return t0


def _counter(recipe_count: Any, counts: list[int]) -> Callable[[Any], int]:
    from torchpace.train.loop import _count_samples

    fn = recipe_count or _count_samples

    def count(batch: Any) -> int:
        n = int(fn(batch))
        counts.append(n)
        return n

    return count


def _result(
    spec: TrialSpec,
    plan: Any,
    recipe: Any,
    durations: list[float],
    counts: list[int],
    losses: tuple[float, ...],
    peak: Any,
    applied: list[Any],
    clock: StepClock,
    dev: Any,
) -> TrialResult:
    from torchpace.measure.stats import summarize

    measured = durations[spec.warmup :]
    s = summarize(measured)
    per_step = 1 if spec.loader_only else plan.accumulate  # counts are per micro-batch
    samples_per_step = sum(counts[spec.warmup * per_step :]) / len(measured)
    compiled = plan.compile != "off" and not spec.loader_only
    skips = clock.skipped[spec.warmup :]  # the scale's first backoffs, in warm-up, are expected
    reason = over_budget(spec, peak.bytes, peak.kind)
    status: Status = "oom" if reason else "ok"
    asked = set(plan.techniques())
    return TrialResult(
        key=spec.key(),
        name=spec.name,
        status=status,
        reason=reason,
        step_seconds=tuple(measured),
        median_step_s=s.median,
        q1_step_s=s.q1,
        q3_step_s=s.q3,
        samples_per_step=samples_per_step,
        # Throughput at the median step: one descheduled step does not move it.
        samples_per_s=samples_per_step / s.median if s.median > 0 else None,
        first_step_seconds=durations[0],
        compile_seconds=max(durations[0] - s.median, 0.0) if compiled else None,
        peak_memory_bytes=peak.bytes,
        memory_kind=peak.kind,
        losses=losses,
        scaler_skip_rate=sum(skips) / len(skips) if skips else None,
        batch_size=plan.batch_size or recipe.batch_size,
        applied=tuple(dict.fromkeys(a.technique for a in applied if a.changed)),
        extra={
            "device": str(dev),
            "loader_only": spec.loader_only,
            # Recompiles (a new shape) and loader start-up can land after the first step.
            "warmup_step_seconds": durations[: spec.warmup],
            "scaler_skipped_steps": sum(clock.skipped),
            "not_applied": {
                a.technique: a.reason
                for a in applied
                if not a.changed and a.reason and a.technique in asked
            },
        },
    )


def status_of(e: BaseException) -> Status:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(e, torch.cuda.OutOfMemoryError):
        return "oom"
    # The CPU allocator's message (c10/core/impl/alloc_cpu.cpp): "can't allocate memory".
    if isinstance(e, RuntimeError) and "can't allocate memory" in str(e):
        return "oom"
    return "failed"


def one_line(e: BaseException) -> str:
    """``Type: message`` on one line, shortened to what a table can show."""
    text = " ".join(f"{type(e).__name__}: {e}".split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


if __name__ == "__main__":
    sys.exit(main())
