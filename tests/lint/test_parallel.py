"""Many files lint on several processes, with the same output, in the same order, as serially."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest

from conftest import run_python
from torchpace.cli import main
from torchpace.lint import parallel
from torchpace.lint.parallel import lint_jobs

SLOW = "from torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=True)\n"


def _files(root: Path, n: int) -> list[str]:
    paths = []
    for i in range(n):
        path = root / f"m{i:03d}.py"
        # Every fifth file is broken, every other one has a finding on a line of its own.
        path.write_text("def f(:\n" if i % 5 == 4 else "x = 1\n" * (i % 7) + SLOW * (i % 2))
        paths.append(str(path))
    return paths


class _CountingPool(ProcessPoolExecutor):
    started: ClassVar[list[int | None]] = []

    def __init__(self, max_workers: int | None = None, **kwargs: Any) -> None:
        _CountingPool.started.append(max_workers)
        super().__init__(max_workers, **kwargs)


def test_pool_results_equal_serial_results_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = [(p, ("TP101",), frozenset[str]()) for p in _files(tmp_path, 23)]
    monkeypatch.setattr(parallel, "ProcessPoolExecutor", _CountingPool)
    monkeypatch.setattr(parallel, "min_files", lambda: 10)
    _CountingPool.started.clear()
    serial = lint_jobs(jobs, workers=1)
    assert _CountingPool.started == []
    pooled = lint_jobs(jobs, workers=3)
    assert _CountingPool.started == [3]
    assert pooled == serial
    assert [getattr(r, "path", None) for r in pooled] == [p for p, _, _ in jobs]
    # Below the threshold a pool costs more than it saves: the files are linted here.
    lint_jobs(jobs[:9], workers=3)
    assert _CountingPool.started == [3]


def test_workers_run_only_the_codes_they_are_given(tmp_path: Path) -> None:
    jobs = [(p, (), frozenset[str]()) for p in _files(tmp_path, 40)]
    results = lint_jobs(jobs, workers=2)
    assert all(not getattr(r, "findings", ()) for r in results)


def test_jobs_option_gives_identical_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _files(tmp_path, 300)
    assert main(["lint", "--select", "TP101", "--jobs", "1", "."]) == 2
    serial = capsys.readouterr()
    assert main(["lint", "--select", "TP101", "--jobs", "4", "."]) == 2
    assert capsys.readouterr() == serial
    assert serial.out.endswith("Found 120 findings in 240 files.\n")
    assert len(serial.err.splitlines()) == 60


def test_command_line_in_a_fresh_process(tmp_path: Path) -> None:
    _files(tmp_path, 200)
    proc = run_python("-m", "torchpace", "lint", "--select", "TP101", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stdout.endswith("Found 80 findings in 160 files.\n")
