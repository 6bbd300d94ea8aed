"""The GPU kit's dry run: without CUDA, ``make gpu-check`` skips what needs CUDA, runs the rest
and exits 0, with pip unable to reach any index (the lent GPU machine has no network)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "benchmarks" / "gpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine runs the kit for real")
def test_the_dry_run_skips_what_needs_cuda_and_passes(tmp_path: Path) -> None:
    out = tmp_path / "gpu-check.json"
    env = {
        **os.environ,
        "PIP_NO_INDEX": "1",
        "PIP_INDEX_URL": "http://127.0.0.1:9/",
        # one CPU twin: the suite runs all of them already (tests/test_compat.py and others)
        "TORCHPACE_KIT_CPU_TWINS": (
            "tests/test_compat.py::test_dynamo_support_is_read_where_torch_keeps_it"
        ),
    }
    proc = subprocess.run(
        ["make", "-s", "gpu-check", f"GPU_PYTHON={sys.executable}", f"GPU_JSON={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run,) = json.loads(out.read_text())["runs"]
    assert run["machine"]["torch"] == torch.__version__ and run["machine"]["device"] is None
    sys.path.insert(0, str(KIT))
    try:
        from checks import STAGES  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(KIT))
    every = [name for stage in STAGES.values() for name, _fn, _t in stage]
    status = {c["name"]: c["status"] for c in run["checks"]}
    assert list(status) == every
    ran = {name for name, s in status.items() if s == "pass"}
    assert ran == {"environment", "cpu-twins"}
    assert all(s == "skipped: no CUDA" for name, s in status.items() if name not in ran)


def test_an_unknown_stage_is_refused_with_the_choices(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(KIT / "kit.py"), "--stage", "D", "--json", str(tmp_path / "x.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "choose A, B, C or all" in proc.stderr
