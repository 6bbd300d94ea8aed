"""What lint reports on a source cut from real code, as (code, line) pairs: the one helper the
change-set tests (``test_change*_classes.py``) share."""

from __future__ import annotations

import textwrap
from pathlib import Path

from torchpace.lint import RULES, FileResult, lint_source


def findings(source: str, select: str | None = None) -> list[tuple[str, int]]:
    """Every finding of the default rules on ``source`` (dedented, linted as ``train.py``), in
    lint's order; only ``select``'s code where one is given."""
    result = lint_source("train.py", textwrap.dedent(source).encode(), RULES)
    assert isinstance(result, FileResult), result
    return [
        (f.code, f.location.line) for f in result.findings if select is None or f.code == select
    ]


def write_project(root: Path, files: dict[str, str]) -> None:
    """A project of several files under ``root``: each path's source, dedented, with the folders
    it needs."""
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
