"""Steady-state step timing: warm-up (and any compilation in it) is timed but kept apart."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from torchpace.measure.clock import StepClock
from torchpace.measure.stats import Summary, summarize


@dataclass(frozen=True)
class Work:
    """What one step processed, for throughput: samples, and tokens where they apply."""

    samples: int
    tokens: int = 0


StepFn = Callable[[], Work]


@dataclass(frozen=True)
class StepTiming:
    warmup_seconds: tuple[float, ...]  # each warm-up step; the first holds any compilation
    step: Summary  # seconds per measured step
    samples_per_s: Summary
    tokens_per_s: Summary | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "warmup_seconds": list(self.warmup_seconds),
            "step_seconds": self.step.to_dict(),
            "samples_per_s": self.samples_per_s.to_dict(),
            "tokens_per_s": self.tokens_per_s.to_dict() if self.tokens_per_s else None,
        }


def measure_steps(step: StepFn, *, steps: int, warmup: int, device: torch.device) -> StepTiming:
    """Run ``warmup`` then ``steps`` steps; summarise the measured ones."""
    if steps < 1 or warmup < 0:
        raise ValueError(f"need steps >= 1 and warmup >= 0, got steps={steps}, warmup={warmup}")
    warm = StepClock(device)
    for _ in range(warmup):
        warm.start()
        step()
        warm.stop()
    clock = StepClock(device)
    work: list[Work] = []
    for _ in range(steps):
        clock.start()
        work.append(step())
        clock.stop()
    secs = clock.seconds()
    tokens = [w.tokens / s for w, s in zip(work, secs, strict=True)]
    return StepTiming(
        warmup_seconds=tuple(warm.seconds()),
        step=summarize(secs),
        samples_per_s=summarize([w.samples / s for w, s in zip(work, secs, strict=True)]),
        tokens_per_s=summarize(tokens) if any(w.tokens for w in work) else None,
    )
