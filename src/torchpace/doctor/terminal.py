"""The doctor's terminal summary: the report's terminal view of a doctor result
(``torchpace.report``), so that ``torchpace doctor``, ``torchpace report`` and the HTML page show
the same sections: the step-time breakdown, throughput and MFU, the ranked findings with
file:line, the sync hot spots and memory."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType


def render(result: dict[str, Any], *, top: int | None = None) -> RenderableType:
    """The report of a doctor result; ``top`` keeps only the first findings (the JSON and the
    HTML page have all of them)."""
    from torchpace.report.doctor_doc import build
    from torchpace.report.terminal import render as render_doc

    return render_doc(build(result, top=top))


def print_report(result: dict[str, Any], console: Any = None, *, top: int | None = None) -> None:
    if console is None:
        from torchpace.report.terminal import console as report_console

        console = report_console()
    console.print(render(result, top=top))
