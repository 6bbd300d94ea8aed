"""A doctor result (schema ``torchpace.doctor/1``) as a report ``Document``: the step-time
breakdown (per rank when distributed), throughput and MFU, the ranked findings, the sync hot spots
and memory. No torch here."""

from __future__ import annotations

from typing import Any

from torchpace.findings import DoctorFinding
from torchpace.report import fmt
from torchpace.report.document import (
    Block,
    Cell,
    Chart,
    Document,
    Facts,
    Link,
    Paragraph,
    Section,
    Segment,
    StackedBars,
    table,
)
from torchpace.report.references import references, rule_anchor, technique_anchor
from torchpace.runtime.phases import PHASES


def _steps_line(result: dict[str, Any]) -> str:
    steps = result["steps"]
    excluded = ", ".join(f"{n} {why}" for why, n in steps["excluded"].items()) or "none"
    children = result.get("run", {}).get("child_processes") or []
    started = (
        f" The script also started {len(children)} other process"
        f"{'es' if len(children) > 1 else ''} ({', '.join(sorted({c['target'] for c in children}))}"
        "), which the doctor does not measure."
        if children
        else ""
    )
    ended = [str(c["pid"]) for c in children if c.get("stopped_by_doctor")]
    if ended:
        started += (
            f" {len(ended)} of them still ran when the doctor stopped the script, and the doctor "
            f"ended them (pid{'s' if len(ended) > 1 else ''} {', '.join(ended)})."
        )
    return (
        f"{steps['kept']} of {steps['measured']} measured steps kept (excluded: {excluded}); "
        f"{steps['warmup']} warm-up steps and {steps['probe']} probe step were run first and not "
        f"timed. Outcome: {result['outcome']}.{started}"
    )


def _how(result: dict[str, Any], clock: str) -> str:
    n = result["steps"]["kept"]
    marker = result.get("run", {}).get("steps_marked_by") or "optimizer.step()"
    why = (
        " (the script builds no optimizer: its hand-written update falls at a step's start)"
        if marker == "backward()"
        else ""
    )
    return (
        f"Median over {n} kept steps of each phase's time ({clock}); a step runs from one "
        f"{marker} to the next{why}; warm-up, probe, compile and evaluation steps excluded."
    )


def _breakdown_chart(result: dict[str, Any]) -> Chart:
    ranks = result.get("ranks") or []
    rows: list[tuple[str, dict[str, float]]]
    if len(ranks) > 1:
        rows = [(f"rank {r['rank']}", r["phase_seconds"]) for r in ranks if r["phase_seconds"]]
        clock = "host clock, each rank's own steps"
    else:
        rows = [("host clock", {k: v["seconds"]["median"] for k, v in result["breakdown"].items()})]
        if "device_breakdown" in result:
            dev = result["device_breakdown"]
            rows.append(("GPU events", {k: v["seconds"]["median"] for k, v in dev.items()}))
        clock = "host clock" + (" and CUDA events" if len(rows) > 1 else "")
    shown = [p for p in PHASES if any(r.get(p, 0.0) * 1e3 >= 0.05 for _, r in rows)]
    bars = tuple(label for label, _ in rows)
    segments = tuple(Segment(p, tuple(r.get(p, 0.0) * 1e3 for _, r in rows)) for p in shown)
    data_rows: list[list[Cell]] = []
    for p in shown:
        cells: list[Cell] = [p]
        for _, r in rows:
            total = sum(r.values()) or 1.0
            cells += [fmt.ms(r.get(p, 0.0), 2), fmt.pct(r.get(p, 0.0) / total)]
        data_rows.append(cells)
    columns = ["phase"]
    for label in bars:
        columns += [f"{label} ms", "share"]
    biggest = max(shown, key=lambda p: sum(r.get(p, 0.0) for _, r in rows)) if shown else "none"
    alt = (
        f"Stacked bar of the median step time split by phase, {len(bars)} bar(s) "
        f"({', '.join(bars)}); the largest phase is {biggest}."
    )
    return Chart(
        id="doctor-breakdown",
        title="Where a training step's time goes",
        plot=StackedBars(bars, segments, unit="ms per step"),
        alt=alt,
        how=_how(result, clock),
        data=table(columns, data_rows, right=range(1, len(columns))),
    )


