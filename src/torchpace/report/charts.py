"""The report's charts: matplotlib figures saved as SVG, inlined in the page.

Text stays text in the SVG (``svg.fonttype: none``), so it is searchable, prints sharply and is
escaped by matplotlib's SVG writer; math-text parsing is off, so a ``$`` in a user's name is shown
as written. Each SVG gets a ``<title>`` and ``<desc>`` (the chart's text alternative) and ids
salted by the chart id, so that several charts on one page never share an id.
"""

from __future__ import annotations

import io
import re
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from matplotlib.figure import Figure

from torchpace.report.document import Chart, Curves, RangeBars, StackedBars

# The doctor's phase colours (the terminal view's, as matplotlib names), so a phase looks the
# same on the page and in the terminal.
PHASE_COLOURS = {
    "data": "tab:red",
    "copy": "tab:purple",
    "forward": "tab:green",
    "backward": "tab:blue",
    "optimizer": "tab:cyan",
    "sync": "tab:olive",
    "eval": "tab:gray",
    "other": "lightgray",
}
SERIES_COLOURS = {"alone": "tab:blue", "combined": "tab:orange", "": "tab:blue"}
_REJECTED = ("tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
_WIDTH_IN = 8.0  # inches: about the page's text width at 96 dpi
_RC: dict[str, Any] = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.size": 9.0,
    "font.family": "sans-serif",
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _label(text: str) -> str:
    # matplotlib hides legend entries whose label starts with "_".
    return "\u2009" + text if text.startswith("_") else text


def _stacked(fig: Figure, plot: StackedBars) -> None:
    ax = fig.add_subplot()
    y = list(range(len(plot.bars)))
    left = [0.0] * len(plot.bars)
    for seg in plot.segments:
        ax.barh(
            y,
            seg.values,
            left=left,
            label=_label(seg.name),
            color=PHASE_COLOURS.get(seg.name, "tab:gray"),
            height=0.6,
        )
        left = [a + b for a, b in zip(left, seg.values, strict=True)]
    ax.set_yticks(y, [_label(b) for b in plot.bars])
    ax.invert_yaxis()
    ax.set_xlabel(plot.unit)
    fig.legend(loc="outside lower center", ncols=len(plot.segments), frameon=False)


def _range_bars(fig: Figure, plot: RangeBars) -> None:
    ax = fig.add_subplot()
    y = list(range(len(plot.bars)))
    for i, bar in enumerate(plot.bars):
        err = None
        if bar.lo is not None and bar.hi is not None:
            err = [[max(bar.value - bar.lo, 0.0)], [max(bar.hi - bar.value, 0.0)]]
        ax.barh(
            [i],
            [bar.value],
            xerr=err,
            color=SERIES_COLOURS.get(bar.series, "tab:blue"),
            alpha=1.0 if bar.kept else 0.4,
            height=0.6,
            capsize=3,
        )
        ax.annotate(
            f"{bar.value:,.2f}" if bar.value < 100 else f"{bar.value:,.0f}",
            (bar.hi if bar.hi is not None else bar.value, i),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    if plot.reference is not None:
        ax.axvline(plot.reference, color="black", linewidth=0.8, linestyle=":")
    series = sorted({b.series for b in plot.bars if b.series})
    if len(series) > 1 or not all(b.kept for b in plot.bars):
        from matplotlib.patches import Patch

        handles = [Patch(color=SERIES_COLOURS[s], label=s) for s in series]
        if not all(b.kept for b in plot.bars):
            handles.append(Patch(color="tab:gray", alpha=0.4, label="not kept"))
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
    ax.set_yticks(y, [_label(b.label) for b in plot.bars])
    ax.invert_yaxis()
    ax.set_xlabel(plot.unit)
    ax.margins(x=0.12)


def _curves(fig: Figure, plot: Curves) -> None:
    ax = fig.add_subplot()
    if plot.band is not None:
        b = plot.band
        ax.fill_between(
            [b.first, b.last],
            [b.lo, b.lo],
            [b.hi, b.hi],
            color="tab:green",
            alpha=0.2,
            label=_label(b.label),
        )
    rejected = 0
    style: dict[str, Any]
    for c in plot.curves:
        if c.role == "baseline":
            style = {"color": "black", "linewidth": 1.2, "alpha": 0.7}
        elif c.role == "plan":
            style = {"color": "tab:blue", "linewidth": 2.2}
        else:
            style = {
                "color": _REJECTED[rejected % len(_REJECTED)],
                "linewidth": 1.0,
                "linestyle": "--",
            }
            rejected += 1
        ax.plot(c.steps, c.values, label=_label(c.label), marker=".", markersize=3, **style)
    ax.set_xlabel(plot.x_label)
    ax.set_ylabel(plot.y_label)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)


def _height(chart: Chart) -> float:
    plot = chart.plot
    if isinstance(plot, StackedBars):
        return 1.4 + 0.45 * len(plot.bars)
    if isinstance(plot, RangeBars):
        return 0.8 + 0.28 * len(plot.bars)
    return 3.6


_SIZE_ATTR = re.compile(r'\s(width|height)="[^"]*"')
# matplotlib names its groups figure_1, axes_1, line2d_3... in every SVG: unique within one
# chart, repeated across charts. Nothing refers to them (the defs that are referred to have
# hashed ids, salted per chart), so each chart's get its prefix.
_GROUP_ID = re.compile(r' id="([A-Za-z][A-Za-z0-9.]*_\d+)"')


def svg(chart: Chart, prefix: str = "") -> str:
    """The chart as an ``<svg>`` element to inline in HTML; ``prefix`` goes before its ids (a
    page with several reports)."""
    import matplotlib

    rc: Any = {**_RC, "svg.hashsalt": prefix + chart.id}
    with matplotlib.rc_context(rc):
        fig = Figure(figsize=(_WIDTH_IN, _height(chart)), layout="constrained")
        plot = chart.plot
        if isinstance(plot, StackedBars):
            _stacked(fig, plot)
        elif isinstance(plot, RangeBars):
            _range_bars(fig, plot)
        else:
            _curves(fig, plot)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    head_end = text.index(">") + 1
    head = _SIZE_ATTR.sub("", text[: head_end - 1])
    title_id, desc_id = f"{prefix}{chart.id}-title", f"{prefix}{chart.id}-desc"
    head += (
        f' width="100%" role="img" aria-labelledby={quoteattr(title_id + " " + desc_id)}>'
        f"<title id={quoteattr(title_id)}>{escape(chart.title)}</title>"
        f"<desc id={quoteattr(desc_id)}>{escape(chart.alt)}</desc>"
    )
    body = _GROUP_ID.sub(lambda m: f' id="{prefix}{chart.id}-{m.group(1)}"', text[head_end:])
    return head + body
