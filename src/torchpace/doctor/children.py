"""Processes the script starts: what the doctor can and cannot see of training in them.

The doctor measures the process it runs in. Hogwild training (pytorch/examples' mnist_hogwild)
and ``torch.multiprocessing.spawn`` run the training loop in child processes, where the main
process only starts and joins them; a ``multiprocessing.Pool`` may build the batches. Each
process the script starts, other than a DataLoader's workers, is recorded with its target and
the line that started it, so that a run with no step in this process says where training went.

A child *forked* from this process inherits the instruments. They are taken out there (its
optimizer steps would otherwise end it with ``DoctorStop`` at this process's step count, and
every module call would pay for hooks whose records nobody reads); a *spawned* child starts a
fresh interpreter and never had them.

When the doctor stops the script (after the measured steps, at a timeout, on SIGTERM or Ctrl-C)
while processes it started still run, nobody is left to join them: the doctor waited at exit for
them to finish, or, killed, left them training as orphans (pytorch/examples' mnist_hogwild). It
ends them (``stop_running``) and says so in the result.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import multiprocessing.process
import os
import signal
import sys
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torchpace._signals import raise_terminated
from torchpace.doctor.sites import Site
from torchpace.runtime.patching import Patches
from torchpace.runtime.user_code import is_internal

_STDLIB_STARTERS = tuple(
    os.path.dirname(os.path.abspath(m.__file__)) + os.sep
    for m in (multiprocessing, concurrent.futures)
    if m.__file__ is not None
)


@dataclass
class Child:
    target: str  # the function the process runs ("train"), or what it is ("Pool worker")
    site: Site | None  # the user's line that started it
    method: str  # "fork", "spawn", "forkserver"
    pid: int | None = None  # None until it has started
    stopped_by: str | None = None  # the signal the doctor ended it with: "SIGTERM", "SIGKILL"
    # Weak: multiprocessing holds a running child until it is joined, so a dead reference is a
    # process that ended and was reaped.
    process: weakref.ref[Any] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "path": None if self.site is None else self.site[0],
            "line": None if self.site is None else self.site[1],
            "start_method": self.method,
            "pid": self.pid,
            "stopped_by_doctor": self.stopped_by,
        }


def describe(children: list[Child]) -> str:
    """``2 processes running train (started at hogwild.py:40, spawn)``, grouped by target."""
    groups: dict[tuple[str, Site | None, str], int] = {}
    for c in children:
        key = (c.target, c.site, c.method)
        groups[key] = groups.get(key, 0) + 1
    parts = []
    for (target, site, method), n in groups.items():
        where = f"started at {os.path.basename(site[0])}:{site[1]}, " if site else ""
        parts.append(f"{n} process{'es' if n > 1 else ''} running {target} ({where}{method})")
    return "; ".join(parts)


def describe_stopped(children: list[Child]) -> str:
    """``2 running train (pids 3002, 3003) with SIGTERM``, for the children the doctor ended."""
    groups: dict[tuple[str, str | None], list[str]] = {}
    for c in children:
        if c.stopped_by is not None:
            groups.setdefault((c.target, c.stopped_by), []).append(str(c.pid))
    return "; ".join(
        f"{len(pids)} running {target} (pid{'s' if len(pids) > 1 else ''} {', '.join(pids)}) "
        f"with {how}"
        for (target, how), pids in groups.items()
    )


def _target_name(process: Any) -> str | None:
    """What a process runs, or None for a DataLoader worker (the doctor measures its loader)."""
    target = getattr(process, "_target", None)
    if target is None:
        return type(process).__name__
    module = getattr(target, "__module__", "") or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    if module.startswith("torch.utils.data"):
        return None
    if module == "multiprocessing.pool":
        return "Pool worker"
    if module.startswith("torch.multiprocessing") and process._args:  # spawn's _wrap(fn, ...)
        fn = process._args[0]
        return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn)))
    return str(name)


def _start_method(process: Any) -> str:
    method = getattr(process, "_start_method", None)
    if method is None:  # a plain multiprocessing.Process: the default context's method
        method = multiprocessing.get_start_method(allow_none=True) or "fork"
    return str(method)


def _starter() -> Site | None:
    """The user's line that started the process: the first frame outside torch, torchpace and
    the standard library's process machinery (a Pool starts its workers from its own code)."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if not is_internal(code) and not os.path.abspath(code.co_filename).startswith(
            _STDLIB_STARTERS
        ):
            return os.path.abspath(code.co_filename), frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None


# The recorder of the run in progress, for the fork handler (os.register_at_fork cannot be
# unregistered, so it is registered once and looks here).
_active: weakref.ref[Any] | None = None
_registered = False


def _disarm_in_child() -> None:
    session = _active() if _active is not None else None
    if session is None:
        return
    with contextlib.suppress(Exception):  # never fail the user's child over the instruments
        session.disarm()
        # SIGTERM does in the child what it would under `python script.py`: end it, not raise
        # the doctor's Terminated (which printed a traceback when stop_running ended the child).
        if signal.getsignal(signal.SIGTERM) is raise_terminated:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def install(children: list[Child], session: Any, patches: Patches) -> None:
    """Record the processes the script starts into ``children``; disarm ``session`` in forks."""
    global _active, _registered
    start: Callable[..., Any] = multiprocessing.process.BaseProcess.start

    def recorded_start(process: Any) -> None:
        target = _target_name(process)
        if target is None:
            start(process)
            return
        child = Child(target, _starter(), _start_method(process), process=weakref.ref(process))
        children.append(child)
        start(process)
        child.pid = process.pid

    patches.set(multiprocessing.process.BaseProcess, "start", recorded_start)
    _active = weakref.ref(session)
    patches.on_undo(_clear)
    if not _registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_disarm_in_child)
        _registered = True


def _clear() -> None:
    global _active
    _active = None


# How long the children have to exit after SIGTERM before SIGKILL (seconds): 5 s is the wait
# torch's DataLoader gives a worker to exit before it terminates it
# (torch.utils.data._utils.MP_STATUS_CHECK_INTERVAL); torch.multiprocessing.spawn's 30 s is long
# for a diagnosis that has already ended.
STOP_GRACE_S = 5.0


def stop_running(children: list[Child], grace_s: float = STOP_GRACE_S) -> list[Child]:
    """End the recorded children that still run, as torch.multiprocessing.spawn ends its
    processes when one fails: SIGTERM, ``grace_s`` seconds to exit, then SIGKILL. Return them,
    each with the signal that ended it in ``stopped_by``.

    Daemonic children (a Pool's workers) are left to multiprocessing, which terminates them at
    the interpreter's exit as under ``python script.py`` (a Pool would start new workers in
    place of ended ones). DataLoader workers are not recorded: their loader ends them, as torch
    does, and a worker of a child that ends sees its parent gone and exits.
    """
    alive = multiprocessing.active_children()  # this process's children; reaps the ended ones
    running: list[tuple[Child, Any]] = []
    for child in children:
        process = child.process() if child.process is not None else None
        if process is not None and not process.daemon and any(process is p for p in alive):
            running.append((child, process))
    for child, process in running:
        process.terminate()
        child.stopped_by = "SIGTERM"
    deadline = time.monotonic() + grace_s
    for _, process in running:
        process.join(max(0.0, deadline - time.monotonic()))
    for child, process in running:
        if process.is_alive():
            process.kill()
            process.join(grace_s)  # bounded: a process stuck in the kernel cannot hang the doctor
            child.stopped_by = "SIGKILL"
    return [child for child, _ in running]