def _ranks_table(dist: dict[str, Any]) -> Block:
    rows = [
        [
            str(r["rank"]),
            fmt.ms(r["step_median_s"]),
            fmt.ms(r["wait_s"]),
            fmt.ms(r["work_s"]),
            fmt.pct(r["data_share"]),
        ]
        for r in dist["per_rank"]
    ]
    return table(
        ["rank", "step ms", "waiting in backward ms", "own work ms", "data wait"],
        rows,
        right=range(5),
        title=f"Ranks ({len(dist['reported'])} of {dist['world_size']} reported)",
        caption="Waiting: the rank's backward time above the fastest rank's (time spent in the "
        "gradient all-reduce for slower ranks); own work: the rest of its step.",
    )


def _step_section(result: dict[str, Any]) -> Section:
    blocks: list[Block] = [Paragraph(_steps_line(result))]
    noise = result.get("noise") or {}
    if noise.get("noisy"):
        spread = noise.get("step_rel_iqr")
        blocks.append(
            Paragraph(
                f"{noise['reason']}. The step times spread "
                + (f"{spread:.0%} (IQR/median)" if spread is not None else "unknown")
                + "; estimated gains below that spread are withheld (not ranked). Measure "
                "again on a quiet machine.",
                tone="note",
            )
        )
    if result.get("note"):
        blocks.append(Paragraph(result["note"], tone="note"))
    if "breakdown" in result:
        blocks.append(_breakdown_chart(result))
    dist = result.get("distributed")
    if dist and dist.get("per_rank"):
        blocks.append(_ranks_table(dist))
        if dist.get("note"):
            blocks.append(Paragraph(dist["note"], tone="note"))
    return Section("step-time", "Step time", tuple(blocks))


def _quartiles(s: dict[str, Any], scale: float, unit: str, digits: int = 1) -> str:
    return (
        f"{s['median'] * scale:.{digits}f} {unit} (IQR {s['q1'] * scale:.{digits}f}–"
        f"{s['q3'] * scale:.{digits}f}, {s['n']} steps)"
    )


def _throughput_section(result: dict[str, Any]) -> Section | None:
    if "step_seconds" not in result:
        return None
    items: list[tuple[str, Cell]] = [("step time", _quartiles(result["step_seconds"], 1e3, "ms"))]
    if result.get("samples_per_s"):
        items.append(("throughput", _quartiles(result["samples_per_s"], 1, "samples/s")))
    if result.get("tokens_per_s"):
        items.append(("tokens", _quartiles(result["tokens_per_s"], 1, "tokens/s")))
    dist = result.get("distributed") or {}
    if dist.get("samples_per_s_total"):
        items.append(("all ranks", f"{dist['samples_per_s_total']:.1f} samples/s"))
    padding = result.get("padding")
    if padding:
        items.append(
            (
                "padding",
                f"{padding['share']:.0%} of the tokens in the training batches "
                f"({padding['padded_per_step']:,.0f} of {padding['tokens_per_step']:,.0f} "
                "per step)",
            )
        )
    util = result["utilisation"]
    if util.get("flops_per_step"):
        items.append(("work", f"{util['flops_per_step'] / 1e9:.2f} GFLOP per step"))
    if util.get("achieved_tflops") is not None:
        items.append(("achieved", f"{util['achieved_tflops']:.3f} TFLOP/s"))
    if util.get("mfu") is not None:
        items.append(
            (
                "MFU",
                f"{util['mfu']:.1%} of {util['peak_tflops']:.2f} TFLOP/s ({util['math_mode']} "
                "peak)",
            )
        )
    else:
        items.append(("MFU", "not known: no FLOP count or no peak for this device"))
    blocks: list[Block] = [Facts(tuple(items))]
    how = (
        "Medians and interquartile ranges over the kept steps. FLOPs per step are counted once, "
        "on the untimed probe step, by torch.utils.flop_counter; MFU is the achieved rate over "
        "the device's peak for the math mode in use (measured by a matmul on a CPU, the vendor's "
        "figure on a known GPU)."
    )
    blocks.append(Paragraph(how, tone="muted"))
    if util.get("note"):
        blocks.append(Paragraph(util["note"], tone="note"))
    return Section("throughput", "Throughput and MFU", tuple(blocks))


def _docs(f: DoctorFinding) -> tuple[Link, ...]:
    links = [Link(f.code, rule_anchor(f.code))] if f.code else []
    return (*links, Link(f.technique, technique_anchor(f.technique)))


