"""Jupyter notebooks: code cells joined with IPython syntax blanked, findings per cell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from torchpace.cli import main
from torchpace.lint import get
from torchpace.lint.notebooks import read_notebook

TP101 = "TP101 DataLoader loads every batch in the training process (no `num_workers`)"


def _notebook(*cells: tuple[str, Any], **metadata: Any) -> bytes:
    doc = {
        "cells": [
            {"cell_type": kind, "metadata": {}, "source": source}
            | ({"outputs": [], "execution_count": None} if kind == "code" else {})
            for kind, source in cells
        ],
        "metadata": metadata,
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(doc, indent=1).encode()


def test_code_cells_join_with_magics_blanked_and_lines_kept() -> None:
    nb = read_notebook(
        _notebook(
            ("markdown", ["# Title\n", "text"]),
            ("code", ["%matplotlib inline\n", "import torch\n"]),
            ("raw", "x = ("),
            ("code", "!pip install x\nfiles = !ls\nfor f in files:\n    %time g(f)\ntorch.zeros?"),
            ("code", ""),
            ("code", "%%bash\necho hi\n"),
            ("code", "%%time\ny = 1\r\nz = 2\n"),
            ("code", "?torch.zeros\n%run a.py \\\n  --flag\nw = 3"),
        )
    )
    assert nb.source.decode().splitlines() == [
        "pass",  # cell 2
        "import torch",
        "pass",  # cell 4
        "files = None",  # a shell assignment keeps its name bound
        "for f in files:",
        "    pass",
        "pass",
        "",  # cell 6: a bash cell is not Python
        "",
        "pass",  # cell 7: its body is Python
        "y = 1",
        "z = 2",
        "pass",  # cell 8
        "globals()",  # %run binds the script's names out of sight
        "",
        "w = 3",
    ]
    assert nb.cells == (2, 4, 5, 6, 7, 8)
    assert [nb.locate(line) for line in (1, 2, 3, 7, 8, 10, 12, 13, 16)] == [
        (2, 1),
        (2, 2),
        (4, 1),
        (4, 5),
        (6, 1),
        (7, 1),
        (7, 3),
        (8, 1),
        (8, 4),
    ]


def test_a_percent_continuing_python_is_not_a_magic() -> None:
    # d2l-pytorch (issue 32): a format string's `%` operator on its own line, and a `%` inside
    # a triple-quoted string, are Python; the three cells that held one were skipped whole.
    cell = (
        'print("epoch %d, loss %.4f"\n'
        "      % (epoch, loss))\n"
        "%timeit f()\n"
        'doc = """\n'
        "% not a magic\n"
        '"""\n'
        "total = (1 +\n"
        "  2)\n"
        "!ls"
    )
    nb = read_notebook(_notebook(("code", cell)))
    assert nb.source.decode().splitlines() == [
        'print("epoch %d, loss %.4f"',
        "      % (epoch, loss))",
        "pass",
        'doc = """',
        "% not a magic",
        '"""',
        "total = (1 +",
        "  2)",
        "pass",
    ]


def test_a_notebook_in_another_language_has_no_python() -> None:
    data = _notebook(("code", "x <- 1"), language_info={"name": "R"})
    assert read_notebook(data).source == b""


def test_findings_are_placed_by_cell_and_noqa_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nb.ipynb").write_bytes(
        _notebook(
            ("markdown", "# Training"),
            ("code", ["%pip install torch\n", "from torch.utils.data import DataLoader\n"]),
            ("code", "a = DataLoader(ds, pin_memory=True)  # noqa: TP101\n"),
            ("markdown", "more"),
            ("code", "\nb = DataLoader(ds, pin_memory=True)\n"),
            ("code", "for batch in a:\n    step(batch)\nfor batch in b:\n    step(batch)\n"),
        )
    )
    assert main(["lint", "--select", "TP101", "nb.ipynb"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"nb.ipynb:cell 5:2:5: {TP101}",
        "Found 1 finding in 1 file.",
    ]
    assert main(["lint", "--select", "TP101", "--format", "json", "nb.ipynb"]) == 1
    [finding] = json.loads(capsys.readouterr().out)
    assert {k: finding[k] for k in ("cell", "line", "col", "end_line", "end_col")} == {
        "cell": 5,
        "line": 2,
        "col": 5,
        "end_line": 2,
        "end_col": 36,
    }


def test_fix_and_diff_leave_notebooks_untouched_and_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    data = _notebook(("code", "import torch\n"), ("code", "s = torch.cuda.amp.GradScaler()\n"))
    (tmp_path / "nb.ipynb").write_bytes(data)
    assert main(["lint", "--select", "TP301", "--format", "json", "nb.ipynb"]) == 1
    [finding] = json.loads(capsys.readouterr().out)
    # The fix is reported with lines of its cell, like the finding.
    assert (finding["cell"], finding["line"]) == (2, 1)
    assert [(e["start_line"], e["end_line"]) for e in finding["fix"]["edits"]] == [(1, 1), (1, 1)]
    message = get("TP301").message
    assert main(["lint", "--select", "TP301", "--fix", "nb.ipynb"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"nb.ipynb:cell 2:1:5: TP301 {message}",
        "Found 1 finding in 1 file. Not applied: 1 fix in notebooks "
        "(torchpace does not edit notebooks).",
    ]
    assert main(["lint", "--select", "TP301", "--diff", "nb.ipynb"]) == 0
    assert capsys.readouterr() == ("", "nb.ipynb: note: fixes are not applied to notebooks\n")
    assert (tmp_path / "nb.ipynb").read_bytes() == data
