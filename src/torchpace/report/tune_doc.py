"""A tune result (``torchpace-tune.json``, kind "tune") as a report ``Document``: what the plan
bought, each technique's speed-up alone and combined, the loss curves against the baseline's seed
band, peak memory per trial, the verdicts, the batch-size search and the plan to copy."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from torchpace.report import fmt
from torchpace.report.document import (
    BandArea,
    Bar,
    Block,
    Cell,
    Chart,
    Code,
    Curve,
    Curves,
    Document,
    Facts,
    Link,
    Paragraph,
    RangeBars,
    Section,
    table,
)
from torchpace.report.references import references, technique_anchor
from torchpace.report.tune_table import KEPT, Row, confirm_trial, delta_text, speedup_text


def _rows(result: dict[str, Any]) -> list[Row]:
    return [Row(**(r | {"techniques": tuple(r["techniques"])})) for r in result["rows"]]


def _trials(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in result["trials"]}


def _protocol(result: dict[str, Any]) -> str:
    s = result["settings"]
    return (
        f"each trial ran in a fresh process: {s['warmup']} warm-up steps (excluded) then "
        f"{s['steps']} measured steps"
    )


def _compile_note(result: dict[str, Any]) -> str:
    compiled = [
        f"{t['name']} {t['compile_seconds']:.1f} s"
        for t in result["trials"]
        if t.get("compile_seconds")
    ]
    if not compiled:
        return "No trial compiled."
    return (
        "Compile time is excluded from the step times and shown separately: "
        + "; ".join(compiled)
        + f". A compiled trial is kept only if it pays back its compile over "
        f"{result['settings']['run_steps']} steps (--run-steps)."
    )


def _summary_section(result: dict[str, Any]) -> Section:
    plan = result["plan"]
    techniques = plan.get("techniques") or []
    confirm = result.get("confirm") or {}
    items: list[tuple[str, Cell]] = [
        (
            "plan",
            tuple(Link(t, technique_anchor(t)) for t in techniques)
            if techniques
            else f"the {'script' if result.get('entry') == 'script' else 'recipe'} as written "
            "(nothing paid off)",
        )
    ]
    if confirm.get("median"):
        ratios = ", ".join(f"{r:.2f}×" for r in confirm["ratios"])
        # results before "confirmed" was stored: every round counted as confirming
        confirmed = confirm.get("confirmed", not confirm.get("noise"))
        items.append(
            (
                "confirmed speed-up" if confirmed else "not confirmed",
                f"{confirm['median']:.2f}× in samples/s, median of {len(confirm['ratios'])} "
                f"paired rounds against the baseline ({ratios})"
                + ("" if confirmed else ": the rounds do not all find the plan faster"),
            )
        )
    s = result["settings"]
    items += [
        (
            "search",
            f"{result['elapsed_s']:.0f} s of a {s['budget_s']:.0f} s budget, "
            f"{len(result['trials'])} trials ({result['cached_trials']} from the cache)",
        ),
        ("trials", _protocol(result)),
        ("plan is for", f"a run of {s['run_steps']} steps (--run-steps)"),
    ]
    if result.get("skipped_for_budget"):
        items.append(("not tried (budget)", ", ".join(result["skipped_for_budget"])))
    return Section("summary", "What the plan buys", (Facts(tuple(items)),))


def _as_speedup(row: Row) -> tuple[str, Row] | None:
    """The row's series and a row whose ``speedup`` is what it measured: its own alone, or (a
    "+ name" row) the greedy combination's so far; None for a row without either."""
    if row.speedup is not None:
        return "alone", row
    if row.cumulative is not None:
        return "combined", replace(row, speedup=row.cumulative)
    return None


def _speedup_chart(result: dict[str, Any], rows: list[Row]) -> Chart | None:
    bars: list[Bar] = []
    data: list[list[Cell]] = []
    for row in rows:
        measured = None if row.name == "baseline" else _as_speedup(row)
        if measured is None:
            continue
        series, shown = measured
        assert shown.speedup is not None
        kept = row.verdict.startswith(KEPT)
        bars.append(Bar(row.name, shown.speedup, row.speedup_lo, row.speedup_hi, series, kept))
        data.append([row.name, series, speedup_text(shown), row.verdict])
    if not bars:
        return None
    best = max(bars, key=lambda b: b.value)
    return Chart(
        id="tune-speedups",
        title="Speed-up of each technique alone, and of the combination as it grew",
        plot=RangeBars(tuple(bars), unit="× the baseline's step rate", reference=1.0),
        alt=f"Horizontal bars of {len(bars)} trials' speed-ups over the baseline, with whiskers "
        f"for their spread; the vertical line marks 1× (no change). The largest is {best.label} "
        f"at {best.value:.2f}×.",
        how=f"Speed-up: the baseline's median step time over the trial's, {_protocol(result)}; "
        "whiskers: the same ratio from the trial's quartiles (q1–q3). 'combined' bars are the "
        f"greedy combination up to that technique. {_compile_note(result)}",
        data=table(["trial", "series", "speed-up [q1–q3]", "verdict"], data, right=(2,), wide=3),
    )


