"""The results file of a tune: one JSON object per line, one line per finished trial.

``ResultsFile.append`` adds a line with a single ``write()`` to a file opened with ``O_APPEND``,
under an exclusive ``flock``, then fsyncs it, so concurrent writers never interleave and a kill
loses at most the line being written; ``load`` skips a line that does not parse (the torn end
of a killed write) and counts it. Results are cached under a fingerprint of the recipe's source
and the environment (``tune_fingerprint``, ``cache_path``): an unchanged re-run finds every
trial done. This module does not import torch; the fingerprint and the cache path do.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

from torchpace.tune.trial import TrialResult

# Bump when the meaning of a stored result changes: older caches are then not read (their
# fingerprint differs), rather than misread.
RESULTS_VERSION = 1

# The environment fingerprint's fields that identify where a trial ran; the measured peak
# FLOP/s and the platform string (it carries the kernel build) are left out.
_IDENTIFYING = (
    "device",
    "device_name",
    "cpu_model",
    "cores",
    "torch_threads",
    "torch_version",
    "cuda_version",
    "cudnn_version",
    "cuda_capability",
    "python_version",
)


class ResultsFile:
    """Finished trials, keyed by ``TrialSpec.key()``; ``skipped`` counts the lines the last
    ``load()`` could not read."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.skipped = 0

    def load(self) -> dict[str, TrialResult]:
        """Every readable trial (a key's later line wins); none when the file does not exist."""
        self.skipped = 0
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        found: dict[str, TrialResult] = {}
        for raw in data.splitlines():
            if not raw.strip():
                continue
            try:
                result = TrialResult.from_dict(json.loads(raw))
            except (ValueError, TypeError, KeyError):  # torn, or not a result of this format
                self.skipped += 1
                continue
            found[result.key] = result
        return found

    def append(self, result: TrialResult) -> None:
        """Add ``result`` as one line, durably, in one write (writers do not interleave)."""
        line = (json.dumps(result.to_dict(), separators=(",", ":")) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            _lock(fd)  # released by close(); the torn-end check must not see a write in progress
            if _ends_torn(fd):  # a killed write left half a line: start ours on a line of its own
                line = b"\n" + line
            view = memoryview(line)
            while view:  # one write() in practice; a short write (disk full, signal) goes on
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)


def _lock(fd: int) -> None:
    """An exclusive lock on the file for this append: a reader of the file's last byte could
    otherwise see another process's line half-copied (reads do not wait for writes)."""
    try:
        import fcntl
    except ImportError:  # Windows: appends stay whole; a torn-end check may add a blank line
        return
    fcntl.flock(fd, fcntl.LOCK_EX)


def _ends_torn(fd: int) -> bool:
    if os.fstat(fd).st_size == 0:
        return False
    os.lseek(fd, -1, os.SEEK_END)  # reads only: with O_APPEND every write goes to the end
    return os.read(fd, 1) != b"\n"


def recipe_source(spec: str) -> Path:
    """The file that defines recipe ``spec``, resolved as ``load_recipe`` resolves it: the file
    itself, the built-in workload's module, or the module of ``module:attr``."""
    from torchpace.recipes import RecipeError
    from torchpace.workloads import NAMES

    if spec in NAMES:
        module = f"torchpace.workloads.{spec}"
    elif spec.endswith(".py") or Path(spec).is_file():
        if not Path(spec).is_file():
            raise RecipeError(f"recipe file {spec} does not exist")
        return Path(spec)
    else:
        module = spec.partition(":")[0]
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError) as e:
        raise RecipeError(f"cannot find recipe module {module!r}: {e}") from None
    if found is None or not found.origin or not Path(found.origin).is_file():
        raise RecipeError(f"cannot find the source file of recipe module {module!r}")
    return Path(found.origin)


def tune_fingerprint(
    recipe_spec: str,
    *,
    device: str = "auto",
    script_args: list[str] | None = None,
    cwd: str | None = None,
) -> str:
    """A hash of what a tune's results depend on: the recipe's (or script's) source bytes, a
    script's arguments and working directory, where it runs (device, CPU, cores, threads,
    torch/CUDA/Python versions), torchpace's version and the results format. It does not cover
    files the recipe reads, nor modules it imports."""
    from torchpace import __version__
    from torchpace.measure.clock import resolve_device
    from torchpace.measure.env import fingerprint

    env = fingerprint(resolve_device(device), measure_peak=False).to_dict()
    body = {
        "results_version": RESULTS_VERSION,
        "torchpace": __version__,
        "recipe_sha256": hashlib.sha256(recipe_source(recipe_spec).read_bytes()).hexdigest(),
        "env": {k: env[k] for k in _IDENTIFYING},
    }
    if script_args is not None:
        body.update(script_args=list(script_args), cwd=cwd)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]  # as TrialSpec.key(): a short name


def cache_path(fingerprint: str) -> Path:
    """Where the results of the tune with ``fingerprint`` are kept."""
    from torchpace.measure.env import cache_dir

    return cache_dir() / "tune" / fingerprint / "trials.jsonl"