def _tune_command(target: dict[str, Any]) -> str:
    """The command that tries the findings' techniques on this run: the script itself, with its
    arguments, for a script; ``torchpace tune`` on a recipe otherwise."""
    if target.get("kind") != "script" or not target.get("script"):
        return "torchpace tune"
    import shlex

    args = [str(a) for a in target.get("args") or []]
    return shlex.join(
        ["torchpace", "tune", str(target["script"]), *(["--", *args] if args else [])]
    )


def _change(f: DoctorFinding) -> str:
    text = f"{f.message} → {f.fix}"
    if f.status != "measured":
        text += f" ({f.status})"
    end = "" if text.endswith(".") else "."
    if f.applies.verb:
        text += f"{end} Applied by {f.applies.verb}."
        end = ""
    if f.applies.tune:
        text += f"{end} Tune verifies it."
    if f.runtime_check:
        text += f" Checked on this run: {f.runtime_check}."
    if "withheld_because" in f.measured:
        text += f" Gain withheld: {f.measured['withheld_because']}."
    v = f.verified
    if v:
        promised = v.estimated_speedup
        got = v.speedup
        estimated = f" (estimated {promised:.2f}×)" if promised is not None else ""
        if v.noise:  # figures shown, nothing judged: the machine's speed moved
            second = v.speedup_second_baseline
            against = f", {second:.2f}× against the second baseline" if second else ""
            shown = "?" if got is None else f"{got:.2f}"
            text += f" Not judged: {shown}× alone{against}{estimated}, but {'; '.join(v.noise)}."
        else:
            text += (
                f" Verified: {got:.2f}× alone" if got is not None else f" Verify: {v.verdict}"
            ) + f"{estimated}."
    if f.demoted:  # why, as --verify found it: slower, not worth it, or not applicable
        text += f" Demoted: {f.demoted.rstrip('.')}."
    return text


UNSEEN = "not seen running"


def _unseen_line(unseen: list[DoctorFinding], cwd: str | None) -> Paragraph:
    """The lint findings in code the measured steps never ran, in one line: in one trainer's
    report they were eight of its top ten rows, all in its validation function."""
    counts: dict[str, int] = {}
    for f in unseen:
        key = f.code or f.technique
        counts[key] = counts.get(key, 0) + 1
    listed = ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in counts.items())
    files = sorted({fmt.where(f.path, None, cwd) for f in unseen if f.path})
    return Paragraph(
        f"{len(unseen)} lint finding{'s' if len(unseen) > 1 else ''} in code the measured "
        f"steps did not run (evaluation, set-up, other branches): {listed}"
        + (f" in {', '.join(files)}" if files else "")
        + "; `torchpace lint` lists them, and the JSON result has each.",
        tone="muted",
    )


def _findings(result: dict[str, Any]) -> list[DoctorFinding]:
    """The result's findings, typed (a live result's, or a result file's objects)."""
    return [DoctorFinding.of(f) for f in result["findings"]]


def _findings_section(
    result: dict[str, Any], every: list[DoctorFinding], top: int | None
) -> Section:
    unseen = [f for f in every if f.status == UNSEEN]
    findings = [f for f in every if f.status != UNSEEN][:top]
    cwd = result["target"].get("cwd")
    blocks: list[Block] = []
    if findings:
        rows: list[list[Cell]] = [
            [
                str(i),
                fmt.DASH if f.gain is None else fmt.pct(f.gain),
                fmt.where(f.path, f.line, cwd),
                fmt.measured(f.measured),
                _change(f),
                _docs(f),
            ]
            for i, f in enumerate(findings, 1)
        ]
        blocks.append(
            table(
                ["#", "gain", "where", "measured", "what to change", "docs"],
                rows,
                right=(0, 1),
                wide=4,
                caption="Gain: the estimated share of the step time the change recovers, from "
                "the measured phase times; findings without a measured cost (lint only, or not "
                "seen running) come last.",
            )
        )
        if any(f.applies.tune for f in findings):
            blocks.append(
                Paragraph(
                    "Try the findings that tune verifies on this run, each measured and "
                    f"checked for convergence: `{_tune_command(result['target'])}`.",
                )
            )
    elif not unseen:
        blocks.append(Paragraph("No findings."))
    if unseen:
        blocks.append(_unseen_line(unseen, cwd))
    rest = len(every) - len(findings) - len(unseen)
    if rest > 0:
        blocks.append(
            Paragraph(f"{rest} more findings in the JSON result and the HTML report.", "muted")
        )
    skipped = result.get("skipped_patterns") or {}
    if skipped:
        listed = "; ".join(f"{k}: {why}" for k, why in skipped.items())
        blocks.append(Paragraph(f"Not checked on this run: {listed}.", tone="muted"))
    for err in result.get("lint_errors") or []:
        blocks.append(Paragraph(f"lint could not read a file: {err}", tone="note"))
    for err in result.get("instrument_errors") or []:
        blocks.append(
            Paragraph(f"a doctor instrument failed (the script went on): {err}", tone="note")
        )
    return Section("findings", "Findings, ranked by estimated gain", tuple(blocks))


