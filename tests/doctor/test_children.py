"""Processes the script starts outlive neither the script's stop nor the doctor: when the doctor
stops the script (its first-step timeout, after its measured steps) while a child still runs, it
ends the child, says so in the report and the JSON, and exits with its own status.

Found on pytorch/examples' mnist_hogwild: the timeout's SIGTERM was raised again every 3 s after
the run had caught it, and killed the doctor at exit while multiprocessing joined the children,
which went on training as orphans."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import time
import weakref
from pathlib import Path
from typing import Any

import pytest

from conftest import run_python
from torchpace.doctor.children import Child, stop_running

SCRIPT = Path(__file__).resolve().parent / "scripts" / "lingering_child.py"


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie has ended: only its parent's wait is due)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z")


def _child_pid(stdout: str) -> int:
    (line,) = [x for x in stdout.splitlines() if x.startswith("child ")]
    return int(line.split()[1])


def _doctor(tmp_path: Path, *args: str) -> tuple[Any, dict[str, Any]]:
    out = tmp_path / "out.json"
    # The child never ends: a doctor that waited for it would hang until this timeout.
    proc = run_python(
        "-m", "torchpace", "doctor", "--no-lint", "--json", str(out), *args, timeout=600
    )
    assert out.exists(), proc.stderr[-2000:]
    return proc, json.loads(out.read_text())


def test_a_child_left_running_at_the_first_step_timeout_is_ended(tmp_path: Path) -> None:
    # No step in the main process; the timeout stops the script while it joins its child.
    proc, result = _doctor(
        tmp_path, "--first-step-timeout", "1", str(SCRIPT), "--", "--start", "spawn"
    )
    assert proc.returncode == 1, proc.stderr[-2000:]  # no step: the doctor's status, no signal
    pid = _child_pid(proc.stdout)
    assert not _running(pid)
    (child,) = result["run"]["child_processes"]
    assert child["pid"] == pid and child["target"] == "linger"
    assert child["stopped_by_doctor"] == "SIGTERM"
    assert result["steps"]["measured"] == 0
    assert result["outcome"] == "no training step and no backward() observed in 1 s"
    err = proc.stderr
    assert (
        "ended the processes the script started that were still running when the doctor "
        f"stopped it: 1 running linger (pid {pid}) with SIGTERM" in err
    )
    assert "it started 1 process running linger (started at lingering_child.py:" in err
    assert ", spawn). The doctor measures only the process it runs in, so it measured no step" in (
        err
    )
    assert "call linger in the main process instead of in new processes" in err
    assert "Terminated" not in err


def test_a_child_left_running_after_the_measured_steps_is_ended(tmp_path: Path) -> None:
    # The doctor's own stop after its measured steps; a forked child, which inherited the
    # doctor's SIGTERM handler, ends as it would under `python`, without a Terminated traceback.
    proc, result = _doctor(
        tmp_path,
        "--steps",
        "2",
        "--warmup",
        "1",
        str(SCRIPT),
        "--",
        "--start",
        "fork",
        "--steps",
        "1000",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    pid = _child_pid(proc.stdout)
    assert not _running(pid)
    (child,) = result["run"]["child_processes"]
    assert (child["pid"], child["stopped_by_doctor"]) == (pid, "SIGTERM")
    assert result["outcome"] == "stopped after the measured steps"
    assert f"the doctor ended them (pid {pid})" in " ".join(proc.stdout.split())
    assert "Terminated" not in proc.stderr


def _wait_then_ignore(ready: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready.set()
    while True:
        time.sleep(1)


@pytest.mark.skipif(sys.platform != "linux", reason="forks a child")
def test_a_child_that_ignores_sigterm_is_killed() -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    process = ctx.Process(target=_wait_then_ignore, args=(ready,))
    process.start()
    assert ready.wait(30)
    child = Child("f", None, "fork", pid=process.pid, process=weakref.ref(process))
    t0 = time.monotonic()
    assert stop_running([child], grace_s=0.5) == [child]
    # The child ignores SIGTERM for ever: anything short of that was the SIGKILL after the
    # grace (120 s leaves a loaded machine hundreds of times the 0.5 s).
    assert time.monotonic() - t0 < 120
    assert child.stopped_by == "SIGKILL" and process.exitcode == -signal.SIGKILL
    assert not _running(process.pid)


@pytest.mark.skipif(sys.platform != "linux", reason="forks a child")
def test_children_that_ended_or_are_daemonic_are_left_alone() -> None:
    ctx = multiprocessing.get_context("fork")
    done = ctx.Process(target=int)
    done.start()
    done.join()
    daemon = ctx.Process(target=time.sleep, args=(60,), daemon=True)
    daemon.start()
    children = [
        Child("int", None, "fork", pid=done.pid, process=weakref.ref(done)),
        Child("sleep", None, "fork", pid=daemon.pid, process=weakref.ref(daemon)),
    ]
    try:
        assert stop_running(children, grace_s=0.5) == []
        assert daemon.is_alive()  # multiprocessing ends it at exit, as under `python`
    finally:
        daemon.terminate()
        daemon.join()
