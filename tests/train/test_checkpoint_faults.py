"""Checkpoints under hostile conditions (issue 17): an empty or text file, a stray file beside
the run's checkpoints, and the temporary files of saves that were killed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from torchpace.train import checkpoint

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("data", [b"", b"this is not a checkpoint\n", b"\x80\x04K\x01."])
def test_an_unreadable_checkpoint_is_a_message_not_a_traceback(tmp_path: Path, data: bytes) -> None:
    bad = tmp_path / "step-10.pt"
    bad.write_bytes(data)
    with pytest.raises(
        ValueError, match=r"step-10\.pt: (not a readable checkpoint|checkpoint format)"
    ):
        checkpoint.load(bad)


def test_latest_ignores_files_that_are_not_the_run_s_checkpoints(tmp_path: Path) -> None:
    for name in ("step-5.pt", "step-40.pt", "step-final.pt", "step-7.pt.bak", "step-x.pt"):
        (tmp_path / name).write_bytes(b"")
    assert checkpoint.latest(tmp_path) == tmp_path / "step-40.pt"
    assert checkpoint.latest(tmp_path / "empty") is None


def test_a_save_removes_the_temporary_files_of_killed_saves(tmp_path: Path) -> None:
    old = tmp_path / ".step-10.pt.abc123.tmp"  # what a save killed mid-write leaves
    old.write_bytes(b"x" * 1000)
    past = time.time() - 3600
    os.utime(old, (past, past))
    live = tmp_path / ".step-20.pt.def456.tmp"  # another save of this process, in progress
    live.write_bytes(b"y")
    checkpoint.save(tmp_path / "step-30.pt", {"step": 30})
    assert not old.exists() and live.exists()
    assert checkpoint.load(tmp_path / "step-30.pt")["step"] == 30
