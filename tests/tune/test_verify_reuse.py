"""`doctor --verify`'s trials are the tune's: a later `torchpace tune` of the same script and
arguments, at its defaults, recalls them from the same cache instead of running them again
(docs/doctor.md says so). Each side's settings are captured where it would start its search;
no trial runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from torchpace.cli import build_parser
from torchpace.train.plan import Plan
from torchpace.tune import search, survey
from torchpace.tune.search import Settings
from torchpace.tune.trial import TrialSpec


class _Captured(Exception):
    pass


def _capture(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Settings, Path]]:
    seen: list[tuple[Settings, Path]] = []

    def fake_tune(s: Settings, *a: Any, results: Any, **kw: Any) -> Any:
        seen.append((s, results.path))
        raise _Captured

    monkeypatch.setattr(search, "tune", fake_tune)
    return seen


def _first_baseline(s: Settings) -> str:
    """The key of the first trial either side runs: the script as written, seed 0."""
    return TrialSpec(
        name="baseline",
        recipe=s.recipe,
        plan=Plan.as_written().to_dict(),
        seed=s.seeds[0],
        warmup=s.warmup,
        steps=s.steps,
        device=s.device,
        memory_budget_bytes=s.memory_budget_bytes,
        args=s.script_args,
        cwd=s.cwd,
    ).key()


def test_a_tune_after_doctor_verify_recalls_its_trials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchpace.doctor.verify import verify
    from torchpace.tune import command

    script = tmp_path / "train.py"
    script.write_text("print('a training script')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCHPACE_CACHE_DIR", str(tmp_path / "cache"))
    seen = _capture(monkeypatch)
    from torchpace.findings import Applies, DoctorFinding

    finding = DoctorFinding("fused-optimizer", "m", "f", Applies(None, True), gain=0.2)
    # the doctor's defaults: --steps 30 (its own measurement), --warmup 3
    result = {"findings": [finding], "env": {"device": "cpu"}}
    with pytest.raises(_Captured):
        verify(result, "train.py", ["--epochs", "2"], budget_s=120.0, warmup=3)
    monkeypatch.setattr(
        survey, "survey", lambda *a, **kw: survey.Survey([finding], "surveyed", None, None)
    )
    args = build_parser().parse_args(["tune", "--out", str(tmp_path / "out"), "train.py"])
    args.script_args = ["--epochs", "2"]  # what the command line gives after "--"
    with pytest.raises(_Captured):
        command.run(args)
    (verified, verify_cache), (tuned, tune_cache) = seen
    assert verify_cache == tune_cache  # one cache file for the script and its arguments
    assert _first_baseline(verified) == _first_baseline(tuned)
    assert (verified.steps, verified.warmup, verified.device) == (tuned.steps, tuned.warmup, "cpu")


def test_the_survey_says_when_the_doctors_run_was_noisy(tmp_path: Path) -> None:
    # Beside other work the doctor withholds gains inside the step-time spread; "no measured
    # gain" alone read as a verdict on the script.
    import json

    out = tmp_path / "doctor.json"
    noise = {"noisy": True, "reason": "noisy: other processes used 1.90 cores"}
    out.write_text(json.dumps({"findings": [], "noise": noise}))
    got = survey.survey("train.py", [], out=out, steps=10, warmup=3, timeout_s=60.0)
    assert got.note == (
        "doctor: no measured gain (noisy: other processes used 1.90 cores: gains within the "
        "noise were withheld)"
    )
