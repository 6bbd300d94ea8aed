"""From the steps recorded to the figures reported: which steps count, the time breakdown with
its spread, throughput, FLOP/s and MFU, and the sync table."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from torchpace.doctor.phases import device_phases
from torchpace.doctor.records import Records, Step
from torchpace.doctor.sampler import hot_spots
from torchpace.doctor.sites import Site
from torchpace.measure.stats import summarize
from torchpace.runtime.phases import PHASES


@dataclass(frozen=True)
class Selection:
    kept: list[Step]
    excluded: dict[str, int]  # reason -> steps
    note: str | None


def train_loaders(records: Records) -> set[int]:
    return {k for k, info in records.loaders.items() if info.training}


def is_eval_step(step: Step, train: set[int], usual_eval_calls: float) -> bool:
    """A step that ran an evaluation: it fetched from a loader that does not feed training, or
    made more forward calls without autograd than a usual step does (a frozen teacher model
    runs every step; an evaluation loop does not)."""
    return any(f.loader not in train for f in step.fetches) or step.eval_calls > usual_eval_calls


def select(records: Records) -> Selection:
    measured = [s for s in records.steps if s.kind == "measured"]
    train = train_loaders(records)
    usual = statistics.median([s.eval_calls for s in measured]) if measured else 0.0
    excluded: dict[str, int] = defaultdict(int)
    kept = []
    for step in measured:
        if step.compiled:
            excluded["compiled"] += 1
        elif is_eval_step(step, train, usual):
            excluded["evaluation"] += 1
        else:
            kept.append(step)
    note = None
    if measured and not kept:
        kept, note = measured, "every measured step compiled or evaluated; all are reported"
    return Selection(kept, dict(excluded), note)


def phases_of(step: Step, train: set[int]) -> dict[str, float]:
    """Host seconds per phase; waits on non-training loaders are evaluation, not data wait."""
    out = dict(step.host)
    other = sum(f.seconds for f in step.fetches if f.loader not in train)
    moved = min(other, out["data"])
    out["data"] -= moved
    out["eval"] += moved
    return out


def samples_of(step: Step, train: set[int]) -> int:
    fetched = sum(f.samples for f in step.fetches if f.loader in train)
    return fetched or step.forward_samples


def tokens_of(step: Step, train: set[int]) -> int:
    """Real (unpadded) tokens of the step's training batches, or of its models' token-id
    inputs where no DataLoader fed them; 0 for batches that are not token ids."""
    fetched = sum(f.tokens - f.padded for f in step.fetches if f.loader in train)
    return fetched or step.forward_tokens


def breakdown(
    steps: list[Step], per_step: list[dict[str, float]], *, device: bool = False
) -> dict[str, Any]:
    """Each phase's share of the measured time and its per-step seconds; ``device``: shares of
    the device's own time (the event trails), which a host running ahead does not bound."""
    if device:
        total = sum(sum(p.values()) for p in per_step) or 1.0
    else:
        total = sum(s.seconds for s in steps) or 1.0
    phases: dict[str, Any] = {}
    for name in PHASES:
        values = [p[name] for p in per_step]
        phases[name] = {
            "share": sum(values) / total,
            "seconds": summarize(values).to_dict(),
        }
    return phases


def sync_table(steps: list[Step], *, measured_time: bool) -> list[dict[str, Any]]:
    calls: dict[tuple[Site, str], int] = defaultdict(int)
    present: dict[tuple[Site, str], int] = defaultdict(int)
    blocked: dict[tuple[Site, str], float] = defaultdict(float)
    for step in steps:
        for key, n in step.syncs.items():
            calls[key] += n
            present[key] += 1
            blocked[key] += step.sync_time.get(key, 0.0)
    n = len(steps) or 1
    rows = [
        {
            "path": site[0],
            "line": site[1],
            "call": kind,
            "count": calls[(site, kind)],
            "per_step": calls[(site, kind)] / n,
            "steps_with": present[(site, kind)],
            "every_step": present[(site, kind)] == len(steps),
            "blocked_s_per_step": blocked[(site, kind)] / n if measured_time else None,
        }
        for site, kind in calls
    ]
    return sorted(rows, key=lambda r: (-r["per_step"], r["path"], r["line"]))


