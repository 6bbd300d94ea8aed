"""One tune per cache directory (issue 17): two runs of one recipe cross-wired their work files
and timings. The second run now stops before any trial, naming the holder; the lock goes with
its holder, even a `kill -9`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchpace._lock import Locked, exclusive
from torchpace.tune import search

HOLD = """
import sys, time
from pathlib import Path
from torchpace._lock import exclusive
with exclusive(Path(sys.argv[1]), "the cache", "wait"):
    print("held", flush=True)
    time.sleep(60)
"""


def _holder(lock: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_tune_on_the_same_cache_stops_before_any_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir = tmp_path / "fp" / "work"
    holder = _holder(workdir.parent / "lock")
    ran: list[object] = []
    monkeypatch.setattr(search, "run_trial", lambda *a, **k: ran.append(a))
    try:
        with pytest.raises(Locked, match=rf"pid {holder.pid}\); wait for that tune"):
            search.tune(None, [], [], results=None, workdir=workdir)  # type: ignore[arg-type]
        assert ran == []
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_dies_with_its_holder_even_on_sigkill(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    holder = _holder(lock)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    deadline = time.monotonic() + 5
    while True:  # the kernel releases a flock when the process's files close
        try:
            with exclusive(lock, "the cache", "wait"):
                break
        except Locked:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert lock.read_text().strip() == str(os.getpid())
