"""One definition of a training step, for every runtime that counts a script's steps: the
doctor's recorder, the script trial and compare's worker.

A step ends at the *primary* optimizer's ``step()``, the first optimizer to step (a GAN's second
optimizer steps inside the same step). Where no optimizer was built by the first ``backward()``
(a hand-written update), each top-level ``backward()`` ends one. An fp16 step whose GradScaler
skipped the optimizer's step (inf/NaN gradients) ends at the scaler's ``update()``. Torch-free.
"""

from __future__ import annotations

OPTIMIZER = "optimizer.step()"
BACKWARD = "backward()"


class StepMarker:
    """Told of optimizers built, backward() returns, optimizer steps and scaler updates; each
    event method says whether the event ends a step."""

    def __init__(self) -> None:
        # What ends a step (OPTIMIZER or BACKWARD), decided at the first backward() (or the first
        # optimizer step, if one comes before any backward()).
        self.by: str | None = None
        self.optimizers_built = 0
        self.primary: int | None = None  # id of the optimizer whose steps end steps
        self.skipped = False  # the last scaler update found its optimizer's step skipped
        self._stepped = False

    def optimizer_built(self) -> None:
        self.optimizers_built += 1

    def backward(self) -> bool:
        if self.by is None:
            self.by = OPTIMIZER if self.optimizers_built else BACKWARD
        return self.by == BACKWARD

    def optimizer_step(self, optimizer: object) -> bool:
        if self.by is None:
            self.by = OPTIMIZER
        if self.by != OPTIMIZER:
            return False  # an optimizer built after hand-made updates began: time in a step
        if self.primary is None:
            self.primary = id(optimizer)
        if id(optimizer) != self.primary:
            return False
        self._stepped = True
        return True

    def scaler_update(self) -> bool:
        """A GradScaler's ``update()``; ``skipped`` says whether the step it ends had no
        optimizer step."""
        self.skipped, self._stepped = not self._stepped, False
        return self.skipped and self.by == OPTIMIZER
