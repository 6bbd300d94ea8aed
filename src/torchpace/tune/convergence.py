"""The convergence guard: does a trial still train like the baseline?

Pure functions over loss trajectories: every step's training loss from step 1, warm-up included,
as ``TrialResult.losses`` holds them. A technique that preserves numerics must reproduce the
same-seed baseline step by step; one that changes numerics must end inside the baseline's
seed-to-seed band; a NaN or Inf, or a GradScaler that keeps skipping steps, rejects either kind.
This module does not import torch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from torchpace import catalog

Kind = Literal["preserving", "changing"]

# 8 steps: the window tests/train/test_fit.py averages on its 24-step runs. Long enough to average
# out batch-to-batch noise, late enough to say where training got rather than where it started.
DEFAULT_TAIL = 8
# The largest first difference (relative) from the same-seed baseline that is rounding: float32's
# ulp is 1.2e-7, and a step's loss sums many products (a fused kernel reorders them).
ULP_START = 1e-5
# 5% of the band's centre on each side: the seed-to-seed spread of 24-step cnn runs (float32,
# seeds 0-3, last-8-step means 2.18-2.29) was 5.2% of their mean (tests/train/test_fit.py). Two
# seeds can land close together by chance, so the band is widened by about one such spread.
DEFAULT_MARGIN = 0.05
# 2e-3 relative, step by step: numerics-preserving techniques only reorder float32 sums; over 24
# steps of Adam the largest drift observed was 2.3e-4 (channels_last; tests/train/test_fit.py),
# and 2e-3 leaves room for that rounding to grow through a longer trial.
PRESERVING_RTOL = 2e-3
# The band's floor: each side is widened by at least PRESERVING_RTOL of the centre (a technique
# that changes numerics is not held to a tighter standard than one that preserves them), and by
# at least 1e-6 absolute, since a centre of 0 has no scale to take a share of. Two baselines that
# land on the same tail mean therefore never give a zero-width band.
MIN_WIDEN_ABS = 1e-6
# Two standard errors of the difference between two tail means, each as noisy as the baseline's
# (its losses' standard deviation over the tail, over the square root of the tail, times the
# square root of 2): the losses of single batches vary, and a tail mean carries that noise. A run
# that seeds itself gives every baseline the same final loss and a band of the margin alone, and
# a loss that falls near 0 leaves the margin no width: a CNN whose cross-entropy fell from 2.3 to
# 0.00128 (its last 8 batches' losses spread 0.0004) failed `compare` at 0.00156 with a loader
# whose persistent workers reshuffled the second epoch otherwise, both runs at 100% accuracy.
TAIL_SES = 2.0
# 5% of steps: GradScaler skips a step whose gradients overflowed and halves the scale (PyTorch
# AMP docs, "Gradient Scaling"). A healthy fp16 run skips a handful of early steps while the scale
# falls from 2**16 to what its gradients tolerate, then almost never; a run that keeps skipping
# is not training on those batches.
MAX_SKIP_RATE = 0.05
# 3 skips are always allowed, the warm-up length of a trial (TrialSpec.warmup): on a 23-step trial
# 5% is one step, and the scale may need a few halvings to settle, as the timing needs warm-up.
SETTLE_SKIPS = 3


@dataclass(frozen=True)
class Band:
    """The baseline's seed-to-seed band: where a run that trains as well as the baseline ends.

    ``tails`` are each baseline run's mean loss over its last ``tail`` steps; ``lo``/``hi`` are
    their min/max widened by the margin; ``centre`` is the middle of the band; ``steps`` is the
    length of the baseline runs, so a band is only used on runs of that length."""

    lo: float
    hi: float
    centre: float
    tail: int
    steps: int
    tails: tuple[float, ...]

    @classmethod
    def from_baselines(
        cls,
        trajectories: Sequence[Sequence[float]],
        *,
        tail: int = DEFAULT_TAIL,
        margin: float = DEFAULT_MARGIN,
    ) -> Band:
        if len(trajectories) < 2:
            raise ValueError(
                f"a seed-to-seed band needs baseline runs from at least 2 seeds; got "
                f"{len(trajectories)}"
            )
        if tail < 1:
            raise ValueError(f"tail must be at least 1 step; got {tail}")
        if not margin >= 0:
            raise ValueError(f"margin must be a share of the centre, 0 or more; got {margin}")
        lengths = [len(t) for t in trajectories]
        if len(set(lengths)) > 1:
            raise ValueError(f"baseline runs differ in length {lengths}: run every seed as long")
        if lengths[0] < tail:
            raise ValueError(f"baseline runs have {lengths[0]} steps, fewer than tail={tail}")
        for i, t in enumerate(trajectories):
            _require_finite(t, f"baseline run {i}")
        tails = tuple(_mean(t[-tail:]) for t in trajectories)
        centre = (min(tails) + max(tails)) / 2
        # the losses' spread over the tail (none for a tail of one step)
        sd = max(statistics.stdev(t[-tail:]) if tail > 1 else 0.0 for t in trajectories)
        se = sd / math.sqrt(tail)
        widen = max(
            margin * abs(centre),
            PRESERVING_RTOL * abs(centre),
            MIN_WIDEN_ABS,
            TAIL_SES * math.sqrt(2) * se,
        )
        return cls(min(tails) - widen, max(tails) + widen, centre, tail, lengths[0], tails)

    @property
    def spread(self) -> float:
        """The seeds' own spread (max - min of ``tails``) relative to the centre; 0 when every
        seed landed on the same mean, which suggests the recipe ignores the seed."""
        width = max(self.tails) - min(self.tails)
        return width / abs(self.centre) if self.centre else (math.inf if width else 0.0)

    def delta(self, value: float) -> float | None:
        """``value`` minus the centre, relative to the centre; None when the centre is 0."""
        return (value - self.centre) / abs(self.centre) if self.centre else None

    def __str__(self) -> str:
        return f"[{self.lo:.4g}, {self.hi:.4g}]"


@dataclass(frozen=True)
class Verdict:
    """The guard's answer. ``reason`` is "" when ``ok``, except for a numerics-preserving trial
    judged by the band because the training amplifies rounding (said in the table); ``lower``:
    rejected for ending below the band (it trained lower: ``--accept-lower`` keeps it);
    ``loss_delta`` is the trial's tail mean minus the band's centre, relative to it (None when
    the loss is not finite)."""

    ok: bool
    reason: str
    loss_delta: float | None
    kind: Kind
    lower: bool = False


def changes_numerics(techniques: Iterable[str]) -> bool:
    """Whether any of these catalogue ids changes numerics (so the trial is judged by the band)."""
    return any(catalog.get(t).changes_numerics for t in techniques)


def changes_random_stream(techniques: Iterable[str]) -> bool:
    """Whether any of these catalogue ids draws random numbers from other streams than the
    baseline (so a same-seed run may differ step by step without changing numerics)."""
    return any(catalog.get(t).changes_random_stream for t in techniques)


def check(
    result_losses: Sequence[float],
    *,
    baseline_losses: Sequence[float],
    band: Band,
    changes_numerics: bool,
    changes_random_stream: bool = False,
    scaler_skip_rate: float | None = None,
    preserving_rtol: float = PRESERVING_RTOL,
    max_skip_rate: float = MAX_SKIP_RATE,
    reproducible: bool = True,
) -> Verdict:
    """Judge a trial that ran as many steps, of the same batch size, as ``baseline_losses``.

    ``baseline_losses`` is the baseline run from the trial's seed. A numerics-preserving trial
    must match it at every step within ``preserving_rtol``; a numerics-changing one must end
    (mean of the band's tail) inside ``band``. A preserving trial that draws its random numbers
    from other streams (``changes_random_stream``: loader workers) is held to the step-by-step
    match when it happens to keep the stream, and otherwise judged by the band, as its seeded
    dropout and augmentations legitimately differ. ``reproducible=False`` (a CUDA run: its
    atomics-based kernels make two same-seed runs of the baseline itself differ, by up to 4.1e-3
    over 60 steps on an H100, benchmarks/results/2026-11-25-gpu-check.json) judges a trial past
    the step-by-step tolerance by the band the same way. NaN/Inf or too many GradScaler skips
    reject every kind."""
    kind: Kind = "changing" if changes_numerics else "preserving"
    n = len(result_losses)
    if n != len(baseline_losses):
        raise ValueError(
            f"the trial ran {n} steps and the baseline {len(baseline_losses)}: compare runs of "
            f"the same length (the same number of samples), or use check_at_equal_samples for a "
            f"changed batch size"
        )
    _require_band_for(band, baseline_losses)
    diverged = _diverged(result_losses)
    if diverged:
        return Verdict(False, diverged, None, kind)
    tail = _mean(result_losses[-band.tail :])
    skipping = _skipping(n, scaler_skip_rate, max_skip_rate)
    if skipping:
        return Verdict(False, skipping, band.delta(tail), kind)
    if changes_numerics:
        return _judge_tail(tail, band, f"mean of the last {band.tail} of {n} steps")
    worst, gap = 0, 0.0
    first: tuple[int, float] | None = None  # the first step that differs, and by how much
    for step, (r, b) in enumerate(zip(result_losses, baseline_losses, strict=True), start=1):
        rel = abs(r - b) / abs(b) if b else (0.0 if r == b else math.inf)
        if rel > 0 and first is None:
            first = (step, rel)
        if rel > gap:
            worst, gap = step, rel
    # A preserving change that first differs by rounding (ulps) and ends past the tolerance
    # ran on a trajectory that amplifies rounding: actions fed back into the data (RL), sampling.
    # Issue 29: fused Adam, 1.39x, was rejected on a DQN as "differs by 1.0e+01 at step 28".
    amplified = first is not None and first[1] <= ULP_START and gap > preserving_rtol
    if gap > preserving_rtol and (changes_random_stream or not reproducible or amplified):
        judged = _judge_tail(tail, band, f"mean of the last {band.tail} of {n} steps")
        why = (
            "its random numbers come from other streams"
            if changes_random_stream
            else "same-seed runs on this device are not bitwise reproducible"
            if not reproducible
            else f"the training amplifies rounding: the same-seed run first differs by "
            f"{first[1]:.1e} at step {first[0]}"  # type: ignore[index]
        )
        if judged.ok:  # said where it is news: a preserving change judged by the band
            return judged if not amplified else replace(judged, reason=f"judged by the band: {why}")
        return replace(
            judged,
            reason=f"{judged.reason}; judged by the band, not step by step, as {why} (the "
            f"same-seed run differs by {gap:.1e} at step {worst})",
        )
    if gap > preserving_rtol:
        return Verdict(
            False,
            f"loss differs from the same-seed baseline by {gap:.1e} relative at step {worst} "
            f"(tolerance {preserving_rtol:.0e})",
            band.delta(tail),
            kind,
        )
    return Verdict(True, "", band.delta(tail), kind)


def check_at_equal_samples(
    result_losses: Sequence[float],
    *,
    result_batch: int,
    baseline_losses: Sequence[float],
    baseline_batch: int,
    band: Band,
    scaler_skip_rate: float | None = None,
    max_skip_rate: float = MAX_SKIP_RATE,
) -> Verdict:
    """Judge a trial with another batch size by its loss after as many samples as the baseline.

    The baseline saw ``S = len(baseline_losses) * baseline_batch`` samples and its band averages
    the samples of its last ``band.tail`` steps. The trial is judged on the mean loss of its
    steps whose samples fall in that same window, ending at the first step that has seen at least
    ``S`` samples (never judged before it has seen them; at most one batch more). The same window
    of samples means the same point of training and the same number of per-sample losses
    averaged, so the same noise, whatever the batch size. This assumes the recipe's loss is a
    per-sample mean, so a step's loss does not scale with its batch size. Always "changing":
    another batch size (and its scaled LR) changes numerics. Keyword-only, as the two batch
    sizes are easy to swap.
    """
    if result_batch < 1 or baseline_batch < 1:
        raise ValueError(f"batch sizes must be positive; got {result_batch}, {baseline_batch}")
    _require_band_for(band, baseline_losses)
    samples = len(baseline_losses) * baseline_batch
    end = -(-samples // result_batch)  # ceil: the first step that has seen `samples`
    # steps after `start` end inside the baseline's tail window of samples
    start = (len(baseline_losses) - band.tail) * baseline_batch // result_batch
    if len(result_losses) < end:
        raise ValueError(
            f"the trial ran {len(result_losses)} steps of batch {result_batch}; reaching the "
            f"baseline's {samples} samples ({len(baseline_losses)} steps of batch "
            f"{baseline_batch}) needs {end}"
        )
    diverged = _diverged(result_losses)  # anywhere, also past the matching step
    if diverged:
        return Verdict(False, diverged, None, "changing")
    tail = _mean(result_losses[start:end])
    skipping = _skipping(len(result_losses), scaler_skip_rate, max_skip_rate)
    if skipping:
        return Verdict(False, skipping, band.delta(tail), "changing")
    return _judge_tail(tail, band, f"mean of steps {start + 1}-{end} of batch {result_batch}")


# -- helpers ------------------------------------------------------------------------------------
def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _first_non_finite(losses: Sequence[float]) -> tuple[int, float] | None:
    for step, loss in enumerate(losses, start=1):
        if not math.isfinite(loss):
            return step, loss
    return None


def _require_finite(losses: Sequence[float], what: str) -> None:
    bad = _first_non_finite(losses)
    if bad is not None:
        raise ValueError(
            f"{what}'s loss became {bad[1]} at step {bad[0]}: the baseline itself diverges; "
            f"make the recipe train (e.g. lower its lr) before tuning it"
        )


def _require_band_for(band: Band, baseline_losses: Sequence[float]) -> None:
    if band.steps != len(baseline_losses):
        raise ValueError(
            f"the band comes from {band.steps}-step baseline runs, but this baseline ran "
            f"{len(baseline_losses)} steps: build the band from runs of the same length"
        )
    _require_finite(baseline_losses, "the baseline")


def _diverged(losses: Sequence[float]) -> str:
    """Why the trial diverged ("loss became nan at step 7"), or "" when every loss is finite."""
    if not losses:
        raise ValueError("the trial recorded no losses")
    bad = _first_non_finite(losses)
    return f"loss became {bad[1]} at step {bad[0]}" if bad else ""


def _skipping(steps: int, skip_rate: float | None, max_skip_rate: float) -> str:
    """Why the GradScaler skipped too many of ``steps``, or "" (also when there is no scaler).
    The rate is taken over all the trial's steps, warm-up included, as its losses are."""
    if skip_rate is None:
        return ""
    if not 0 <= skip_rate <= 1:
        raise ValueError(f"scaler_skip_rate is a share of steps in [0, 1]; got {skip_rate}")
    limit = max(max_skip_rate, SETTLE_SKIPS / steps)
    if skip_rate <= limit:
        return ""
    skipped = round(skip_rate * steps)
    return f"GradScaler skipped {skipped} of {steps} steps ({skip_rate:.1%}, limit {limit:.1%})"


def _judge_tail(tail: float, band: Band, where: str) -> Verdict:
    if band.lo <= tail <= band.hi:
        return Verdict(True, "", band.delta(tail), "changing")
    side = "above" if tail > band.hi else "below"
    return Verdict(
        False,
        f"loss {tail:.4g} ({where}) is {side} the baseline's seed band {band}",
        band.delta(tail),
        "changing",
        lower=side == "below",
    )
