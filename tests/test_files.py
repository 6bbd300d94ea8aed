"""The atomic writer: all or nothing, permissions kept when asked."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from torchpace._files import atomic_write_text, atomic_writer


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    atomic_write_text(path, "old")
    with pytest.raises(RuntimeError), atomic_writer(path) as f:
        f.write("half")
        raise RuntimeError("crash")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def test_keep_mode_keeps_the_replaced_files_permissions(tmp_path: Path) -> None:
    path = tmp_path / "script.py"
    path.write_bytes(b"old")
    path.chmod(0o750)
    with atomic_writer(path, "wb", keep_mode=True) as f:
        f.write(b"new")
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o750


def test_a_new_file_gets_the_permissions_open_would_give(tmp_path: Path) -> None:
    # Not mkstemp's private 0600: a report or a plan is meant to be read by others.
    import os

    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "report.html", "<html></html>")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "report.html").stat().st_mode) == 0o644
