"""Paired, interleaved comparison of variants of one training step.

Each round runs a block of steps of every variant back to back, alternating the order between
rounds (A B, B A, A B, ...) so slow drift and cache warmth fall on both sides equally. Variants
are fed the same batches round by round, so a ratio compares equal work. The ratio is taken per
round (baseline seconds / variant seconds, >1 means faster than the baseline) and summarised by
its median and quartiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from torchpace.measure import memory
from torchpace.measure.clock import time_call
from torchpace.measure.noise import LoadProbe, verdict
from torchpace.measure.stats import Summary, summarize
from torchpace.measure.timing import StepFn, Work


@dataclass(frozen=True)
class Variant:
    name: str
    step: StepFn


@dataclass(frozen=True)
class VariantResult:
    name: str
    warmup_seconds: tuple[float, ...]
    step_seconds: Summary
    samples_per_s: Summary
    tokens_per_s: Summary | None
    peak_memory_bytes: int
    memory_kind: str
    block_seconds: tuple[float, ...]  # per round, for re-analysis

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "warmup_seconds": list(self.warmup_seconds),
            "step_seconds": self.step_seconds.to_dict(),
            "samples_per_s": self.samples_per_s.to_dict(),
            "tokens_per_s": self.tokens_per_s.to_dict() if self.tokens_per_s else None,
            "peak_memory_bytes": self.peak_memory_bytes,
            "memory_kind": self.memory_kind,
            "block_seconds": list(self.block_seconds),
        }


@dataclass(frozen=True)
class PairedResult:
    baseline: str
    rounds: int
    block: int
    warmup: int
    variants: tuple[VariantResult, ...]
    speedup: dict[str, Summary]  # per non-baseline variant: baseline time / variant time
    foreign_cores: float | None
    noisy: tuple[str, ...]  # reasons the ratios cannot be trusted; empty when they can

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "rounds": self.rounds,
            "block": self.block,
            "warmup": self.warmup,
            "variants": [v.to_dict() for v in self.variants],
            "speedup": {k: s.to_dict() for k, s in self.speedup.items()},
            "foreign_cores": self.foreign_cores,
            "noisy": list(self.noisy),
        }


def _run_block(step: StepFn, block: int, out: list[Work]) -> None:
    out.extend(step() for _ in range(block))


def compare(
    variants: Sequence[Variant],
    *,
    rounds: int,
    block: int,
    warmup: int,
    device: torch.device,
) -> PairedResult:
    """Compare ``variants`` (the first is the baseline) over ``rounds`` interleaved rounds of
    ``block`` steps each, after ``warmup`` untimed-for-the-ratio steps per variant."""
    if len(variants) < 2:
        raise ValueError("a paired comparison needs at least two variants")
    if len({v.name for v in variants}) != len(variants):
        raise ValueError("variant names must be unique")
    if rounds < 2 or block < 1 or warmup < 0:
        raise ValueError(
            f"need rounds >= 2, block >= 1, warmup >= 0; got {rounds}, {block}, {warmup}"
        )

    warm: dict[str, list[float]] = {}
    for v in variants:
        warm[v.name] = [time_call(v.step, device) for _ in range(warmup)]

    seconds: dict[str, list[float]] = {v.name: [] for v in variants}
    work: dict[str, list[Work]] = {v.name: [] for v in variants}
    peaks: dict[str, int] = {v.name: 0 for v in variants}
    kind = ""
    probe = LoadProbe()
    for r in range(rounds):
        order = variants if r % 2 == 0 else list(reversed(variants))
        for v in order:
            memory.reset_peak(device)
            done: list[Work] = []
            seconds[v.name].append(time_call(partial(_run_block, v.step, block, done), device))
            work[v.name].append(Work(sum(w.samples for w in done), sum(w.tokens for w in done)))
            pk = memory.peak(device)
            peaks[v.name] = max(peaks[v.name], pk.bytes)
            kind = pk.kind
    foreign = probe.foreign_cores()

    results = []
    for v in variants:
        secs, wk = seconds[v.name], work[v.name]
        has_tokens = any(w.tokens for w in wk)
        results.append(
            VariantResult(
                name=v.name,
                warmup_seconds=tuple(warm[v.name]),
                step_seconds=summarize([s / block for s in secs]),
                samples_per_s=summarize([w.samples / s for w, s in zip(wk, secs, strict=True)]),
                tokens_per_s=summarize([w.tokens / s for w, s in zip(wk, secs, strict=True)])
                if has_tokens
                else None,
                peak_memory_bytes=peaks[v.name],
                memory_kind=kind,
                block_seconds=tuple(secs),
            )
        )
    base = variants[0].name
    speedup = {
        v.name: summarize([b / s for b, s in zip(seconds[base], seconds[v.name], strict=True)])
        for v in variants[1:]
    }
    reasons: list[str] = []
    for name, s in speedup.items():
        reasons.extend(f"{name}: {msg}" for msg in verdict(s.rel_iqr, None))
    reasons.extend(verdict(0.0, foreign))
    return PairedResult(
        baseline=base,
        rounds=rounds,
        block=block,
        warmup=warmup,
        variants=tuple(results),
        speedup=speedup,
        foreign_cores=foreign,
        noisy=tuple(reasons),
    )
