"""The report as one self-contained HTML page: a jinja2 template with autoescaping, charts as
inline SVG (``charts``), no scripts or styles from anywhere else, so it opens offline.

Every string of the document is escaped by the template; only the SVG that ``charts.svg`` wrote
is inserted as markup (matplotlib escapes the text it writes into it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from torchpace._version import __version__
from torchpace.report import charts
from torchpace.report.document import (
    Chart,
    Code,
    Document,
    Entry,
    Facts,
    Link,
    Paragraph,
    Table,
)


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("torchpace.report", "templates"),
        autoescape=True,  # every string is text; the template marks nothing safe but the SVG
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
    )
    env.tests.update(
        link=lambda v: isinstance(v, Link),
        links=lambda v: isinstance(v, tuple) and all(isinstance(x, Link) for x in v),
        paragraph=lambda v: isinstance(v, Paragraph),
        facts_block=lambda v: isinstance(v, Facts),
        table_block=lambda v: isinstance(v, Table),
        code_block=lambda v: isinstance(v, Code),
        chart=lambda v: isinstance(v, Chart),
        entry=lambda v: isinstance(v, Entry),
    )
    return env


def page(documents: Sequence[Document], *, sources: Sequence[str] = ()) -> str:
    """The HTML page for one or more documents (a doctor and a tune result side by side). With
    several, each document's ids get a prefix (``r1-``, ``r2-``) so that none repeats."""
    if not documents:
        raise ValueError("a report needs at least one result")
    prefixes = [""] if len(documents) == 1 else [f"r{i}-" for i in range(1, len(documents) + 1)]

    def svg(chart: Chart, prefix: str) -> Markup:
        # Markup: matplotlib wrote this SVG and escaped the text in it.
        return Markup(charts.svg(chart, prefix))

    titles = " + ".join(d.title for d in documents)
    return str(
        _environment()
        .get_template("page.html.j2")
        .render(
            documents=documents,
            prefixes=prefixes,
            page_title=titles,
            version=__version__,
            sources=", ".join(sources) or "a result",
            svg=svg,
        )
    )
