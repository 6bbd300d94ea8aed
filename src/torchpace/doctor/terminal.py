"""The doctor's terminal summary (rich): the step-time breakdown as a bar, throughput and MFU,
the top findings with file:line, and the sync hot spots."""

from __future__ import annotations

import os
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from torchpace.doctor.phases import PHASES

_COLOURS = {
    "data": "red",
    "copy": "magenta",
    "forward": "green",
    "backward": "blue",
    "optimizer": "cyan",
    "sync": "yellow",
    "eval": "bright_black",
    "other": "white",
}
_BAR = 60  # characters for the whole step


def _where(path: str | None, line: int | None) -> str:
    if path is None:
        return "-"
    try:
        shown = os.path.relpath(path)
    except ValueError:
        shown = path
    if shown.startswith(".." + os.sep + ".."):
        shown = path
    return f"{shown}:{line}"


def _bar(breakdown: dict[str, Any]) -> Text:
    bar = Text()
    for name in PHASES:
        width = round(breakdown[name]["share"] * _BAR)
        if width:
            bar.append("█" * width, style=_COLOURS[name])
    return bar


def _breakdown_table(breakdown: dict[str, Any], title: str) -> Table:
    table = Table(title=title, title_justify="left", box=None, pad_edge=False)
    table.add_column("phase")
    table.add_column("share", justify="right")
    table.add_column("median ms", justify="right")
    table.add_column("IQR ms", justify="right")
    for name in PHASES:
        row = breakdown[name]
        sec = row["seconds"]
        if row["share"] < 0.005 and sec["median"] < 5e-5:
            continue
        table.add_row(
            Text(name, style=_COLOURS[name]),
            f"{row['share']:.0%}",
            f"{sec['median'] * 1e3:.1f}",
            f"{sec['q1'] * 1e3:.1f}-{sec['q3'] * 1e3:.1f}",
        )
    return table


def _headline(result: dict[str, Any]) -> Text:
    steps = result["steps"]
    excluded = ", ".join(f"{n} {why}" for why, n in steps["excluded"].items()) or "none"
    text = Text()
    target = result["target"]
    text.append("torchpace doctor", style="bold")
    text.append(f": {target.get('script') or target.get('kind')}\n")
    text.append(
        f"{steps['kept']} steps measured ({steps['warmup']} warm-up and "
        f"{steps['probe']} probe step not timed; excluded: {excluded}); {result['outcome']}\n"
    )
    if "step_seconds" not in result:
        return text
    step = result["step_seconds"]
    text.append(
        f"step {step['median'] * 1e3:.1f} ms median (IQR {step['q1'] * 1e3:.1f}-"
        f"{step['q3'] * 1e3:.1f})"
    )
    sps = result.get("samples_per_s")
    if sps:
        text.append(f", {sps['median']:.1f} samples/s")
    util = result["utilisation"]
    if util.get("achieved_tflops") is not None:
        text.append(
            f", {util['flops_per_step'] / 1e9:.2f} GFLOP/step, "
            f"{util['achieved_tflops']:.3f} TFLOP/s"
        )
        if util.get("mfu") is not None:
            text.append(
                f", MFU {util['mfu']:.1%} of {util['peak_tflops']:.2f} TFLOP/s "
                f"({util['math_mode']} peak)"
            )
    mem = result["memory"]
    text.append(f"\npeak memory {mem['peak_bytes'] / 2**20:.0f} MiB ({mem['kind']})")
    if mem.get("alloc_retries"):
        text.append(f", {mem['alloc_retries']} allocator retries")
    return text


def _findings_table(findings: list[dict[str, Any]], top: int) -> Table:
    table = Table(title="Findings, ranked by estimated gain", title_justify="left", expand=False)
    table.add_column("#", justify="right")
    table.add_column("gain", justify="right")
    table.add_column("where", overflow="fold", max_width=28)
    table.add_column("what to change", overflow="fold")
    for i, f in enumerate(findings[:top], 1):
        gain = "-" if f["gain"] is None else f"{f['gain']:.0%}"
        label = f["code"] or f["pattern"]
        what = Text()
        what.append(f"[{label}, {f['technique']}] ", style="bold")
        what.append(f["message"])
        if f["status"] != "measured":
            what.append(f" ({f['status']})", style="dim")
        what.append(f"\n→ {f['fix']}")
        verb = f["applies"]["verb"]
        if verb or f["applies"]["tune"]:
            how = [v for v in (verb, "torchpace tune" if f["applies"]["tune"] else None) if v]
            what.append(f" (applied by {' / '.join(how)})", style="dim")
        table.add_row(str(i), gain, _where(f["path"], f["line"]), what)
    return table


def _sync_table(rows: list[dict[str, Any]], cuda: bool) -> Table:
    table = Table(
        title="Host reads (syncs on a GPU) per training step",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    table.add_column("where")
    table.add_column("call")
    table.add_column("per step", justify="right")
    table.add_column("blocked ms/step" if cuda else "blocked", justify="right")
    for row in rows[:10]:
        blocked = row["blocked_s_per_step"]
        table.add_row(
            _where(row["path"], row["line"]),
            row["call"],
            f"{row['per_step']:g}",
            "not measured on CPU" if blocked is None else f"{blocked * 1e3:.2f}",
        )
    return table


def _ranks_table(dist: dict[str, Any]) -> Table:
    table = Table(
        title=f"Ranks ({len(dist['reported'])} of {dist['world_size']} reported)",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    table.add_column("rank", justify="right")
    table.add_column("step ms", justify="right")
    table.add_column("waiting in backward ms", justify="right")
    table.add_column("own work ms", justify="right")
    table.add_column("data wait", justify="right")
    for row in dist["per_rank"]:
        table.add_row(
            str(row["rank"]),
            f"{row['step_median_s'] * 1e3:.1f}",
            f"{row['wait_s'] * 1e3:.1f}",
            f"{row['work_s'] * 1e3:.1f}",
            f"{row['data_share']:.0%}",
        )
    return table


def render(result: dict[str, Any], *, top: int = 10) -> RenderableType:
    parts: list[RenderableType] = [_headline(result)]
    if result.get("note"):
        parts.append(Text(f"note: {result['note']}", style="yellow"))
    if "breakdown" in result:
        parts.append(_bar(result["breakdown"]))
        parts.append(_breakdown_table(result["breakdown"], "Step time, host clock"))
        if "device_breakdown" in result:
            parts.append(_breakdown_table(result["device_breakdown"], "Step time, GPU events"))
    dist = result.get("distributed")
    if dist and dist.get("per_rank"):
        parts.append(_ranks_table(dist))
        if dist.get("note"):
            parts.append(Text(f"note: {dist['note']}", style="yellow"))
    if result.get("syncs"):
        parts.append(_sync_table(result["syncs"], "device_breakdown" in result))
    if result["findings"]:
        parts.append(_findings_table(result["findings"], top))
        rest = len(result["findings"]) - top
        if rest > 0:
            parts.append(Text(f"{rest} more findings in the JSON result (--json)", style="dim"))
    else:
        parts.append(Text("no findings"))
    return Group(*parts)


def print_report(result: dict[str, Any], console: Any = None) -> None:
    if console is None:
        from rich.console import Console

        console = Console()
        if not console.is_terminal:
            console = Console(width=100)
    console.print(render(result))
