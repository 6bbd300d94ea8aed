"""The report in the terminal: the same ``Document`` as the HTML page, as rich renderables.

Charts become a text sketch (bars of block characters) above the figures they plot; links show
as their text; a reference entry shows its title and facts (its full text is on the page, and in
``torchpace rule CODE`` and docs/techniques.md). It fits 100 columns, and with no terminal (a
pipe, a file, a test) it is plain text with no colour codes.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.rule import Rule
from rich.table import Table as RichTable
from rich.text import Text

from torchpace._terminal import printable_tree
from torchpace.report.document import (
    Block,
    Cell,
    Chart,
    Code,
    Document,
    Entry,
    Facts,
    Link,
    Paragraph,
    RangeBars,
    StackedBars,
    Table,
)

WIDTH = 100  # columns: the report fits a 100-column terminal and is tested at that width
_BAR = 56  # characters for the longest bar of a sketch
# rich colour names for the doctor's phases (charts.PHASE_COLOURS on the page).
_PHASE_STYLE = {
    "data": "red",
    "copy": "magenta",
    "forward": "green",
    "backward": "blue",
    "optimizer": "cyan",
    "sync": "yellow",
    "eval": "bright_black",
    "other": "white",
}
# Columns beside a wide one stay within 24 characters (a file:line, a technique id: the longest
# id, "activation-checkpointing", is 24); the wide one (a message, a verdict) takes at least 28
# and the rest of the 100.
_NARROW = 24
_WIDE = 28
_WIDE_MIN = 16  # the wide column may give up width down to this to keep ids whole
_MIN_FOLD = 10  # a folding column gives up width for the wide one down to this
_TONE = {"plain": "", "note": "yellow", "muted": "dim"}


def _cell(c: Cell) -> Text:
    if isinstance(c, Link):
        return Text(c.text)
    if isinstance(c, tuple):  # ids, one a line, so that none is split
        return Text("\n".join(link.text for link in c))
    return Text(c)  # Text, not markup: a "[" in a user's string is shown as written


def _facts(f: Facts) -> RichTable:
    grid = RichTable.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in f.items:
        grid.add_row(Text(label), _cell(value))
    return grid


def _widths(t: Table, cells: list[list[Text]]) -> list[int | None]:
    """Fixed column widths when ``t`` has a wide column: numbers as wide as they and their
    header are, other columns as wide as their content up to ``_NARROW``, and the wide one what
    is left of ``WIDTH``. When that is under ``_WIDE``, the other columns give up width, widest
    first: first down to their longest word (so an id or a path is not split), then the wide
    column down to ``_WIDE_MIN``, and only then down to ``_MIN_FOLD``, splitting words.
    rich alone would share the width out evenly and fold a long message into a narrow column."""
    if t.wide is None:
        return [None] * len(t.columns)
    widths: list[int] = []
    floors: list[int] = []  # each column's longest word: shrinking below it splits words
    for i, col in enumerate(t.columns):
        lines = [line for row in cells for line in row[i].plain.splitlines()]
        content = max((cell_len(line) for line in lines), default=0)
        word = max((cell_len(w) for text in [*lines, col] for w in text.split()), default=0)
        if t.alignment(i) == "right":
            widths.append(max(content, cell_len(col)))
        else:
            widths.append(min(max(content, word), _NARROW))
        floors.append(min(max(word, _MIN_FOLD), widths[-1]))
    widths[t.wide] = 0
    room = WIDTH - (3 * len(t.columns) + 1)  # a border and two padding spaces per column
    folding = [i for i in range(len(widths)) if i != t.wide and t.alignment(i) == "left"]

    def shrink(target: int, floor: list[int]) -> None:
        while room - sum(widths) < target:
            able = [i for i in folding if widths[i] > floor[i]]
            if not able:
                return
            widths[max(able, key=lambda j: widths[j])] -= 1

    shrink(_WIDE, floors)
    shrink(_WIDE_MIN, [_MIN_FOLD] * len(widths))
    widths[t.wide] = max(room - sum(widths), _WIDE_MIN)
    return list(widths)


def _table(t: Table) -> RichTable:
    out = RichTable(
        title=Text(t.title) if t.title else None,
        title_justify="left",
        caption=Text(t.caption) if t.caption else None,
        caption_justify="left",
    )
    cells = [[_cell(c) for c in row] for row in t.rows]
    for i, (col, width) in enumerate(zip(t.columns, _widths(t, cells), strict=True)):
        if t.alignment(i) == "right":  # numbers never wrap
            out.add_column(Text(col), justify="right", no_wrap=True, width=width)
        else:
            out.add_column(Text(col), overflow="fold", width=width)
    for row in cells:
        out.add_row(*row)
    return out


def _stacked(plot: StackedBars) -> RenderableType:
    totals = [sum(s.values[i] for s in plot.segments) for i in range(len(plot.bars))]
    scale = _BAR / max(max(totals, default=0.0), 1e-12)
    label_w = max(len(b) for b in plot.bars)
    lines = []
    for i, label in enumerate(plot.bars):
        line = Text(label.ljust(label_w) + " ")
        for seg in plot.segments:
            width = round(seg.values[i] * scale)
            if width:
                line.append("█" * width, style=_PHASE_STYLE.get(seg.name, ""))
        line.append(f" {totals[i]:.1f} {plot.unit}")
        lines.append(line)
    key = Text("key: ")
    for seg in plot.segments:
        key.append("█", style=_PHASE_STYLE.get(seg.name, ""))
        key.append(f" {seg.name}  ")
    return Group(*lines, key)


def _range_bars(plot: RangeBars) -> RenderableType:
    top = max((b.hi if b.hi is not None else b.value) for b in plot.bars)
    scale = (_BAR - 24) / max(top, 1e-12)
    label_w = min(max(len(b.label) for b in plot.bars), 24)
    lines = []
    for b in plot.bars:
        line = Text(b.label[:label_w].ljust(label_w) + " ")
        line.append("█" * max(round(b.value * scale), 1), style="" if b.kept else "dim")
        value = f"{b.value:,.2f}" if b.value < 100 else f"{b.value:,.0f}"
        line.append(f" {value}" + ("" if b.kept else " (not kept)"))
        lines.append(line)
    return Group(*lines)


def _chart(c: Chart) -> RenderableType:
    parts: list[RenderableType] = [Text(c.title, style="bold")]
    if isinstance(c.plot, StackedBars):
        parts.append(_stacked(c.plot))
    elif isinstance(c.plot, RangeBars):
        parts.append(_range_bars(c.plot))
    parts += [_table(c.data), Text(c.how, style="dim")]
    return Group(*parts)


def _entry(e: Entry) -> RenderableType:
    return Text(f"• {e.title}")


def _block(b: Block) -> RenderableType:
    if isinstance(b, Paragraph):
        return Text(b.text, style=_TONE[b.tone])
    if isinstance(b, Facts):
        return _facts(b)
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Chart):
        return _chart(b)
    if isinstance(b, Code):
        return Text(b.text)
    return _entry(b)


def render(doc: Document) -> RenderableType:
    doc = printable_tree(doc)  # a result file's strings never reach the terminal as commands
    parts: list[RenderableType] = [Text(doc.title, style="bold"), _facts(doc.header)]
    for section in doc.sections:
        parts.append(Rule(Text(section.title, style="bold"), align="left"))
        parts.extend(_block(b) for b in section.blocks)
        if section.id == "references":
            parts.append(
                Text(
                    "The full text of each: `torchpace rule CODE`, docs/techniques.md, or the "
                    "HTML report (`torchpace report RESULT.json`).",
                    style="dim",
                )
            )
    return Group(*parts)


def console(file: Any = None) -> Console:
    """A console for the report: the terminal's width up to 100 columns, or exactly 100 columns
    of plain text when the output is not a terminal."""
    out = Console(file=file)
    if not out.is_terminal:
        return Console(file=file, width=WIDTH, color_system=None)
    return Console(file=file, width=min(out.width, WIDTH))


def to_text(doc: Document, width: int = WIDTH) -> str:
    """The terminal view as plain text, ``width`` columns wide (tests, logs)."""
    from torchpace.report.tune_table import to_text as plain

    return plain(render(doc), width)
