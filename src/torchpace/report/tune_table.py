"""The tune table: one row per trial, what it bought and whether it was kept.

``Row`` is plain data that the search fills; ``render`` turns rows into a rich ``Table`` and
``to_text`` renders any table to a fixed-width string without colour (tests, logs, pipes). The
verdict helpers keep the four verdict forms worded alike across rows. No torch here.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

KEPT = "kept"
BASELINE = "baseline"


def rejected(reason: str) -> str:
    """The verdict of a trial the convergence guard (or a crash) rejected."""
    return f"rejected: {reason}"


def not_applicable(reason: str) -> str:
    """The verdict of a technique that does not apply here (device, model, recipe)."""
    return f"not applicable: {reason}"


def confirm_trial(side: str, i: int) -> str:
    """The name of the ``i``-th (from 1) paired confirmation trial of ``side``, "baseline" or
    "plan": the report finds the plan's trajectory by it."""
    return f"confirm {side} {i}"


def trained_lower(reason: str, accepted: bool) -> str:
    """The verdict of a trial whose loss ended below the baseline's band: not a failure, a
    choice (issue 29: compile ended at 1.876 against [2.02, 3.23] and was plainly "rejected")."""
    if accepted:
        return f"kept alone (trained lower, accepted by --accept-lower: {reason})"
    return f"trained lower: {reason}; not kept (--accept-lower keeps it)"


def not_worth_it(speedup: float) -> str:
    """The verdict of a technique that converged but did not pay off."""
    return f"not worth it ({speedup:.2f}×)"


@dataclass(frozen=True)
class Row:
    """One line of the table. ``speedup`` is the baseline's median step time over this trial's
    (so > 1 is faster), ``speedup_lo``/``speedup_hi`` its spread from the quartiles; ``cumulative``
    is the speed-up of the greedy combination up to this row (None outside it); ``loss_delta`` is
    ``Verdict.loss_delta`` (relative to the band's centre); None shows as a dash."""

    name: str
    techniques: tuple[str, ...] = ()
    speedup: float | None = None
    speedup_lo: float | None = None
    speedup_hi: float | None = None
    cumulative: float | None = None
    peak_bytes: int | None = None
    loss_delta: float | None = None
    verdict: str = ""


_DASH = "—"
_INDENT = "  "
_ID_WIDTH = 24  # the longest catalogue id, "activation-checkpointing"


def speedup_text(row: Row) -> str:
    if row.speedup is None:
        return _DASH
    if row.speedup_lo is None or row.speedup_hi is None:
        return f"{row.speedup:.2f}×"
    return f"{row.speedup:.2f}× [{row.speedup_lo:.2f}–{row.speedup_hi:.2f}]"


def _trial(row: Row) -> Text:
    """The name, then the ids it tries, indented, when they say more than the name."""
    ids = [] if row.techniques == (row.name,) else list(row.techniques)
    return Text("\n".join([row.name, *(_INDENT + t for t in ids)]))


def delta_text(d: float | None) -> str:
    if d is None:
        return _DASH
    if abs(d) < 0.0005:  # rounds to 0.0%: no sign, so "-0.0%" never shows
        return "0.0%"
    return f"{d:+.1%}"


def render(rows: Sequence[Row], *, title: str, caption: str | None = None) -> Table:
    """The table, sized for 100 columns: numbers never wrap, names and verdicts fold."""
    table = Table(title=title, caption=Text(caption) if caption else None, caption_justify="left")
    # The numbers never wrap; the trial (name, then its ids, one a line, so an id never splits)
    # takes its own width up to the longest id; the verdict takes what is left of 100 columns and
    # wraps. Headers are Text so that "[q1–q3]" is not read as rich markup.
    trials = [_trial(row) for row in rows]
    widest = max((cell_len(line) for t in trials for line in t.plain.splitlines()), default=0)
    cap = _ID_WIDTH + len(_INDENT)
    # A fixed width: rich would shrink this column with the verdict to fit, and split the ids.
    table.add_column("trial", width=max(min(widest, cap), len("trial")), overflow="fold")
    table.add_column(Text("alone [q1–q3]"), justify="right", no_wrap=True)
    table.add_column("total", justify="right", no_wrap=True)
    table.add_column("peak MiB", justify="right", no_wrap=True)
    table.add_column("loss Δ", justify="right", no_wrap=True)
    table.add_column("verdict", overflow="fold")
    for row, trial in zip(rows, trials, strict=True):
        table.add_row(
            trial,
            speedup_text(row),
            _DASH if row.cumulative is None else f"{row.cumulative:.2f}×",
            _DASH if row.peak_bytes is None else f"{row.peak_bytes / 2**20:,.0f}",
            delta_text(row.loss_delta),
            Text(row.verdict),  # Text, not markup: a "[" in a reason is shown as written
        )
    return table


def to_text(renderable: RenderableType, width: int = 100) -> str:
    """Render to plain text ``width`` columns wide: no colour, no terminal codes."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    console.print(renderable)
    return buf.getvalue()
