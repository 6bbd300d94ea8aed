"""One tune trial of a user's script, in this (fresh) process: the script runs as ``python
script.py args`` would, with the trial's plan applied by interposition, for ``warmup + steps``
steps, then stops cleanly (``DoctorStop``).

Steps are optimizer steps (the first optimizer to step marks them, as in the doctor); a script
that never builds an optimizer (a manual ``p.data.add_`` update) is stepped at each
``backward()``'s end instead. Each step's loss is the tensor passed to ``backward()`` (a
GradScaler's scale divided out; micro-batches of gradient accumulation averaged; only the first
evaluation of an LBFGS closure), kept on the device and read once after the last step, so the
measurement adds no sync. torch, ``random`` and numpy are seeded first; a script that seeds
itself keeps its own seed.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from typing import Any

import torch

from torchpace.measure import memory
from torchpace.measure.steps import StepClock
from torchpace.runtime.events import on_optimizer_built, on_scaler_update
from torchpace.runtime.steps import OPTIMIZER, StepMarker
from torchpace.runtime.stop import DoctorStop
from torchpace.script.interpose import Interposer
from torchpace.script.main import run_as_main
from torchpace.train.plan import Plan
from torchpace.tune.trial import Status, TrialResult, TrialSpec, over_budget


def seed_everything(seed: int) -> None:
    """The same start in every trial: torch (CPU and CUDA), ``random`` and numpy."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
    except ImportError:  # numpy is optional for torch
        return
    np.random.seed(seed % 2**32)


class ScriptSteps:
    """Step boundaries, losses and samples of a script, from the interposer's callbacks."""

    def __init__(self, total: int, device: torch.device, interposer: Interposer) -> None:
        self.total = total
        self.clock = StepClock(device)
        self.ip = interposer
        self.steps_by = StepMarker()  # what ends a step (runtime/steps.py)
        self.backward_calls = 0
        self.losses: list[torch.Tensor] = []  # one per step, on the device
        self.samples: list[int] = []  # per step
        self._micro: list[torch.Tensor] = []
        self._samples = 0
        self._recorded_in_step = False
        self._counted_in_step = False

    def install(self, on_backward: Callable[[torch.Tensor], None] | None = None) -> None:
        """Install the interposer with these step callbacks, then watch what it does not report:
        optimizers built, an optimizer's step and a GradScaler's update (a skipped fp16 step).
        ``on_backward`` stands in for :meth:`on_backward` where the caller keeps the losses its
        own way (compare's worker stacks them in chunks)."""
        from torch.optim.optimizer import register_optimizer_step_post_hook

        ip = self.ip
        ip.on_forward = self.on_forward
        ip.on_backward = on_backward or self.on_backward
        ip.after_backward = self.after_backward
        ip.install()
        on_optimizer_built(ip.patches, lambda opt: self.steps_by.optimizer_built())
        on_scaler_update(ip.patches, self.on_scaler_update)
        ip.patches.on_undo(register_optimizer_step_post_hook(self.on_step).remove)

    def on_forward(self, samples: int) -> None:
        if self.ip.in_step:  # an LBFGS closure re-evaluates the same batch
            if self._counted_in_step:
                return
            self._counted_in_step = True
        self._samples += samples

    def on_backward(self, loss: torch.Tensor) -> None:
        self.backward_calls += 1
        if self.ip.in_step:  # an LBFGS closure: the step's loss is its first evaluation
            if self._recorded_in_step:
                return
            self._recorded_in_step = True
        self._micro.append(loss)

    def after_backward(self) -> None:
        if self.steps_by.backward():
            self._close()

    def on_step(self, opt: Any, args: Any, kwargs: Any) -> None:
        if self.steps_by.optimizer_step(opt):
            self._close()

    def on_scaler_update(self) -> None:
        """A GradScaler's ``update()`` ends every fp16 step, including one it skipped (no
        ``optimizer.step()``): the skipped one is stamped here."""
        ends = self.steps_by.scaler_update()
        self.clock.skipped.append(self.steps_by.skipped)
        if ends:
            self._close()

    def _close(self) -> None:
        self.clock.stamp()
        if self._micro:
            self.losses.append(torch.stack(self._micro).mean())
        self.samples.append(self._samples)
        self._micro, self._samples = [], 0
        self._recorded_in_step = self._counted_in_step = False
        if self.clock.count >= self.total:
            raise DoctorStop

    def read_losses(self) -> tuple[float, ...]:
        """Every step's loss, read from the device once."""
        if not self.losses:
            return ()
        return tuple(float(x) for x in torch.stack(self.losses).float().cpu().tolist())


