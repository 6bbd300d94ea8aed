"""The doctor's CUDA paths: event timeline, copy phase and measured sync blocking.

These need a GPU; elsewhere they skip, and the CPU tests cover the shared code."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs a CUDA GPU: CUDA events, host-to-device copies and blocking syncs "
        "exist only there",
    ),
]

SCRIPT = Path(__file__).parent / "scripts" / "cuda_tiny.py"


def test_cuda_run_has_device_timeline_copies_and_blocked_syncs() -> None:
    from torchpace.doctor import script

    ran = script.run(str(SCRIPT), [], steps=10, warmup=2, lint=False)
    result = ran.result
    assert result is not None
    assert result["env"]["device"].startswith("cuda")
    device = result["device_breakdown"]
    assert sum(p["share"] for p in device.values()) == pytest.approx(1.0, abs=0.15)
    assert result["breakdown"]["copy"]["seconds"]["median"] > 0
    line = next(
        i for i, text in enumerate(SCRIPT.read_text().splitlines(), 1) if "MARK: sync" in text
    )
    row = next(r for r in result["syncs"] if r["line"] == line)
    assert row["per_step"] == 1 and row["every_step"]
    assert row["blocked_s_per_step"] is not None and row["blocked_s_per_step"] >= 0
    assert result["memory"]["kind"] == "cuda-allocator"
    assert "alloc_retries" in result["memory"]
