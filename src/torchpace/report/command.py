"""``torchpace report RESULT.json [RESULT.json ...] [-o report.html]``: print the terminal view
of doctor and tune results and write them as one self-contained HTML page."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchpace.report.document import Document

EPILOG = """\
Reads the JSON that `torchpace doctor --json PATH` writes and the torchpace-tune.json that
`torchpace tune` writes; several results go on one page, in the order given:

  torchpace report torchpace-demo/doctor.json torchpace-demo/torchpace-tune.json -o report.html

The page is one file with no network requests: it opens offline, attaches to a pull request and
prints. Without -o it is written beside the first result, with the suffix .html.

exit status: 0 when the page was written; 2 when a result cannot be read (the message says why).
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="render doctor and tune results: terminal view and one HTML page",
        description="Render doctor and tune results in the terminal and as one self-contained "
        "HTML page (charts, findings, verdicts, the plan).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", nargs="+", type=Path, help="result JSON files")
    p.add_argument("-o", "--output", type=Path, help="the HTML file (default: RESULT.html)")
    p.add_argument("--quiet", action="store_true", help="do not print the terminal view")
    p.set_defaults(func=run)


def write_html(path: Path, docs: Sequence[Document], sources: Sequence[str]) -> None:
    """Render ``docs`` to one page at ``path``, atomically."""
    from torchpace._files import atomic_write_text
    from torchpace.report.html import page

    if path.is_dir():
        raise ValueError(
            f"{path} is a directory; give -o a file name such as {path / 'report.html'}"
        )
    if not path.parent.is_dir():
        raise ValueError(f"{path.parent} does not exist; create it or choose another -o")
    atomic_write_text(path, page(docs, sources=sources))


def run(args: argparse.Namespace) -> int:
    from torchpace.report.load import ResultError, document, load_result

    try:
        sources = [str(p) for p in args.results]
        docs = [
            document(*load_result(p), where) for p, where in zip(args.results, sources, strict=True)
        ]
        output = args.output or args.results[0].with_suffix(".html")
        if output.resolve() in {p.resolve() for p in args.results}:
            raise ResultError(f"-o {output} is one of the results; choose another file name")
        if not args.quiet:
            from torchpace.report.terminal import console, render

            out = console()
            for doc in docs:
                out.print(render(doc))
        write_html(output, docs, sources)
    except (ResultError, ValueError) as e:
        print(f"torchpace report: {e}", file=sys.stderr)
        return 2
    print(f"wrote {output}")
    return 0
