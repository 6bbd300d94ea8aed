"""A trial's time limit (issue 29): from the doctor's survey of the script, or --trial-timeout, and
a timeout's reason names the option. Planted: a script whose first step comes after a set-up
longer than the default limit (shrunk here from 180 s to 1 s, so the test takes seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchpace.cli import main
from torchpace.tune import search
from torchpace.tune.search import DEFAULT_TRIAL_TIMEOUT_S, trial_timeout

LATE = str(Path(__file__).parents[1] / "script" / "scripts" / "late_start.py")


def test_the_limit_is_three_times_the_surveyed_trial_and_never_below_the_default() -> None:
    assert trial_timeout(None, 0.1, warmup=3, steps=20) == DEFAULT_TRIAL_TIMEOUT_S
    assert trial_timeout(2.0, None, warmup=3, steps=20) == DEFAULT_TRIAL_TIMEOUT_S
    assert trial_timeout(1.0, 0.01, warmup=3, steps=20) == DEFAULT_TRIAL_TIMEOUT_S
    # nanoGPT's shakespeare config on a 2-core CPU: minutes before the first step, 5.5 s a step
    assert trial_timeout(240.0, 5.5, warmup=3, steps=20) == pytest.approx(3 * (240 + 23 * 5.5))


def _tune(tmp_path: Path, *options: str) -> tuple[int, str]:
    out = tmp_path / "out"
    argv = ["tune", LATE, "--budget", "1s", "--steps", "6", "--warmup", "2", "--out", str(out)]
    rc = main([*argv, *options, "--", "--late", "1"])
    return rc, out.as_posix()


def test_a_script_whose_first_step_comes_late_tunes_to_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(search, "DEFAULT_TRIAL_TIMEOUT_S", 1.0)  # under the 1 s set-up and imports
    monkeypatch.chdir(tmp_path)
    rc, out = _tune(tmp_path)
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "a trial should take about" in printed and "(--trial-timeout)" in printed
    result = json.loads((Path(out) / "torchpace-tune.json").read_text())
    assert result["settings"]["trial_timeout_s"] > 3 * 1.0  # the survey saw the late set-up
    assert {t["status"] for t in result["trials"]} == {"ok"}


def test_a_trial_past_the_asked_limit_names_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    rc, _ = _tune(tmp_path, "--trial-timeout", "1")
    said = capsys.readouterr()
    assert rc != 0
    text = " ".join((said.out + said.err).split())
    assert "the doctor took over 1 s" in text
    assert "the baseline trial timeout: no result after 1 s" in text
    assert "give trials more time with --trial-timeout SECONDS" in text
