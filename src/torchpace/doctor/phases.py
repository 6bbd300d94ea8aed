"""Exclusive phase timing of a training step.

Every instant of a step belongs to exactly one phase: the innermost one open at that instant
(a ``.item()`` inside ``forward`` is sync time, not forward time), so the phases of a step add up
to the step. On CUDA each phase change also records an event on the current stream; the time
between consecutive events is the device's time in the phase that launched the work, so work
queued by ``forward`` and drained during the next data fetch counts as forward, not data wait.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from torchpace.runtime.phases import PHASES


@dataclass
class StepPhases:
    host: dict[str, float]  # seconds of host time per phase
    events: list[tuple[str, Any]]  # CUDA: (phase that ended at this event, event); first: start


class PhaseClock:
    """Host clock with an optional CUDA event trail. Only the main thread may call it."""

    def __init__(self, *, cuda: bool) -> None:
        self._cuda = cuda
        self._stack: list[str] = []
        self._acc = dict.fromkeys(PHASES, 0.0)
        self._last = perf_counter()
        self._events: list[tuple[str, Any]] = []
        self._stream: Any = None
        if cuda:
            import torch

            # The stream the steps run on, fixed now: a phase change inside the script's
            # ``with torch.cuda.stream(side):`` (a prefetch) must not put the event trail on the
            # side stream, where its intervals measure other work or come out negative.
            self._stream = torch.cuda.current_stream()
            self._events.append(("", self._record()))

    def _record(self) -> Any:
        import torch

        event = torch.cuda.Event(enable_timing=True)
        event.record(self._stream)
        return event

    @property
    def cuda(self) -> bool:
        return self._cuda

    @property
    def current(self) -> str:
        return self._stack[-1] if self._stack else "other"

    def _flush(self, now: float | None = None) -> str:
        now = perf_counter() if now is None else max(now, self._last)
        top = self.current
        self._acc[top] += now - self._last
        self._last = now
        if self._cuda:
            self._events.append((top, self._record()))
        return top

    def enter(self, phase: str) -> None:
        self._flush()
        self._stack.append(phase)

    def exit(self) -> None:
        self._flush()
        if self._stack:
            self._stack.pop()

    def cut(self, now: float | None = None) -> StepPhases:
        """End the step here (at ``now``, the step's own end time, so that its phases add up
        to its length whatever ran between: beside two CPU-bound processes a thread switch
        between two clock reads made a 1 ms step's phases 1.9 times its length): return its
        phases and start the next step's."""
        self._flush(now)
        out = StepPhases(self._acc, self._events)
        self._acc = dict.fromkeys(PHASES, 0.0)
        self._events = [("", out.events[-1][1])] if self._cuda else []
        return out

    def restart(self, now: float | None = None) -> None:
        """Forget the time since the last cut (the probe step's instrumentation overhead)."""
        self._acc = dict.fromkeys(PHASES, 0.0)
        self._last = perf_counter() if now is None else now
        if self._cuda:
            self._events = [("", self._record())]


def device_phases(events: list[tuple[str, Any]]) -> dict[str, float]:
    """Seconds of device time per phase from an event trail (synchronises once on the last)."""
    out = dict.fromkeys(PHASES, 0.0)
    if len(events) < 2:
        return out
    events[-1][1].synchronize()
    for (_, start), (phase, end) in itertools.pairwise(events):
        out[phase] += start.elapsed_time(end) / 1e3
    return out
