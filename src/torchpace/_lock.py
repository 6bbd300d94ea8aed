"""One process at a time in a directory: an exclusive, non-blocking lock file.

Two ``torchpace tune`` runs of one recipe share its cache directory: the same work files (each
recorded the other's worker output), timings taken while the other ran, and an abort ("worker
exited without writing a result") cached as a failure (issue 17). :func:`exclusive` makes the
second run stop at once with a message naming the holder. The lock is ``flock`` on
``<dir>/lock``: the kernel drops it when the holder exits, however it exits (``kill -9``
included), so a stale lock file never blocks. Where ``fcntl`` is missing (Windows) no lock is
taken.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class Locked(RuntimeError):
    """Another process holds the lock; the message names it and what to do."""


@contextlib.contextmanager
def exclusive(path: Path, what: str, advice: str) -> Iterator[None]:
    """Hold the lock file ``path`` for the block, or raise :class:`Locked` at once. ``what``
    names the shared thing and ``advice`` what the user can do, for the message."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            raise Locked(
                f"{what} is in use by another torchpace process (pid {holder}); {advice}"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
