from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Every doctor result the suite builds or writes, in this process or in the ones it starts, is
# checked against docs/doctor-result.schema.json (doctor/result.py, validate_if_asked).
os.environ["TORCHPACE_VALIDATE_RESULTS"] = "1"


# The folders of tests marked ``broken_results`` (hostile or malformed inputs, on purpose).
_BROKEN_ON_PURPOSE: set[Path] = set()


@pytest.fixture(autouse=True)
def _note_broken_on_purpose(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("broken_results") and "tmp_path" in request.fixturenames:
        _BROKEN_ON_PURPOSE.add(request.getfixturevalue("tmp_path"))


@pytest.fixture(scope="session", autouse=True)
def _every_written_result_validates(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """After the last test, every doctor result file the suite wrote (``--json`` into a test's
    folder, by this process or a child) is read back and checked against the schema: a result
    broken where no test looked at it still fails the run, at this fixture's teardown. Tests
    marked ``broken_results`` write malformed results on purpose; their folders are left out."""
    yield
    from torchpace.doctor.result import SCHEMA, schema_errors

    broken = {}
    for path in tmp_path_factory.getbasetemp().rglob("*.json"):
        if any(path.is_relative_to(folder) for folder in _BROKEN_ON_PURPOSE):
            continue
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # not a whole JSON file: not a result
        if isinstance(result, dict) and result.get("schema") == SCHEMA:
            errors = schema_errors(result)
            if errors:
                broken[str(path)] = errors[:5]
    assert not broken, f"doctor results that break the schema: {json.dumps(broken, indent=1)}"


@pytest.fixture(autouse=True)
def _isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keep the peak-FLOP/s cache of one test run out of the user's home."""
    monkeypatch.setenv("TORCHPACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def run_python(
    *args: str, timeout: float = 300, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )


@contextlib.contextmanager
def cpu_hogs(n: int = 1) -> Iterator[None]:
    """``n`` CPU-bound processes that are not ours (the shell that starts each exits): a load
    probe counts this process's whole tree, DataLoader workers included, as its own work, so
    only such processes are other load to it."""
    spin = f"'{sys.executable}' -c 'while True: pass' >/dev/null 2>&1 & echo $!"
    pids = [
        int(subprocess.run(["sh", "-c", spin], capture_output=True, text=True).stdout)
        for _ in range(n)
    ]
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


requires_cuda = pytest.mark.skipif(
    "not __import__('torch').cuda.is_available()", reason="needs a CUDA GPU; none on this machine"
)
