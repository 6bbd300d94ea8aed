"""The doctor's state while a script runs: step boundaries, the current step's tallies, and when
to stop.

Steps are bounded by optimizer steps (the global post-step hook), so any loop that calls
``optimizer.step()`` works: a plain loop, Lightning, Accelerate, LBFGS with a closure (the closure's
backward passes fall inside the one step). With several optimizers (a GAN), the first one to step
marks the boundary and the others' steps are optimizer time within it. A script that has built no
optimizer by the end of its first ``backward()`` updates its weights by hand (``p.data.add_(p.grad,
alpha=-lr)``, as pytorch/examples' word language model does): its steps end at each
``backward()``, and its update falls at the start of the next step.

Step 1 runs from the start to the first optimizer step, so it holds the script's set-up: it is
always warm-up. After ``warmup`` steps one *probe* step counts FLOPs and records which lines run;
it is slow and never timed. Then ``steps`` steps are measured, and the script is stopped.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from time import perf_counter
from typing import Any

from torchpace.doctor.phases import PhaseClock
from torchpace.doctor.records import Fetch, Records, Step
from torchpace.doctor.sites import Site
from torchpace.runtime.steps import StepMarker
from torchpace.runtime.stop import DoctorStop


class Recorder:
    def __init__(self, *, steps: int, warmup: int, stop: bool) -> None:
        if warmup < 1:
            raise ValueError(
                f"--warmup must be at least 1, not {warmup}: step 1 holds the script's set-up"
            )
        if steps < 0:
            raise ValueError(f"--steps must be 0 (run to the end) or more, not {steps}")
        self.steps = steps
        self.warmup = warmup
        self.stop = stop
        self.records = Records()
        self.clock = PhaseClock(cuda=False)
        self.main_thread = threading.get_ident()
        self.boundaries = 0
        self.in_optimizer_step = False  # set by the instruments' step pre/post hooks
        self.steps_by = StepMarker()  # what ends a step (runtime/steps.py)
        self.finished = False
        # Host reads in the DataLoader fetch in progress, and the loaders whose fetches run with
        # the read instruments out (doctor/syncs.py, SWAP_READS).
        self.fetch_reads = 0
        self.quiet_loaders: set[int] = set()
        self.tensor_reads: Any = None  # syncs.TensorReads, once installed
        self._started = perf_counter()
        self._step_start = self._started
        self._last_loader: int | None = None
        self._new_step()
        # Called at the end of warm-up and of the probe step (set by the instruments).
        self.on_warmup_end: Callable[[], None] = lambda: None
        self.on_probe_end: Callable[[], None] = lambda: None
        self.compile_signature: Callable[[], object] = lambda: None
        self.cuda_in_use: Callable[[], bool] = lambda: False
        self._compiled_at: object = self.compile_signature()

    # -- the current step's tallies -------------------------------------------------------------
    def _new_step(self) -> None:
        self.fetches: list[Fetch] = []
        self.backward_calls = 0
        self.forward_samples = 0
        self.forward_tokens = 0
        self._closure_counted = False  # an LBFGS closure's batch, counted once per step
        self.eval_calls = 0
        self.syncs: dict[tuple[Site, str], int] = defaultdict(int)
        self.sync_time: dict[tuple[Site, str], float] = defaultdict(float)

    def fetched(
        self,
        loader: int,
        seconds: float,
        samples: int,
        tokens: int = 0,
        padded: int = 0,
        past_longest: int = 0,
        cpu: float = 0.0,
    ) -> None:
        self.fetches.append(Fetch(loader, seconds, samples, tokens, padded, cpu, past_longest))
        self._last_loader = loader

    def forward_batch(self, samples: int, tokens: int = 0) -> None:
        """A training forward of a model took ``samples`` (and ``tokens``, for token ids).
        Inside an optimizer's step (an LBFGS closure, evaluated up to max_iter times on the same
        batch) only the first counts."""
        if self.in_optimizer_step:
            if self._closure_counted:
                return
            self._closure_counted = True
        self.forward_samples += samples
        self.forward_tokens += tokens

    def synced(self, site: Site, kind: str, blocked: float | None) -> None:
        key = (site, kind)
        self.syncs[key] += 1
        if blocked is not None:
            self.sync_time[key] += blocked

    @property
    def phase(self) -> str:
        """Which step this is about to be: "warmup", "probe" or "measured"."""
        upcoming = self.boundaries + 1
        if upcoming <= self.warmup:
            return "warmup"
        return "probe" if upcoming == self.warmup + 1 else "measured"

    def guarded(self, what: str, instrument: Callable[..., None], *args: Any) -> None:
        """Run ``instrument(*args)``, one of the doctor's own, inside the user's call (a forward,
        an optimizer step): its error must never reach the script, so it becomes a note in the
        result."""
        try:
            instrument(*args)
        except Exception as exc:  # any failure of ours: the script goes on
            first = str(exc).splitlines()[0] if str(exc) else ""
            note = f"at {what}: {type(exc).__name__}: {first[:300]}".rstrip(": ")
            if note not in self.records.instrument_errors:  # a hook that fails every call: once
                self.records.instrument_errors.append(note)

    # -- boundaries -------------------------------------------------------------------------------
    def optimizer_stepped(self, optimizer: object) -> None:
        if self.steps_by.optimizer_step(optimizer):
            self.boundary()

    def backward_ended(self) -> None:
        """A top-level ``backward()`` returned on the main thread."""
        if self.steps_by.backward():
            self.boundary()

    def scaler_updated(self) -> None:
        """A GradScaler's ``update()``: it ends an fp16 step whose optimizer step it skipped."""
        if self.steps_by.scaler_update():
            self.boundary()

    def boundary(self) -> None:
        """A step ended (the primary optimizer's step, or a backward()): close it."""
        now = perf_counter()
        if self.finished:
            return
        kind = self.phase
        self.boundaries += 1
        if self.boundaries == 1:
            self.records.first_step_s = now - self._started
        if self._last_loader is not None and self._last_loader in self.records.loaders:
            self.records.loaders[self._last_loader].training = True
        phases = self.clock.cut(now)
        signature = self.compile_signature()
        self.records.steps.append(
            Step(
                index=self.boundaries,
                seconds=now - self._step_start,
                host=phases.host,
                events=phases.events,
                fetches=self.fetches,
                backward_calls=self.backward_calls,
                forward_samples=self.forward_samples,
                forward_tokens=self.forward_tokens,
                eval_calls=self.eval_calls,
                syncs=dict(self.syncs),
                sync_time=dict(self.sync_time),
                compiled=signature != self._compiled_at,
                kind=kind,
            )
        )
        self._compiled_at = signature
        self._new_step()
        if self.boundaries == self.warmup:
            self.guarded("the end of warm-up", self.on_warmup_end)
        elif self.boundaries == self.warmup + 1:
            self.guarded("the end of the probe step", self.on_probe_end)
        if self.boundaries == 1 and self.cuda_in_use():
            # The script has initialised CUDA by its first step: from here each phase change
            # also records a CUDA event.
            self.clock = PhaseClock(cuda=True)
        if kind != "measured":
            # Switching instruments took time that belongs to no step.
            self._step_start = perf_counter()
            self.clock.restart(self._step_start)
        else:
            # The phase clock went on from its cut above: the next step starts there too, so
            # the bookkeeping between (longer on a loaded machine) is in both or in neither.
            # The phases once added up to 1.34 of the step beside two CPU-bound processes.
            self._step_start = now
        if self.steps and self.boundaries >= self.warmup + 1 + self.steps:
            self.finished = True
            if self.stop:
                raise DoctorStop
