"""Many ranks, one report: each rank's figures in brief, and the patterns only a comparison of
ranks can show (a straggler, one rank waiting for data while the others compute).

Under DDP the gradient all-reduce holds every rank to the pace of the slowest, so the ranks'
median step times come out equal and the difference hides in the fast ranks' backward(), where
they wait for the all-reduce. A rank's *own work* is therefore its step time less that wait, and
the wait is estimated as its backward time beyond the shortest backward of any rank: every rank
runs the same backward, so the rest is waiting. Ranks that do not synchronise (no all-reduce)
differ in step time directly; both spreads are computed and the larger one is judged.
"""

from __future__ import annotations

from typing import Any

from torchpace.doctor.merge import entry, rank
from torchpace.doctor.patterns import HIGH, MODERATE
from torchpace.findings import DoctorFinding

# 10%: torchpace's choice. Below 5% a change is within step-to-step noise (patterns.MODERATE);
# a spread compares two such noisy medians, one per rank, so a straggler is called at twice that.
STRAGGLER = 0.10
# 5 percentage points: the PyTorch profiler's input-bound line (patterns.MODERATE); a rank that
# waits for data that much longer than another holds the others up by as much each step.
DATA_GAP = MODERATE
# The cross-rank patterns' names (docs/doctor-result.schema.json lists them with the others).
PATTERNS = ("rank-straggler", "rank-data-wait-imbalance")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def _training_loader(result: dict[str, Any]) -> dict[str, Any] | None:
    loaders = [ld for ld in result.get("loaders", []) if ld.get("role") == "train"]
    return loaders[0] if loaders else None


def summarize_rank(result: dict[str, Any], rank_: int) -> dict[str, Any]:
    """One rank's figures in brief: what rank 0 needs from every rank to compare them."""
    # On CUDA the device's phases: NCCL's all-reduce does not block the host, so a fast rank's
    # wait for a slow one shows on its GPU's backward (the all-reduce kernel spins), not on the
    # host clock's.
    breakdown = result.get("device_breakdown") or result.get("breakdown") or {}
    throughput = result.get("samples_per_s") or {}
    loader = _training_loader(result)
    return {
        "rank": rank_,
        "outcome": result.get("outcome"),
        "steps_kept": (result.get("steps") or {}).get("kept", 0),
        "step_seconds": result.get("step_seconds"),
        "shares": {name: p["share"] for name, p in breakdown.items()},
        "phase_seconds": {name: p["seconds"]["median"] for name, p in breakdown.items()},
        "samples_per_s": throughput.get("median"),
        "peak_memory_bytes": (result.get("memory") or {}).get("peak_bytes"),
        "loader": None
        if loader is None
        else {"num_workers": loader.get("num_workers"), "site": loader.get("site")},
    }


