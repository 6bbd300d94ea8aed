"""Step-end times of a trial: a global optimizer step post hook stamps each step; on CUDA each
stamp also records an event, so a step's time holds its queued GPU work without a sync per step.

Used by the tune's recipe worker and its script trials.
"""

from __future__ import annotations

import time
from typing import Any


class StepClock:
    """Step-end times. The global optimizer step post hook stamps each step; a step that the
    fp16 GradScaler skipped (gradients overflowed: it does not call ``optimizer.step()``) is
    stamped by the scaler's ``update()``, which runs every step, and counted as skipped."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.skipped: list[bool] = []  # one per GradScaler.update(), i.e. per fp16 step
        self._stepped = False
        self._host: list[float] = []
        self._events: list[Any] = []
        self._anchor: tuple[float, Any] | None = None  # (host time, event) read together

    def stamp(self) -> None:
        now = time.perf_counter()
        if self.device.type == "cuda":
            import torch

            if self._anchor is None:
                # note: one CPU-GPU sync, at the first step's end: the device's clock is read
                # against the host's from here on. A sync at every step would serialise the
                # input pipeline with the GPU's work and inflate the gain of loader workers,
                # compile and fused optimizers, which overlap with it.
                torch.cuda.synchronize(self.device)
                anchor = torch.cuda.Event(enable_timing=True)
                anchor.record()
                self._anchor = (time.perf_counter(), anchor)
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._events.append(event)
        self._host.append(now)

    @property
    def count(self) -> int:
        """Steps stamped so far (no sync)."""
        return len(self._host)

    @property
    def times(self) -> list[float]:
        """Each step's end on the host's clock: on CUDA the later of the host's stamp and the
        moment the GPU finished the step's work (one synchronize, on the last event)."""
        if not self._events or self._anchor is None:
            return list(self._host)
        self._events[-1].synchronize()
        host0, event0 = self._anchor
        return [
            max(h, host0 + event0.elapsed_time(e) / 1e3)
            for h, e in zip(self._host, self._events, strict=True)
        ]

    def on_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._stepped = True
        self.stamp()

    def on_scaler_update(self) -> None:
        self.skipped.append(not self._stepped)
        if not self._stepped:
            self.stamp()
        self._stepped = False
