"""The terminal view of a ``torchpace compare`` result (plain text, or GitHub annotations)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from rich.table import Table
from rich.text import Text

from torchpace._terminal import printable
from torchpace.report.tune_table import to_text
from torchpace.script.compare import Comparison
from torchpace.tune.whole_run import Run

_DASH = "–"


def _med(runs: Sequence[Run], get: Callable[[Run], float | None]) -> float | None:
    values = [v for v in (get(r) for r in runs) if v is not None]
    return statistics.median(values) if values else None


def _s(value: float | None) -> str:
    if value is None:
        return _DASH
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.1f} s"


def _loss(value: float | None) -> str:
    return _DASH if value is None else f"{value:.4g}"


def _count(value: float | None) -> str:
    return _DASH if value is None else f"{value:,.0f}"


def sides_table(c: Comparison) -> Table:
    t = Table(title="Whole runs (medians over the rounds)", title_justify="left")
    t.add_column("")
    t.add_column(printable(c.base_name), justify="right")
    t.add_column(printable(c.cand_name), justify="right")
    target = c.target_loss
    rows: list[tuple[str, Callable[[Run], float | None], Callable[[float | None], str]]] = [
        ("wall time, whole run", lambda r: r.wall_s, _s),
        ("inside training steps", lambda r: r.in_steps_s, _s),
        ("outside them (start-up, eval, …)", lambda r: r.outside_s, _s),
        ("time per step", lambda r: r.median_step_s, _s),
        ("steps", lambda r: float(r.steps), _count),
        ("samples trained", lambda r: float(r.samples_total), _count),
        ("final loss", lambda r: r.final_loss, _loss),
    ]
    if target is not None:
        rows.append((f"time to loss {target:.4g}", lambda r: r.time_to_loss(target), _s))
    for label, get, fmt in rows:
        t.add_row(label, fmt(_med(c.base, get)), fmt(_med(c.cand, get)))
    return t


def ratios_table(c: Comparison) -> Table:
    t = Table(
        title=f"{printable(c.cand_name)} against {printable(c.base_name)}: speed-up per round "
        "(above 1: faster)",
        title_justify="left",
    )
    for col in ("", "speed-up", "range", "verdict"):
        t.add_column(col, justify="right" if col in ("speed-up", "range") else "left")
    for r in c.ratios.values():
        verdict = Text(f"{r.verdict}: {r.why}")  # Text, not markup
        t.add_row(r.name, f"{r.median:.2f}×", f"{r.lo:.2f}–{r.hi:.2f}×", verdict)
    return t


def lines(c: Comparison) -> list[str]:
    out = [f"work: {w}" for w in c.work]
    out.append(f"loss: {c.loss.why}")
    out += [f"load: {x}" for x in c.loaded]
    for r in c.base + c.cand:
        if r.not_applied and r.side == c.cand_name and r.round == 0:
            out += [f"not applied: {t}: {why}" for t, why in r.not_applied.items()]
    if c.regressed:
        out.append("REGRESSED: " + "; ".join(c.regressed))
    elif c.noisy:
        out.append("noisy: " + "; ".join(c.noisy) + " (not a verdict; run again on a quiet "
                   "machine or with more --rounds)")  # fmt: skip
    else:
        out.append(f"no regression beyond {c.max_slowdown:.0%} and the noise")
    return out


def render(c: Comparison, *, github: bool = False) -> str:
    text = to_text(sides_table(c)) + to_text(ratios_table(c)) + "\n".join(map(printable, lines(c)))
    if github:
        # GitHub Actions workflow commands: an annotation on the run's summary page.
        notes = [f"::error title=torchpace compare::{printable(x)}" for x in c.regressed]
        notes += [f"::warning title=torchpace compare (noisy)::{printable(x)}" for x in c.noisy]
        text += "\n" + "\n".join(notes) if notes else ""
    return text
