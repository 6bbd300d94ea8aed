"""What lint reports on a source cut from real code, as (code, line) pairs, or on a small
project of such files: the helpers the change-set tests (``test_change*_classes.py``) share."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from torchpace.cli import main
from torchpace.lint import RULES, FileResult, lint_source


def findings(source: str, select: str | None = None) -> list[tuple[str, int]]:
    """Every finding of the default rules on ``source`` (dedented, linted as ``train.py``), in
    lint's order; only ``select``'s code where one is given."""
    result = lint_source("train.py", textwrap.dedent(source).encode(), RULES)
    assert isinstance(result, FileResult), result
    return [
        (f.code, f.location.line) for f in result.findings if select is None or f.code == select
    ]


def notebook_source(*cells: str) -> bytes:
    """A notebook whose code cells are ``cells``, in order, as ``.ipynb`` bytes."""
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    notebook = {"cells": [{**cell, "source": c} for c in cells], "metadata": {}, "nbformat": 4}
    notebook["nbformat_minor"] = 5
    return json.dumps(notebook).encode()


def notebook_findings(
    cells: list[str], select: str | None = None
) -> list[tuple[str, int | None, int]]:
    """Every finding of the default rules on a notebook of ``cells``, as (code, cell, line)
    pairs in lint's order; only ``select``'s code where one is given."""
    result = lint_source("notebook.ipynb", notebook_source(*cells), RULES)
    assert isinstance(result, FileResult), result
    return [
        (f.code, f.location.cell, f.location.line)
        for f in result.findings
        if select is None or f.code == select
    ]


def write_project(root: Path, files: dict[str, str]) -> None:
    """A project of several files under ``root``: each path's source, dedented, with the folders
    it needs."""
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


def project_findings(
    root: Path, files: dict[str, str], select: str, capsys: pytest.CaptureFixture[str], *flags: str
) -> list[dict[str, Any]]:
    """The findings of ``select`` that ``torchpace lint --format json`` reports on a project of
    ``files`` under ``root`` (:func:`write_project`), as the JSON gives them; the run must end
    with findings or none, not an error."""
    write_project(root, files)
    rc = main(["lint", str(root), "--select", select, "--format", "json", *flags])
    assert rc in (0, 1)
    found: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return found
