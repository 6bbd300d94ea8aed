"""Step-end times of a trial: a global optimizer step post hook stamps each step (after a
device synchronize on CUDA, so a step's time holds its queued GPU work).

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
        self.times: list[float] = []
        self.skipped: list[bool] = []  # one per GradScaler.update(), i.e. per fp16 step
        self._stepped = False

    def stamp(self) -> None:
        if self.device.type == "cuda":
            import torch

            # note: a CPU-GPU sync per step, so each step's time holds its queued GPU work. It
            # costs the overlap of one step's launches with the last one's kernels, alike in
            # every trial, and the read at the end of fit() has nothing left to wait for.
            torch.cuda.synchronize(self.device)
        self.times.append(time.perf_counter())

    def on_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._stepped = True
        self.stamp()

    def on_scaler_update(self) -> None:
        self.skipped.append(not self._stepped)
        if not self._stepped:
            self.stamp()
        self._stepped = False
