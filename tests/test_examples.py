"""The naive example scripts run as users run them, and their loss falls."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT, run_python

SCRIPTS = ("naive_cnn.py", "naive_lm.py", "naive_seqcls.py")


def _losses(out: str) -> list[float]:
    return [float(m) for m in re.findall(r"^step \d+ loss ([0-9.]+)", out, flags=re.M)]


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs_and_evaluates(script: str) -> None:
    # A small batch: the loop, the evaluation and the printing are what is checked, not the work.
    proc = run_python(
        str(ROOT / "examples" / script),
        *("--steps", "12", "--eval-every", "6", "--eval-batches", "1", "--batch-size", "8"),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^step 6 val_", proc.stdout, flags=re.M), proc.stdout
    assert "final loss" in proc.stdout
    assert len(_losses(proc.stdout)) == 2


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_example_loss_falls_over_200_steps(script: str) -> None:
    proc = run_python(str(ROOT / "examples" / script), "--steps", "200", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    losses = _losses(proc.stdout)
    assert len(losses) == 20
    assert sum(losses[-3:]) / 3 < 0.7 * losses[0], losses
