"""What the parts of speedups.py share (and tune.py and peers.py with them): the paths, the
seed, each part's default sizes, meta batches for FLOP counting, and how figures are written
(spreads, utilization, load, one line per goal)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from torchpace.measure.noise import MAX_FOREIGN_CORES
from torchpace.measure.stats import Summary

ROOT = Path(__file__).resolve().parents[1]
SEED = 0  # torchpace fit's and torchpace bench's default seed
# Per-part defaults: (rounds, measured steps per configuration, warm-up steps). verbs: 8 rounds
# of 3 steps as cpu_techniques.py, 3 warm-up steps as `torchpace bench` (compiled
# configurations compile before, on every batch shape). fit: 3 rounds of fresh processes, 30
# steps each after 5 warm-up steps (a compile and its lazy backward land in step 1; seqcls
# recompiles for new lengths later, and that time is reported, not timed).
# bucketing: 10 rounds of 16 steps, 2 warm-up steps (no compile: the naive step); 160 batches
# are 31% of an epoch, so the timed batches' padding is near the epoch's.
DEFAULTS = {"verbs": (8, 24, 3), "fit": (3, 30, 5), "bucketing": (10, 160, 2)}


def spread(s: Summary | dict[str, Any], fmt: str = ".2f", quart: bool = True) -> str:
    d = s.to_dict() if isinstance(s, Summary) else s
    lo, hi = (d["q1"], d["q3"]) if quart else (d["min"], d["max"])
    return f"{d['median']:{fmt}} [{lo:{fmt}}–{hi:{fmt}}]"


def shaped_batch(workload: str, shape: list[int]) -> tuple[torch.Tensor, ...]:
    """A meta batch of ``workload``'s layout whose input has ``shape``, for FLOP counting."""
    meta = {"device": "meta"}
    if workload == "cnn":
        return torch.empty(shape, **meta), torch.empty(shape[0], dtype=torch.long, **meta)
    ids = torch.empty(shape, dtype=torch.long, **meta)
    if workload == "lm":
        return ids, torch.empty(shape, dtype=torch.long, **meta)
    n = torch.empty(shape[0], dtype=torch.long, **meta)
    return ids, n, n


def other_cores(cores: float | None) -> str:
    return "unknown" if cores is None else f"{cores:.2f} cores"


def other_load(res: dict[str, Any]) -> str:
    return f"{other_cores(res['foreign_cores'])} (limit {MAX_FOREIGN_CORES})"


def utilization(tflops: float | None, peak: float | None) -> str:
    if tflops is None:
        return "—"
    return f"{tflops:.2f} ({tflops / peak:.0%})" if peak else f"{tflops:.2f}"


def goal_line(what: str, ratio: dict[str, Any], goal: float, above: int, rounds: int) -> str:
    """One line per goal: met (every round at or above it), or missed and by how much."""
    med, low = ratio["median"], ratio["min"]
    head = f"{what}: goal ≥{goal:g}×"
    if above == rounds:
        return f"{head} met: {med:.2f}× median, every round above it (lowest {low:.2f}×)"
    if med < goal:
        return (
            f"{head} MISSED by {goal - med:.2f}× at the median ({med:.2f}×); "
            f"{above} of {rounds} rounds above it"
        )
    return (
        f"{head} MISSED in {rounds - above} of {rounds} rounds: median {med:.2f}×, the lowest "
        f"round {low:.2f}× ({goal - low:.2f}× short)"
    )