def padding_summary(
    kept: list[Step], train: set[int], in_dataset: set[int]
) -> dict[str, Any] | None:
    """The share of padding in the training batches of token ids (loaders.padding_of), over
    the kept steps; None when no such batch was fed. ``in_dataset``: the loaders whose samples
    come padded from the dataset (loaders.padded_in_dataset)."""
    fetches = [f for s in kept for f in s.fetches if f.loader in train]
    tokens = sum(f.tokens for f in fetches)
    if not tokens:
        return None
    padded = sum(f.padded for f in fetches)
    return {
        "share": padded / tokens,
        "tokens_per_step": tokens / len(kept),
        "padded_per_step": padded / len(kept),
        # padding past each batch's longest row: samples padded to a fixed length
        "past_longest_share": sum(f.past_longest for f in fetches) / tokens,
        # the dataset's __getitem__ returns its samples padded to the batches' width
        "padded_in_dataset": bool(train & in_dataset),
    }


def summarize_steps(records: Records, *, cuda: bool) -> dict[str, Any]:
    sel = select(records)
    train = train_loaders(records)
    kept = sel.kept
    counts = {
        "warmup": sum(s.kind == "warmup" for s in records.steps),
        "probe": sum(s.kind == "probe" for s in records.steps),
        "measured": sum(s.kind == "measured" for s in records.steps),
        "kept": len(kept),
        "excluded": sel.excluded,
    }
    out: dict[str, Any] = {"steps": counts, "note": sel.note}
    if not kept:
        return out
    per_step = [phases_of(s, train) for s in kept]
    seconds = [s.seconds for s in kept]
    samples = [samples_of(s, train) for s in kept]
    out["measured_s"] = sum(seconds)  # the host breakdown's shares are fractions of this total
    out["breakdown"] = breakdown(kept, per_step)
    if cuda:
        device = [device_phases(s.events) for s in kept]
        out["device_breakdown"] = breakdown(kept, device, device=True)
        # A host with no sync in the step queues work and ends its steps before the GPU does
        # (until the launch queue fills): the GPU's time per step is then the pace, and the
        # host's alone made MFU 610% on large bf16 matmuls (benchmarks/results, H100).
        seconds = [max(h, sum(d.values())) for h, d in zip(seconds, device, strict=True)]
    out["step_seconds"] = summarize(seconds).to_dict()
    out["micro_steps"] = statistics.median(s.backward_calls for s in kept)
    out["samples_per_step"] = statistics.median(samples)
    out["samples_per_s"] = (
        summarize([n / t for n, t in zip(samples, seconds, strict=True)]).to_dict()
        if any(samples)
        else None
    )
    tokens = [tokens_of(s, train) for s in kept]
    if any(tokens):
        out["tokens_per_step"] = statistics.median(tokens)
        out["tokens_per_s"] = summarize(
            [n / t for n, t in zip(tokens, seconds, strict=True)]
        ).to_dict()
    waits = [f for s in kept for f in s.fetches if f.loader in train]
    waited = sum(f.seconds for f in waits)
    if waited > 0:
        # How much of the data wait the main thread spent computing (loading in this process:
        # the dataset and collate_fn without workers) rather than waiting on workers or I/O.
        out["data_cpu_fraction"] = min(1.0, sum(f.cpu for f in waits) / waited)
        out["data_batches_per_step"] = len(waits) / len(kept)
    padding = padding_summary(kept, train, records.padded_in_dataset)
    if padding is not None:
        out["padding"] = padding
    out["hot_spots"] = hot_spots(records.samples, {s.index for s in kept})
    out["syncs"] = sync_table(kept, measured_time=cuda)
    out["syncs_all_steps"] = sync_table(
        [s for s in records.steps if s.kind == "measured"], measured_time=cuda
    )
    return out


def utilisation(
    flops: int | None, step_s: float | None, peak_tflops: float | None
) -> dict[str, Any]:
    if not flops or not step_s:
        return {
            "flops_per_step": flops,
            "achieved_tflops": None,
            "peak_tflops": peak_tflops,
            "mfu": None,
        }
    achieved = flops / step_s / 1e12
    return {
        "flops_per_step": flops,
        "achieved_tflops": achieved,
        "peak_tflops": peak_tflops,
        "mfu": achieved / peak_tflops if peak_tflops else None,
    }