def _tail_mean(losses: list[float], tail: int) -> float | None:
    return sum(losses[-tail:]) / tail if len(losses) >= tail else None


def _loss_chart(result: dict[str, Any], rows: list[Row]) -> Chart | None:
    trials = _trials(result)
    band = result.get("band")
    curves: list[Curve] = []
    picked: list[tuple[dict[str, Any], str, str]] = []
    for t in result["trials"]:
        if t["name"].startswith("baseline") and t["losses"]:
            picked.append((t, "baseline", "baseline"))
    plan = trials.get(confirm_trial("plan", 1))
    if plan is None:
        kept = [r for r in rows if r.verdict == KEPT and r.name in trials]
        plan = trials[kept[-1].name] if kept else None
    if plan is not None and plan["losses"]:
        picked.append((plan, "plan", "the chosen plan"))
    for row in rows:
        if row.verdict.startswith(("rejected", "not worth it")) and row.name in trials:
            t = trials[row.name]
            if t["losses"]:
                picked.append((t, "rejected", row.verdict))
    if not picked:
        return None
    data: list[list[Cell]] = []
    tail = band["tail"] if band else 8
    for t, role, verdict in picked:
        bs = t["batch_size"] or 1
        steps = tuple(bs * (i + 1) for i in range(len(t["losses"])))
        label = t["name"] if role != "plan" else f"plan ({t['name']})"
        curves.append(Curve(label, steps, tuple(t["losses"]), role))  # type: ignore[arg-type]
        mean = _tail_mean(t["losses"], tail)
        data.append(
            [
                label,
                str(bs),
                str(len(t["losses"])),
                f"{t['losses'][0]:.3f}",
                fmt.DASH if mean is None else f"{mean:.3f}",
                verdict,
            ]
        )
    area = None
    if band:
        base_bs = next((t["batch_size"] for t, role, _ in picked if role == "baseline"), 1) or 1
        n = len(next(t["losses"] for t, role, _ in picked if role == "baseline"))
        area = BandArea(
            band["lo"],
            band["hi"],
            (n - tail + 1) * base_bs,
            n * base_bs,
            f"seed band [{band['lo']:.3f}, {band['hi']:.3f}]",
        )
    how = (
        f"Training loss at every step, warm-up included, against the samples seen (so trials "
        f"with another batch size line up). The band: the baseline seeds' mean loss over their "
        f"last {tail} steps, widened by the guard's margin; a numerics-changing trial must end "
        "in it, a numerics-preserving one must match the baseline step by step."
    )
    return Chart(
        id="tune-loss",
        title="Loss: the baseline's seeds and band, the chosen plan, and the rejected trials",
        plot=Curves(tuple(curves), area, "samples seen", "training loss"),
        alt=f"Line chart of training loss over samples seen for {len(curves)} runs: "
        f"{len([c for c in curves if c.role == 'baseline'])} baseline seeds, "
        f"{'the chosen plan, ' if plan else ''}"
        f"and {len([c for c in curves if c.role == 'rejected'])} rejected trials"
        + (f", over the seed band {area.label}." if area else "."),
        how=how,
        data=table(
            ["run", "batch", "steps", "first loss", f"last-{tail} mean", "verdict"],
            data,
            right=(1, 2, 3, 4),
            wide=5,
        ),
    )


def _memory_chart(result: dict[str, Any]) -> Chart | None:
    ok = [t for t in result["trials"] if t.get("peak_memory_bytes")]
    if not ok:
        return None
    kind = ok[0].get("memory_kind") or "?"
    bars = tuple(Bar(t["name"], t["peak_memory_bytes"] / 2**20) for t in ok)
    top = max(bars, key=lambda b: b.value)
    return Chart(
        id="tune-memory",
        title="Peak memory per trial",
        plot=RangeBars(bars, unit="MiB"),
        alt=f"Horizontal bars of the peak memory of {len(bars)} trials; the largest is "
        f"{top.label} at {top.value:,.0f} MiB.",
        how=f"Peak {kind} of each trial's process ("
        + ("resident set size" if kind == "rss" else "torch.cuda.max_memory_allocated")
        + ") over its warm-up and measured steps.",
        data=table(
            ["trial", "peak MiB", "batch"],
            [
                [t["name"], f"{t['peak_memory_bytes'] / 2**20:,.0f}", str(t["batch_size"])]
                for t in ok
            ],
            right=(1, 2),
        ),
    )


