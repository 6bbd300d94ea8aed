"""Run one trial in a fresh subprocess: ``run_trial(spec, timeout_s=..., workdir=...)``.

A fresh process per trial isolates what a trial leaves behind: an OOM, compile caches, global
flags (TF32, cuDNN benchmark), a crash. The worker writes its result file; a worker that dies
without one (a segfault, SIGKILL, ``os._exit``) or outlives its time is reported from here.
``run_trial`` always returns a ``TrialResult``; a trial's own failure never raises. This module
does not import torch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from torchpace._files import atomic_write_text
from torchpace.tune.trial import Status, TrialResult, TrialSpec

_REASON_CHARS = 400  # as the worker's: one line a table can show
# Lines of a Python traceback or faulthandler dump that frame the message without being it.
_FRAMING = ("Traceback (", "Current thread ", "Thread 0x", "Stack (", "Extension modules:")


def run_trial(spec: TrialSpec, *, timeout_s: float, workdir: str | Path) -> TrialResult:
    """Run ``spec`` in a fresh ``python -m torchpace.tune.worker`` (a script's in
    ``torchpace.script.trial_worker``) and return its result.

    The spec, result and the worker's stdout/stderr are files in ``workdir``, named by the
    trial's key (stdout/stderr go to files so a chatty recipe cannot fill a pipe and stall).
    After ``timeout_s`` seconds the worker's whole process group (loader workers, compiler
    processes) is killed and the trial is a "timeout".
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    key = spec.key()
    spec_path, out_path = workdir / f"{key}.spec.json", workdir / f"{key}.out.json"
    log_out, log_err = workdir / f"{key}.stdout.txt", workdir / f"{key}.stderr.txt"
    out_path.unlink(missing_ok=True)  # a result from an earlier run of this key is not this one's
    atomic_write_text(spec_path, json.dumps(spec.to_dict(), indent=2) + "\n")
    cmd = [sys.executable, "-m", spec.module, str(spec_path), str(out_path)]
    t0 = time.perf_counter()
    with log_out.open("wb") as fout, log_err.open("wb") as ferr:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=fout,
            stderr=ferr,
            env=_env(),
            start_new_session=os.name == "posix",  # its own process group, killed as one
        )
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            code = None
        except BaseException:  # Ctrl-C: its own session does not get the terminal's SIGINT
            _kill_group(proc)
            raise
    wall = time.perf_counter() - t0
    logs = {"stdout": str(log_out), "stderr": str(log_err)}
    if out_path.exists():  # the worker finished the trial, even if it then hung or crashed
        try:
            found = TrialResult.from_dict(json.loads(out_path.read_text(encoding="utf-8")))
            extra = {**found.extra, "logs": logs, "exit": code}
            return dataclasses.replace(found, wall_seconds=wall, extra=extra)
        except (ValueError, TypeError) as e:  # JSONDecodeError is a ValueError
            return _outcome(spec, "failed", f"unreadable result file {out_path}: {e}", wall, logs)
    if code is None:
        return _outcome(
            spec, "timeout", f"no result after {timeout_s:g} s: the trial was killed", wall, logs
        )
    last = _last_message(log_err)
    how = f"the worker {_exit_words(code)} without writing a result"
    return _outcome(spec, "failed", how + (f": {last}" if last else ""), wall, logs)


def _env() -> dict[str, str]:
    """This process's environment, with torchpace importable however it was found here."""
    import torchpace

    env = dict(os.environ)
    src = str(Path(torchpace.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"  # what the worker printed before dying is in its log
    return env


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if os.name == "posix":
        # The group is the worker's (start_new_session); gone if it ended in the meantime.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.kill()
    proc.wait()


def _exit_words(code: int) -> str:
    if code < 0:  # Popen's convention: killed by signal -code
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _last_message(path: Path) -> str:
    """The last line of ``path`` that says something: not blank, not a traceback frame."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        if line.strip() and not line[:1].isspace() and not line.startswith(_FRAMING):
            text = " ".join(line.split())
            return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"
    return ""


def _outcome(
    spec: TrialSpec, status: Status, reason: str, wall: float, logs: dict[str, str]
) -> TrialResult:
    return TrialResult(
        spec.key(), spec.name, status, reason=reason, wall_seconds=wall, extra={"logs": logs}
    )
