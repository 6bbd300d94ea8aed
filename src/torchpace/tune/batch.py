"""The batch-size search of a tune: double while it pays, bisect after an out-of-memory.

"Fits" means the trial did not run out of memory (a real CUDA OOM, or past ``--memory-budget``
on a CPU) and kept a safety margin below the budget; "pays" means samples/s grew by at least
``MIN_BATCH_GAIN``; every size must also pass the convergence guard after as many samples as the
baseline, with the LR scaled by the plan's rule. Each trial runs in a fresh process, so an OOM
leaves nothing behind to restore.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torchpace.report.tune_table import Row, not_worth_it, rejected
from torchpace.train.plan import Plan
from torchpace.tune.convergence import Band, check_at_equal_samples
from torchpace.tune.noise import not_judged
from torchpace.tune.trial import TrialResult

# Doubling stops when samples/s grows by less than 5%: past that the device is busy and only
# the convergence risk of a larger batch remains.
MIN_BATCH_GAIN = 1.05
MAX_BATCH_DOUBLINGS = 3  # 8x the recipe's batch at most, so a tune stays within minutes
MAX_BISECTIONS = 2  # after an OOM: two halvings of the gap find the size within a quarter
# 10% below the budget: a training run also evaluates, checkpoints and fragments the allocator,
# which a 20-step trial does not show.
SAFETY_MARGIN = 0.9
TECHNIQUE = ("max-batch-size",)

Run = Callable[[str, Plan, int], TrialResult]  # (name, plan, steps) -> result


@dataclass
class BatchSearch:
    plan: Plan
    best: TrialResult
    best_gain: float = 1.0  # the best's samples/s over the baselines next to it
    rows: list[Row] = field(default_factory=list)
    tried: list[dict[str, Any]] = field(default_factory=list)


def search_batch(
    run: Run,
    affordable: Callable[[], bool],
    *,
    plan: Plan,
    best: TrialResult,
    base: TrialResult,
    band: Band,
    steps: int,
    lr_scaling: str,
    memory_budget: int | None,
    judge: Callable[[TrialResult, float, float], tuple[float | None, list[str]]] = (
        lambda r, line, floor: (None, [])
    ),
    best_gain: float = 1.0,
) -> BatchSearch:
    """Double the batch size while it pays and converges, bisect after an OOM. ``judge``: a
    trial's samples/s over the script as written measured next to it, and why its timing
    cannot be judged against the gain that keeps it and the best's (tune.noise; such a trial
    ends the search, said so); ``best_gain``: the same for ``best``. A size's gain is the
    ratio of the two, so a machine that drifted since ``best`` ran moves neither (None from
    ``judge``: against ``best`` directly)."""
    out = BatchSearch(plan, best, best_gain)
    good = best.batch_size or 0
    if not good:
        return out
    bad: int | None = None  # the smallest size that did not fit

    def attempt(size: int) -> str:
        """Try ``size``; return "kept", "oom" or "stop" (converged badly or did not pay)."""
        candidate = out.plan.replace(batch_size=size, lr_scaling=lr_scaling)
        r = run(f"batch {size}", candidate, steps)
        entry: dict[str, Any] = {"batch_size": size, "status": r.status, "reason": r.reason}
        out.tried.append(entry)
        too_big = memory_budget is not None and (r.peak_memory_bytes or 0) > (
            SAFETY_MARGIN * memory_budget
        )
        if r.status == "oom" or (r.status == "ok" and too_big):
            why = r.reason or f"peak {r.peak_memory_bytes} B over {SAFETY_MARGIN:.0%} of budget"
            out.rows.append(Row(f"batch {size}", TECHNIQUE, verdict=rejected(f"oom: {why}")))
            entry["fits"] = False
            return "oom"
        if r.status != "ok" or not (r.samples_per_s and out.best.samples_per_s):
            out.rows.append(
                Row(f"batch {size}", TECHNIQUE, verdict=rejected(f"{r.status}: {r.reason}"))
            )
            return "stop"
        v = check_at_equal_samples(
            r.losses,
            result_batch=size,
            baseline_losses=base.losses,
            baseline_batch=base.batch_size or size,
            band=band,
            scaler_skip_rate=r.scaler_skip_rate,
        )
        # only a size that converged is timed (and gets the baseline after it)
        line = out.best_gain * MIN_BATCH_GAIN
        paired, noisy = judge(r, line, out.best_gain) if v.ok else (None, [])
        direct = r.samples_per_s / out.best.samples_per_s
        gain = paired / out.best_gain if paired is not None else direct
        entry.update(samples_per_s=r.samples_per_s, gain=gain, converged=v.ok, guard=v.reason)
        keep = v.ok and not noisy and gain >= MIN_BATCH_GAIN
        verdict = (
            f"kept (LR scaled by {lr_scaling})"
            if keep
            else (
                rejected(v.reason)
                if not v.ok
                else not_judged(noisy)
                if noisy
                else not_worth_it(gain)
            )
        )
        out.rows.append(
            Row(
                f"batch {size}",
                TECHNIQUE,
                gain,
                None,
                None,
                None,
                r.peak_memory_bytes,
                v.loss_delta,
                verdict,
            )
        )
        if keep:
            out.plan, out.best = candidate, r
            out.best_gain = paired if paired is not None else out.best_gain * gain
        return "kept" if keep else "stop"

    for _ in range(MAX_BATCH_DOUBLINGS):
        if not affordable():
            return out
        outcome = attempt(good * 2)
        if outcome == "kept":
            good *= 2
        elif outcome == "oom":
            bad = good * 2
            break
        else:
            return out
    for _ in range(MAX_BISECTIONS):
        if bad is None or bad - good <= max(1, good // 4) or not affordable():
            break
        mid = (good + bad) // 2
        outcome = attempt(mid)
        if outcome == "kept":
            good = mid
        elif outcome == "oom":
            bad = mid
        else:
            break
    return out
