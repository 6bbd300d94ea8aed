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
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import multiprocessing.process
import os
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torchpace.doctor.patching import Patches
from torchpace.doctor.sites import Site, is_internal

_STDLIB_STARTERS = tuple(
    os.path.dirname(os.path.abspath(m.__file__)) + os.sep
    for m in (multiprocessing, concurrent.futures)
    if m.__file__ is not None
)


@dataclass(frozen=True)
class Child:
    target: str  # the function the process runs ("train"), or what it is ("Pool worker")
    site: Site | None  # the user's line that started it
    method: str  # "fork", "spawn", "forkserver"

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "path": None if self.site is None else self.site[0],
            "line": None if self.site is None else self.site[1],
            "start_method": self.method,
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


def install(children: list[Child], session: Any, patches: Patches) -> None:
    """Record the processes the script starts into ``children``; disarm ``session`` in forks."""
    global _active, _registered
    start: Callable[..., Any] = multiprocessing.process.BaseProcess.start

    def recorded_start(process: Any) -> None:
        target = _target_name(process)
        if target is not None:
            children.append(Child(target, _starter(), _start_method(process)))
        start(process)

    patches.set(multiprocessing.process.BaseProcess, "start", recorded_start)
    _active = weakref.ref(session)
    patches.on_undo(_clear)
    if not _registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_disarm_in_child)
        _registered = True


def _clear() -> None:
    global _active
    _active = None
