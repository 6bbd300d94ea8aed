"""The report as plain data: sections of paragraphs, facts, tables, charts and code.

A doctor or tune result is turned into one ``Document`` (``doctor_doc``, ``tune_doc``); the
terminal (``terminal``) and the HTML page (``html``) each render that same document, so the two
show the same content. Every string here is text, never markup: the renderers escape it.
No torch, no matplotlib, no rich here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Align = Literal["left", "right"]


@dataclass(frozen=True)
class Link:
    """A cell or fact that points at another part of the page (``#anchor``)."""

    text: str
    anchor: str


Cell = str | Link | tuple[Link, ...]


@dataclass(frozen=True)
class Table:
    """Rows of cells under ``columns``; ``align`` is per column (left when not given)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    align: tuple[Align, ...] = ()
    title: str = ""
    caption: str = ""
    wide: int | None = None  # the column of long text that takes the width the others leave

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"a row of {len(row)} cells under {len(self.columns)} columns")

    def alignment(self, i: int) -> Align:
        return self.align[i] if i < len(self.align) else "left"


@dataclass(frozen=True)
class Segment:
    """One series of a stacked bar: its name and a value per bar."""

    name: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class StackedBars:
    """Horizontal bars (one per ``bars`` label), each split into ``segments``."""

    bars: tuple[str, ...]
    segments: tuple[Segment, ...]
    unit: str


@dataclass(frozen=True)
class Bar:
    """One bar with an optional spread: ``lo``/``hi`` draw as a whisker."""

    label: str
    value: float
    lo: float | None = None
    hi: float | None = None
    series: str = ""
    kept: bool = True  # drawn lighter when False (a trial the tune did not keep)


@dataclass(frozen=True)
class RangeBars:
    """Horizontal bars, one per ``Bar``, in order; ``reference`` draws a vertical line (1× for
    speed-ups)."""

    bars: tuple[Bar, ...]
    unit: str
    reference: float | None = None


@dataclass(frozen=True)
class Curve:
    """One line: a loss per step (or per second: ``steps`` holds the x values, samples seen or
    seconds). ``role`` picks the style (baseline, plan, rejected)."""

    label: str
    steps: tuple[float, ...]
    values: tuple[float, ...]
    role: Literal["baseline", "plan", "rejected"]


@dataclass(frozen=True)
class BandArea:
    """A shaded band from ``lo`` to ``hi`` over steps ``first``..``last``."""

    lo: float
    hi: float
    first: float
    last: float
    label: str


@dataclass(frozen=True)
class Curves:
    curves: tuple[Curve, ...]
    band: BandArea | None
    x_label: str
    y_label: str


Plot = StackedBars | RangeBars | Curves


@dataclass(frozen=True)
class Chart:
    """A figure: ``plot`` is what is drawn, ``alt`` says in words what it shows (the SVG's text
    alternative), ``how`` says how its figures were measured, and ``data`` holds the numbers it
    plots (shown under it, and in the terminal instead of it)."""

    id: str
    title: str
    plot: Plot
    alt: str
    how: str
    data: Table


@dataclass(frozen=True)
class Paragraph:
    text: str
    tone: Literal["plain", "note", "muted"] = "plain"


@dataclass(frozen=True)
class Facts:
    """Label: value pairs, in order."""

    items: tuple[tuple[str, Cell], ...]


@dataclass(frozen=True)
class Code:
    """Text to copy as it is (the plan as JSON, a code example)."""

    text: str
    language: str = ""


@dataclass(frozen=True)
class Entry:
    """A reference entry: a titled block with an anchor, for links to land on."""

    anchor: str
    title: str
    blocks: tuple[Block, ...]


Block = Paragraph | Facts | Table | Chart | Code | Entry


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Document:
    """One result's report: ``title`` and the ``header`` facts (target, date, command line,
    environment) above the sections."""

    kind: Literal["doctor", "tune", "compare"]
    title: str
    header: Facts
    sections: tuple[Section, ...] = field(default_factory=tuple)


def table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    *,
    right: Sequence[int] = (),
    title: str = "",
    caption: str = "",
    wide: int | None = None,
) -> Table:
    """A ``Table`` from lists, with the columns at indices ``right`` aligned right (numbers)."""
    align: tuple[Align, ...] = tuple("right" if i in right else "left" for i in range(len(columns)))
    return Table(
        tuple(columns),
        tuple(tuple(r) for r in rows),
        align,
        title=title,
        caption=caption,
        wide=wide,
    )
