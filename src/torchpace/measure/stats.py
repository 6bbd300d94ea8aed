"""Robust summaries: medians and quartiles, never means of timings (one descheduled step would
skew a mean)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    q1: float
    q3: float
    min: float
    max: float

    @property
    def rel_iqr(self) -> float:
        """Interquartile range relative to the median: the spread we report and judge noise by."""
        return (self.q3 - self.q1) / self.median if self.median else float("inf")

    def to_dict(self) -> dict[str, Any]:
        # JSON has no infinity: a spread relative to a zero median is reported as null.
        return {**asdict(self), "rel_iqr": self.rel_iqr if self.median else None}


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("cannot summarise an empty series")
    xs = sorted(float(v) for v in values)
    if len(xs) == 1:
        q1 = q3 = xs[0]
    else:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return Summary(n=len(xs), median=statistics.median(xs), q1=q1, q3=q3, min=xs[0], max=xs[-1])


def between(before: float, after: float) -> float:
    """The reference for a run measured between two runs of the baseline: their geometric mean,
    so a machine that speeds up or slows down at a steady rate moves the reference as much as
    the run between them (the tune's paired trials, its confirmation and ``compare``)."""
    return math.sqrt(before * after)