def figures(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-rank step, wait, own-work and data-wait figures, and their spreads."""
    timed = [s for s in summaries if s.get("step_seconds")]
    if not timed:
        return {"per_rank": [], "step_spread": None, "work_spread": None, "data_share_range": None}
    least_backward = min(s["phase_seconds"].get("backward", 0.0) for s in timed)
    per_rank = []
    for s in timed:
        step = s["step_seconds"]["median"]
        wait = min(max(s["phase_seconds"].get("backward", 0.0) - least_backward, 0.0), step)
        data_share = s["shares"].get("data", 0.0)
        per_rank.append(
            {
                "rank": s["rank"],
                "step_median_s": step,
                "wait_s": wait,
                "work_s": step - wait,
                "data_share": data_share,
                "data_s": data_share * step,
            }
        )
    steps = [r["step_median_s"] for r in per_rank]
    work = [r["work_s"] for r in per_rank]
    data = [r["data_share"] for r in per_rank]
    rates = [s["samples_per_s"] for s in timed]
    return {
        "per_rank": per_rank,
        "step_spread": max(steps) / min(steps) - 1 if min(steps) > 0 else None,
        "work_spread": max(work) / min(work) - 1 if min(work) > 0 else None,
        "data_share_range": max(data) - min(data),
        "samples_per_s_total": sum(rates) if all(r is not None for r in rates) else None,
    }


def _straggler(fig: dict[str, Any]) -> DoctorFinding | None:
    per_rank = fig["per_rank"]
    measure = (
        "work_s" if (fig["work_spread"] or 0.0) >= (fig["step_spread"] or 0.0) else "step_median_s"
    )
    spread = fig["work_spread"] if measure == "work_s" else fig["step_spread"]
    if len(per_rank) < 2 or spread is None or spread < STRAGGLER:
        return None
    slow = max(per_rank, key=lambda r: r[measure])
    fast = min(per_rank, key=lambda r: r[measure])
    longest = max(r["step_median_s"] for r in per_rank)
    gain = (slow[measure] - fast[measure]) / longest
    if measure == "work_s":
        waiting = max(per_rank, key=lambda r: r["wait_s"])
        what = (
            f"its own work takes {_ms(slow['work_s'])} a step against {_ms(fast['work_s'])} on "
            f"rank {fast['rank']} ({spread:.0%} longer); the gradient all-reduce makes the "
            f"others wait for it (rank {waiting['rank']} waits {_ms(waiting['wait_s'])} a step "
            "in backward)"
        )
    else:
        what = (
            f"its median step takes {_ms(slow['step_median_s'])} against "
            f"{_ms(fast['step_median_s'])} on rank {fast['rank']} ({spread:.0%} longer)"
        )
    data_gap = slow["data_s"] - fast["data_s"]
    if data_gap >= 0.5 * (slow[measure] - fast[measure]):
        what += "; most of the difference is time waiting for data"
    return entry(
        "rank-load-balance",
        pattern="rank-straggler",
        severity="high" if gain >= HIGH else "moderate",
        message=f"rank {slow['rank']} is a straggler: {what}.",
        fix="Give every rank the same work per step (batches of equal cost, e.g. equal token "
        "budgets), and check that the slow rank's host, device and input pipeline match the "
        "others'.",
        gain=gain,
        measured={
            "slowest_rank": slow["rank"],
            "fastest_rank": fast["rank"],
            "measure": measure,
            "slowest_s": slow[measure],
            "fastest_s": fast[measure],
            "spread": spread,
        },
    )


def _data_imbalance(fig: dict[str, Any], summaries: list[dict[str, Any]]) -> DoctorFinding | None:
    per_rank = fig["per_rank"]
    if len(per_rank) < 2 or fig["data_share_range"] < DATA_GAP:
        return None
    most = max(per_rank, key=lambda r: r["data_share"])
    least = min(per_rank, key=lambda r: r["data_share"])
    loader = next(s["loader"] for s in summaries if s["rank"] == most["rank"])
    in_process = loader is not None and loader.get("num_workers") == 0
    # Workers overlap loading with compute, which removes the wait whatever its cause; a rank
    # that already has workers and still waits is loading costlier data than the others.
    technique = "loader-workers" if in_process else "rank-load-balance"
    fix = (
        "Load batches in DataLoader worker processes (num_workers > 0) so that loading overlaps "
        "the step on every rank."
        if in_process
        else "Balance the data across ranks (samples of similar cost on each), or give the slow "
        "rank's loader more workers."
    )
    longest = max(r["step_median_s"] for r in per_rank)
    gain = (most["data_s"] - least["data_s"]) / longest
    site = None if loader is None else loader.get("site")
    return entry(
        technique,
        pattern="rank-data-wait-imbalance",
        severity="high" if gain >= HIGH else "moderate",
        message=f"rank {most['rank']} waits for data {most['data_share']:.0%} of its step "
        f"({_ms(most['data_s'])}) against {least['data_share']:.0%} on rank {least['rank']}; "
        "in data-parallel training every rank waits for it.",
        fix=fix,
        path=None if site is None else site["path"],
        line=None if site is None else site["line"],
        gain=gain,
        measured={
            "rank": most["rank"],
            "data_share": most["data_share"],
            "least_rank": least["rank"],
            "least_data_share": least["data_share"],
            "num_workers": None if loader is None else loader.get("num_workers"),
        },
    )


def aggregate(
    own: dict[str, Any],
    summaries: list[dict[str, Any]],
    *,
    world_size: int,
    missing: dict[int, str],
) -> dict[str, Any]:
    """Rank 0's result with every rank's figures, the cross-rank findings, and what is missing."""
    summaries = sorted(summaries, key=lambda s: s["rank"])
    fig = figures(summaries)
    result = dict(own)
    result["ranks"] = summaries
    note = None
    if missing:
        listed = "; ".join(f"rank {r}: {why}" for r, why in sorted(missing.items()))
        note = f"{len(missing)} of {world_size} ranks are missing from this report ({listed})"
    result["distributed"] = {
        "world_size": world_size,
        "reported": [s["rank"] for s in summaries],
        "missing": [{"rank": r, "reason": why} for r, why in sorted(missing.items())],
        "note": note,
        **fig,
    }
    found = [f for f in (_straggler(fig), _data_imbalance(fig, summaries)) if f is not None]
    result["findings"] = _merged(own.get("findings", []), found)
    return result


def _merged(own: list[DoctorFinding], found: list[DoctorFinding]) -> list[DoctorFinding]:
    """A cross-rank finding on a lint finding's line and technique becomes one entry with the
    rule's code, as ``merge`` does for one rank's runtime findings (STYLE rule 7)."""
    entries = [DoctorFinding.of(e) for e in own]
    for f in found:
        twin = next(
            (
                e
                for e in entries
                if e.source == "lint"
                and e.technique == f.technique
                and f.path is not None
                and (e.path, e.line) == (f.path, f.line)
            ),
            None,
        )
        if twin is not None and twin.code is not None:
            entries.remove(twin)
            f.merged_with_lint(twin.code, twin.message)
        entries.append(f)
    return rank(entries)