def _syncs_section(result: dict[str, Any]) -> Section | None:
    rows = result.get("syncs") or []
    if not rows:
        return None
    cwd = result["target"].get("cwd")
    body = [
        [
            fmt.where(r["path"], r["line"], cwd),
            r["call"],
            f"{r['per_step']:g}",
            f"{r['steps_with']} of {result['steps']['kept']}",
            "not measured on CPU"
            if r["blocked_s_per_step"] is None
            else fmt.ms(r["blocked_s_per_step"], 2),
        ]
        for r in rows
    ]
    return Section(
        "syncs",
        "Sync hot spots",
        (
            table(
                ["where", "call", "per step", "steps with it", "blocked ms/step"],
                body,
                right=(2, 3, 4),
                caption="Host reads of tensor values (syncs on a GPU), counted at the line that "
                "made them over the kept steps; the blocked time is measured on CUDA only, where "
                "the host waits for queued work.",
            ),
        ),
    )


def _spots_section(result: dict[str, Any]) -> Section | None:
    hot = result.get("hot_spots") or {}
    spots = hot.get("spots") or []
    if not spots:
        return None
    cwd = result["target"].get("cwd")
    body = [
        [
            s["function"],
            fmt.where(s["path"], s["line"], cwd),
            "data wait" if s["phase"] == "data" else "outside the model",
            fmt.pct(s["share"]),
        ]
        for s in spots
    ]
    return Section(
        "hot-spots",
        "Where the rest of the step goes",
        (
            table(
                ["function", "line most often caught", "while", "share of the step"],
                body,
                right=(3,),
                caption=f"Stack samples of the main thread every {hot['interval_s'] * 1e3:g} ms "
                f"({hot['samples']} in the kept steps), each charged to the innermost line of "
                "this script's own code while the step was outside the model, optimizer and "
                "loader calls, or waiting for the loader.",
            ),
        ),
    )


def _memory_section(result: dict[str, Any]) -> Section:
    mem = result["memory"]
    items: list[tuple[str, Cell]] = [
        ("peak", f"{fmt.mib(mem.get('peak_bytes'))} ({mem.get('kind', '?')})"),
        ("measured", f"since the {mem.get('since', 'start')}"),
    ]
    if mem.get("alloc_retries"):
        items.append(("allocator retries", str(mem["alloc_retries"])))
    for r in result.get("ranks") or []:
        if len(result.get("ranks") or []) > 1:
            items.append((f"rank {r['rank']} peak", fmt.mib(r.get("peak_memory_bytes"))))
    how = (
        "Resident set size of the process on a CPU; torch.cuda.max_memory_allocated on a GPU, "
        "reset at the end of warm-up."
    )
    return Section("memory", "Memory", (Facts(tuple(items)), Paragraph(how, tone="muted")))


def header(result: dict[str, Any]) -> Facts:
    target = result["target"]
    script = target.get("script") or target.get("kind", "?")
    args = target.get("args") or []
    items: list[tuple[str, Cell]] = [
        ("script", fmt.command_line([script, *args]) if args else script),
        ("date", result.get("created", fmt.DASH)),
        ("command", fmt.command_line(result.get("command"))),
        ("working directory", target.get("cwd") or fmt.DASH),
        ("environment", fmt.environment(result["env"])),
    ]
    return Facts(tuple(items))


def build(result: dict[str, Any], *, top: int | None = None) -> Document:
    """The document of a doctor result; ``top`` keeps the first ``top`` findings (the terminal
    after a run), None keeps all."""
    every = _findings(result)
    sections = [
        _step_section(result),
        _throughput_section(result),
        _findings_section(result, every, top),
        _syncs_section(result),
        _spots_section(result),
        _memory_section(result),
    ]
    findings = every[:top]
    refs = references(
        techniques=[f.technique for f in findings],
        rules=[f.code for f in findings if f.code],
    )
    if refs is not None:
        sections.append(refs)
    return Document(
        kind="doctor",
        title="torchpace doctor",
        header=header(result),
        sections=tuple(s for s in sections if s is not None),
    )
