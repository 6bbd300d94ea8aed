"""The doctor on a busy machine: it says noisy, and withholds the gains it cannot support."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import cpu_hogs
from torchpace.doctor import script
from torchpace.doctor.evidence import RuntimeFinding
from torchpace.doctor.noise import judge, withhold
from torchpace.doctor.terminal import render

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def _finding(gain: float | None) -> RuntimeFinding:
    return RuntimeFinding("float32-compute", "amp-bf16", "moderate", "m", "f", None, gain)


def test_gains_below_the_spread_of_a_noisy_run_are_withheld() -> None:
    noise = judge({"step_seconds": {"rel_iqr": 0.3}}, other_cores=1.2)
    assert noise["noisy"] and "other processes used 1.20 cores" in noise["reason"]
    small, large, none = withhold([_finding(0.1), _finding(0.5), _finding(None)], noise)
    assert small.gain is None and small.measured["withheld_gain"] == 0.1
    assert "below the step times' spread (30%" in small.measured["withheld_because"]
    assert large.gain == 0.5 and none.gain is None
    quiet = judge({"step_seconds": {"rel_iqr": 0.3}}, other_cores=0.1)
    assert not quiet["noisy"] and withhold([_finding(0.1)], quiet)[0].gain == 0.1
    assert judge({}, other_cores=None)["noisy"] is False  # no /proc: unknown, not noisy


def test_load_while_the_loaders_pace_is_measured_makes_the_run_noisy() -> None:
    # The pace is measured after the steps, and the input estimate reads it: a quiet steps
    # window with a loaded probe is noisy.
    noise = judge({"step_seconds": {"rel_iqr": 0.05}}, other_cores=0.1, probe_cores=0.9)
    assert noise["noisy"] and noise["other_cores"] == 0.1
    assert "0.90 cores" in noise["reason"] and "loader's pace" in noise["reason"]
    assert not judge({}, other_cores=0.1, probe_cores=0.1)["noisy"]
    assert not judge({}, other_cores=0.1, probe_cores=None)["noisy"]  # no probe ran


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="other processes' load needs /proc")
def test_a_run_beside_a_cpu_hog_says_noisy() -> None:
    # Issue 20: on a busy machine the same script gave different top findings with no warning.
    # The hogs are not our children (the shell that starts them exits): the doctor counts its
    # own process tree, DataLoader workers included, as its own work.
    with cpu_hogs(2):
        ran = script.run(str(SCRIPTS / "compute_only.py"), [], steps=12, warmup=2, lint=False)
    assert ran.result is not None
    noise = ran.result["noise"]
    assert noise["noisy"] and noise["other_cores"] > 0.5, noise
    assert "noisy: other processes used" in " ".join(_text(ran.result).split())


def _text(result: dict[str, Any]) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(render(result))
    return console.export_text()
