from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Every doctor result the suite builds or writes, in this process or in the ones it starts, is
# checked against docs/doctor-result.schema.json (doctor/result.py, validate_if_asked).
os.environ["TORCHPACE_VALIDATE_RESULTS"] = "1"


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


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


requires_cuda = pytest.mark.skipif(
    "not __import__('torch').cuda.is_available()", reason="needs a CUDA GPU; none on this machine"
)
