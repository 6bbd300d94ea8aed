"""Atomic file writes: a crash mid-write never leaves a half-written plan, result or cache."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_writer(
    path: str | Path, mode: str = "w", *, keep_mode: bool = False
) -> Iterator[IO[Any]]:
    """A file to write ``path`` through: a temporary file beside it, flushed, fsynced and moved
    over ``path`` when the block ends; removed, leaving ``path`` as it was, if the block fails.
    ``keep_mode``: the new file gets the permissions of the one it replaces; otherwise those
    that ``open()`` gives a new file (0666 less the umask), not mkstemp's private 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if keep_mode and path.exists():
            shutil.copymode(path, tmp)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it: set it straight back
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_writer(path) as f:
        f.write(text)


def _probe(directory: Path) -> str | None:
    """Why nothing can be written in ``directory`` (its nearest existing ancestor when it does
    not exist yet), or None. A real file is made and removed: permission bits alone do not say
    (root, read-only mounts, a full disk's quota)."""
    existing = directory
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory"
    try:
        fd, name = tempfile.mkstemp(dir=existing, prefix=".torchpace-probe-")
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    os.unlink(name)
    return None


def output_file(path: str | Path, option: str) -> Path:
    """``path`` made absolute now (a script that changes directory cannot move it) and checked
    writable before any work, else a ValueError naming ``option`` (issue 17: an unwritable
    ``--json`` failed after the whole run)."""
    target = Path(path).expanduser().absolute()
    if target.is_dir():
        raise ValueError(f"{option} {path}: is a directory; give a file path")
    why = _probe(target.parent)
    if why is None and target.exists() and not os.access(target, os.W_OK):
        why = "the file is read-only"
    if why is not None:
        raise ValueError(f"{option} {path}: cannot write there ({why}); give another path")
    return target


def output_dir(path: str | Path, option: str) -> Path:
    """As :func:`output_file`, for a directory the run will write into."""
    target = Path(path).expanduser().absolute()
    if target.exists() and not target.is_dir():
        raise ValueError(f"{option} {path}: is a file; give a directory")
    why = _probe(target)
    if why is not None:
        raise ValueError(f"{option} {path}: cannot write there ({why}); give another directory")
    return target
