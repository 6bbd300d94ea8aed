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


def raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def catch_sigterm() -> Any:
    """Make SIGTERM raise :class:`Terminated` in this (main) thread where SIGTERM has its default
    action or is already ours; return the handler to put back, or None when nothing changed."""
    if threading.current_thread() is not threading.main_thread():
        return None
    current = signal.getsignal(signal.SIGTERM)
    if current is not signal.SIG_DFL and current is not raise_terminated:
        return None  # someone chose what SIGTERM does: leave it
    return signal.signal(signal.SIGTERM, raise_terminated)