def _verdict_section(result: dict[str, Any], rows: list[Row]) -> Section:
    body: list[list[Cell]] = []
    for row in rows:
        measured = _as_speedup(row)
        shown = row if measured is None else measured[1]
        body.append(
            [
                row.name,
                tuple(Link(t, technique_anchor(t)) for t in row.techniques),
                speedup_text(shown),
                fmt.DASH if row.peak_bytes is None else f"{row.peak_bytes / 2**20:,.0f}",
                delta_text(row.loss_delta),
                row.verdict,
            ]
        )
    return Section(
        "verdicts",
        "Verdicts",
        (
            table(
                ["trial", "techniques", "speed-up [q1–q3]", "peak MiB", "loss Δ", "verdict"],
                body,
                right=(2, 3, 4),
                wide=5,
                caption="Speed-up: the trial against the baseline; on a '+ name' row, the greedy "
                "combination up to and including that technique. Loss Δ: the last steps' mean "
                "against the seed band's centre.",
            ),
        ),
    )


def _batch_section(result: dict[str, Any]) -> Section | None:
    tried = result.get("batch_search") or []
    loader = result.get("loader") or {}
    if not tried and not loader:
        return None
    blocks: list[Block] = []
    if tried:
        body: list[list[Cell]] = [
            [
                str(t["batch_size"]),
                t["status"],
                fmt.DASH if t.get("samples_per_s") is None else f"{t['samples_per_s']:,.0f}",
                fmt.times(t.get("gain")),
                "yes" if t.get("converged") else "no",
                t.get("guard") or t.get("reason") or "",
            ]
            for t in tried
        ]
        blocks.append(
            table(
                ["batch", "status", "samples/s", "gain", "converged", "guard / reason"],
                body,
                right=(0, 2, 3),
                wide=5,
                caption="Doubling from the recipe's batch size, then bisecting after an "
                "out-of-memory, with a 10% margin under --memory-budget; each size is trained "
                "for as many samples as the baseline and judged by the convergence guard.",
            )
        )
    else:
        blocks.append(Paragraph("The batch size was not searched.", tone="muted"))
    if loader:
        blocks.append(
            Facts(
                (
                    ("input pipeline alone", f"{loader['loader_samples_per_s']:,.0f} samples/s"),
                    ("training step", f"{loader['step_samples_per_s']:,.0f} samples/s"),
                    ("headroom", f"{loader['headroom']:.1f}× (under 1.5× the loader is tuned)"),
                )
            )
        )
    return Section("batch", "Batch size and input pipeline", tuple(blocks))


def header(result: dict[str, Any]) -> Facts:
    target: list[tuple[str, Cell]] = [("recipe", result["recipe"])]
    if result.get("entry") == "script":  # a script, its arguments, what ordered its trials
        target = [
            ("script", result["recipe"]),
            ("arguments", fmt.command_line(result.get("script_args"))),
            ("trial order", result.get("survey") or fmt.DASH),
        ]
    items: list[tuple[str, Cell]] = [
        *target,
        ("date", result.get("created") or fmt.DASH),
        ("command", fmt.command_line(result.get("command"))),
        ("environment", fmt.environment(result["environment"])),
        ("cache fingerprint", result.get("fingerprint") or fmt.DASH),
    ]
    return Facts(tuple(items))


def build(result: dict[str, Any]) -> Document:
    rows = _rows(result)
    charts = [c for c in (_speedup_chart(result, rows),) if c is not None]
    sections: list[Section | None] = [
        _summary_section(result),
        Section("speedups", "Speed-ups", tuple(charts)) if charts else None,
        _section_of("loss", "Convergence", _loss_chart(result, rows)),
        _section_of("memory", "Peak memory", _memory_chart(result)),
        _verdict_section(result, rows),
        _batch_section(result),
        Section(
            "plan",
            "The plan",
            (
                Paragraph(
                    "Saved as torchpace-plan.json; apply it with torchpace.prepare(..., "
                    "plan=Plan.load(path)) or `torchpace fit RECIPE --plan torchpace-plan.json`."
                ),
                Code(json.dumps(result["plan"], indent=2), "json"),
            ),
        ),
        references(
            techniques=[
                *(result["plan"].get("techniques") or []),
                *(t for r in rows for t in r.techniques),
            ]
        ),
    ]
    return Document(
        kind="tune",
        title=f"torchpace tune {result['recipe']}",
        header=header(result),
        sections=tuple(s for s in sections if s is not None),
    )


def _section_of(sid: str, title: str, chart: Chart | None) -> Section | None:
    return None if chart is None else Section(sid, title, (chart,))