def run(spec: TrialSpec) -> TrialResult:
    """Run the script trial ``spec`` describes in this process and return what it measured."""
    from torchpace.measure.clock import resolve_device

    assert spec.args is not None
    if spec.cwd:
        os.chdir(spec.cwd)
    dev = resolve_device(spec.device)
    total = spec.warmup + spec.steps
    plan = Plan.from_dict(spec.plan, source=f"trial {spec.name!r}")
    seed_everything(spec.seed)
    ip = Interposer(plan, device=dev)
    steps = ScriptSteps(total, dev, ip)
    memory.reset_peak(dev)
    steps.install()
    started = [time.perf_counter()]
    # Step 1 starts at the first training forward: the script's set-up before it (imports, data,
    # the model) is alike in every trial and is not a step.
    ip.on_first_forward = lambda: started.__setitem__(0, time.perf_counter())
    try:
        ended = run_as_main(spec.recipe, list(spec.args), stopped="stopped after the trial's steps")
    finally:
        ip.uninstall()
    peak = memory.peak(dev)
    n = steps.clock.count
    if n < total:
        return _incomplete(spec, ended, steps, n, total, ip)
    times = steps.clock.times
    durations = [b - a for a, b in zip([started[0], *times], times, strict=False)]
    return _result(spec, plan, durations, steps, peak, ip, dev)


def _incomplete(
    spec: TrialSpec, ended: Any, steps: ScriptSteps, n: int, total: int, ip: Interposer
) -> TrialResult:
    status: Status = "failed"
    if ended.error is not None:
        from torchpace.tune.worker import one_line, status_of

        status = status_of(ended.error)
        why = f"the script raised {one_line(ended.error)} after {n} of {total} steps"
    elif steps.backward_calls == 0 and n == 0:
        why = (
            f"{ended.outcome} with no backward() and no optimizer.step(): torchpace times a "
            "script's steps by its optimizer's step() (or by backward() when it builds no "
            "optimizer); is this the training script, with arguments that train?"
        )
    elif steps.steps_by.by == OPTIMIZER and n == 0:
        why = (
            f"{ended.outcome}: backward() ran {steps.backward_calls} times but no optimizer "
            "ever stepped; a script that updates its weights by hand while holding an "
            "optimizer cannot be stepped"
        )
    else:
        why = (
            f"{ended.outcome} after {n} of the {total} steps a trial needs (--warmup + "
            "--steps): give the script arguments that train longer, or lower --steps"
        )
    return TrialResult(spec.key(), spec.name, status, reason=why, extra=_extra(spec, steps, ip))


def _extra(spec: TrialSpec, steps: ScriptSteps, ip: Interposer) -> dict[str, Any]:
    return {
        "entry": "script",
        "step_mode": steps.steps_by.by,
        "facts": ip.facts | {"loaders": ip.loaders, "own_autocast": ip.own_autocast},
        "not_applied": ip.not_applied(),
    }


def _result(
    spec: TrialSpec,
    plan: Plan,
    durations: list[float],
    steps: ScriptSteps,
    peak: Any,
    ip: Interposer,
    dev: torch.device,
) -> TrialResult:
    from torchpace.measure.stats import summarize

    measured = durations[spec.warmup :]
    s = summarize(measured)
    samples = steps.samples[spec.warmup : spec.warmup + spec.steps]
    samples_per_step = sum(samples) / len(samples) if samples else 0.0
    compile_s = None
    if plan.compile != "off":
        # The roots compile on their first call, and again once the first step's global hooks
        # are gone: the warm-up steps' time above a steady step.
        compile_s = sum(max(d - s.median, 0.0) for d in durations[: spec.warmup])
    skips = steps.clock.skipped[spec.warmup :]
    reason = over_budget(spec, peak.bytes, peak.kind)
    status: Status = "oom" if reason else "ok"
    losses = steps.read_losses()
    train_loaders = [x for x in ip.loaders if x["shuffled"] and x["batch_size"]]
    extra = _extra(spec, steps, ip)
    extra.update(
        device=str(dev),
        warmup_step_seconds=durations[: spec.warmup],
        scaler_skipped_steps=sum(steps.clock.skipped),
    )
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
        samples_per_s=samples_per_step / s.median if s.median > 0 and samples_per_step else None,
        first_step_seconds=durations[0],
        compile_seconds=compile_s,
        peak_memory_bytes=peak.bytes,
        memory_kind=peak.kind,
        losses=losses,
        scaler_skip_rate=sum(skips) / len(skips) if skips else None,
        batch_size=train_loaders[0]["batch_size"] if train_loaders else None,
        applied=tuple(dict.fromkeys(a.technique for a in ip.applied if a.changed)),
        extra=extra,
    )
