"""SIGTERM as an exception: a scheduler's preemption or a `kill` ends a verb the way Ctrl-C does,
with its ``finally`` blocks run (temporary files removed, trial process groups killed) and one
line on stderr, instead of Python's silent default death (issue 17)."""

from __future__ import annotations

import signal
import threading
from typing import Any


class Terminated(BaseException):
    """SIGTERM arrived. A BaseException but not KeyboardInterrupt: code that catches Exception or
    KeyboardInterrupt (a user's training script) does not swallow it."""


# How long a Terminated may go unhandled before SIGTERM is raised again (seconds).
REPEAT_S = 3.0
_in_flight = threading.Event()
_handled = threading.Event()


def raise_terminated(signum: int, frame: Any) -> None:
    if not _in_flight.is_set():
        _in_flight.set()
        _handled.clear()  # a new Terminated: an earlier one's handling does not count for it
        threading.Thread(target=_repeat, name="torchpace-sigterm", daemon=True).start()
    raise Terminated()


def _repeat() -> None:
    """Raise SIGTERM in the main thread again until someone handles the Terminated: one raised
    inside a finalizer (a DataLoader iterator's ``__del__``) is printed and dropped by Python,
    and a script that trains for ever then ran on for ever (found by
    benchmarks/fault_injection.py)."""
    main = threading.main_thread().ident
    kill = getattr(signal, "pthread_kill", None)
    while main is not None and kill is not None and not _handled.wait(REPEAT_S):
        kill(main, signal.SIGTERM)


def handled() -> None:
    """The Terminated was caught where it was meant to be: stop raising it again. A later
    SIGTERM raises again until it too is handled (the doctor catches its own watchdog's, then
    goes on to report, and a user's SIGTERM may still come)."""
    _handled.set()
    _in_flight.clear()


def catch_sigterm() -> Any:
    """Make SIGTERM raise :class:`Terminated` in this (main) thread where SIGTERM has its default
    action or is already ours; return the handler to put back, or None when nothing changed."""
    if threading.current_thread() is not threading.main_thread():
        return None
    current = signal.getsignal(signal.SIGTERM)
    if current is not signal.SIG_DFL and current is not raise_terminated:
        return None  # someone chose what SIGTERM does: leave it
    return signal.signal(signal.SIGTERM, raise_terminated)
