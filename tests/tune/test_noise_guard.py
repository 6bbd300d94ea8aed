"""The tune's noise guard (issue 29), on planted truths that hold on any machine: trial timings
are planted (a fake trial process reports the step times given here), and the load is real: a
CPU-bound process outside this process tree runs while the planted trial "runs", and the tune's
own load probe has to see it. Nothing here depends on how fast or busy this machine is, except
that another process planted beside a trial must show as load."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import cpu_hogs
from torchpace.measure.stats import summarize
from torchpace.tune import search
from torchpace.tune.candidates import Candidate
from torchpace.tune.noise import NOISY
from torchpace.tune.results import ResultsFile
from torchpace.tune.search import Outcome, Settings, tune
from torchpace.tune.trial import TrialResult, TrialSpec

FUSED = Candidate("fused optimizer", {"fused_optimizer": True}, ("fused-optimizer",))
LOSSES = tuple(1.0 - 0.01 * i for i in range(10))  # every trial trains alike: the guard passes
BATCH = 16


def _steady(ms: float) -> tuple[float, ...]:
    """Ten steps about ``ms`` long, spread 2% (IQR/median), as on a quiet machine."""
    return tuple(ms * (1 + d / 100) / 1e3 for d in (0, 1, -1, 0.5, -0.5, 1.5, -1.5, 0, 1, -1))


def _plant(
    monkeypatch: pytest.MonkeyPatch, step_ms: dict[str, list[float]], hogged: set[tuple[str, int]]
) -> list[str]:
    """Trials by name: the n-th run of a trial takes ``step_ms[name][n]`` (the last one again
    after that) a step; a (name, n) in ``hogged`` runs beside a CPU hog for 1.5 s. Returns the
    names run, in order."""
    ran: list[str] = []

    def fake(spec: TrialSpec, *, timeout_s: float, workdir: str | Path) -> TrialResult:
        name = spec.name
        if name not in step_ms and name.startswith("baseline"):
            name = "baseline"  # every run of the script as written, unless planted by name
        n = ran.count(spec.name)
        ran.append(spec.name)
        if (spec.name, n) in hogged:
            with cpu_hogs():
                time.sleep(1.5)
        ms = step_ms[name][min(n, len(step_ms[name]) - 1)]
        return _result(spec, ms, wall_seconds=0.1, applied=spec.techniques)

    monkeypatch.setattr(search, "run_trial", fake)
    monkeypatch.setattr(search, "CONFIRM_PAIRS", 1)
    return ran


def _result(
    spec: TrialSpec,
    ms: float,
    *,
    wall_seconds: float,
    batch_size: int | None = None,
    applied: tuple[str, ...] = (),
) -> TrialResult:
    """A planted trial of ``spec``: steady steps of about ``ms`` of the planted batch, which
    took ``wall_seconds`` of the budget."""
    times = _steady(ms)
    s = summarize(list(times))
    return TrialResult(
        key=spec.key(),
        name=spec.name,
        status="ok",
        step_seconds=times,
        median_step_s=s.median,
        q1_step_s=s.q1,
        q3_step_s=s.q3,
        samples_per_step=BATCH,
        samples_per_s=BATCH / s.median,
        batch_size=batch_size,
        losses=LOSSES,
        applied=applied,
        memory_kind="process-rss",
        wall_seconds=wall_seconds,
    )


def _tune(tmp_path: Path, progress: Any = lambda name, used: None) -> Outcome:
    settings = Settings(
        recipe=str(tmp_path / "train.py"),
        budget_s=60.0,
        steps=8,
        warmup=2,
        script_args=(),  # a script: no loader stage
        cwd=str(tmp_path),
    )
    return tune(
        settings,
        [FUSED],
        [],
        results=ResultsFile(tmp_path / "trials.jsonl"),
        workdir=tmp_path / "work",
        progress=progress,
    )


def _verdict(out: Outcome, name: str) -> str:
    (row,) = [r for r in out.rows if r.name == name]
    return row.verdict


TIMES = {
    "baseline": [100.0],
    "fused optimizer": [77.0],  # 1.3x faster
    "confirm baseline 1": [100.0],
    "confirm plan 1": [77.0],
    "confirm baseline 2": [100.0],
}


def test_a_technique_planted_1_3x_faster_is_kept_on_a_quiet_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The planted trials take no time: too short a window for a load to be read (LOAD_WINDOW_S),
    # so this machine's own load cannot enter; only the planted timings are judged.
    ran = _plant(monkeypatch, TIMES, set())
    out = _tune(tmp_path)
    assert out.noisy == []
    assert _verdict(out, "fused optimizer") == "kept alone"
    assert out.plan.fused_optimizer and out.confirm["median"] == pytest.approx(100 / 77)
    assert out.confirm["confirmed"]
    assert ran.count("fused optimizer") == 1


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="other processes' load needs /proc")
def test_a_hog_during_one_trial_makes_it_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first run of the technique's trial is planted 0.5x (a hog took the cores) and the hog
    # is real: the tune sees the load, runs the trial again, and judges the second run.
    ran = _plant(monkeypatch, {**TIMES, "fused optimizer": [200.0, 77.0]}, {("fused optimizer", 0)})
    out = _tune(tmp_path)
    assert ran.count("fused optimizer") == 2
    (first, second) = [t for t in out.trials if t.name == "fused optimizer"]
    assert first.extra["foreign_cores"] > 0.25
    verdict = _verdict(out, "fused optimizer")
    if verdict.startswith(NOISY):  # the machine stayed busy through the second run too
        assert second.extra["foreign_cores"] > 0.25 and "other processes used" in verdict
    else:
        assert verdict == "kept alone"  # never "slower": the loaded run is not judged


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="other processes' load needs /proc")
def test_a_hog_on_every_run_of_a_trial_is_noisy_never_a_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _plant(
        monkeypatch,
        {**TIMES, "fused optimizer": [200.0]},
        {("fused optimizer", 0), ("fused optimizer", 1)},
    )
    out = _tune(tmp_path)
    assert ran.count("fused optimizer") == 2
    verdict = _verdict(out, "fused optimizer")
    assert verdict.startswith(f"{NOISY}: other processes used ") and "change's trial" in verdict
    assert not out.plan.fused_optimizer and "fused optimizer" in out.noisy


def test_two_disagreeing_baselines_make_the_verdict_noisy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each trial is judged between the baselines run just before and just after it. Planted: the
    # machine slowed after the trial (100 ms before it, 130 ms after, each steady), then came
    # back for its second attempt (130 before, 100 after): a 115 ms trial is 0.87x against one
    # neighbour and 1.13x against the other, so no verdict is drawn either time.
    ran = _plant(
        monkeypatch,
        {**TIMES, "fused optimizer": [115.0], "baseline, after fused optimizer": [130.0, 100.0]},
        set(),
    )
    out = _tune(tmp_path)
    verdict = _verdict(out, "fused optimizer")
    assert verdict.startswith(f"{NOISY}: ") and "the two baselines' median steps differ 1.30x" in (
        verdict
    )
    assert not out.plan.fused_optimizer and out.confirm["ratios"] == []
    assert ran.count("fused optimizer") == 2  # run again once, with its own baseline after it
    assert ran.count("baseline, after fused optimizer") == 2


def test_each_trial_is_judged_against_the_baselines_next_to_it_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The diffusion script's seeds ran 1.97 and 2.76 ms a step on a quiet machine, and every
    # technique came out near 0.5x against the first. Planted: the machine is 1.4x slower from
    # the second baseline on, steadily; fused Adam is 1.3x faster than the script next to it.
    slow = 140.0
    ran = _plant(
        monkeypatch,
        {
            **TIMES,
            "baseline, seed 1": [slow],
            "fused optimizer": [slow / 1.3],
            "baseline, after fused optimizer": [slow],
            "confirm baseline 1": [slow],
            "confirm plan 1": [slow / 1.3],
            "confirm baseline 2": [slow],
        },
        set(),
    )
    out = _tune(tmp_path)
    # Against the first baseline alone it is 0.93x, "slower". Its neighbours (100 ms before,
    # 140 ms after) disagree, so it runs again between two 140 ms baselines: 1.3x, kept.
    assert _verdict(out, "fused optimizer") == "kept alone"
    (row,) = [r for r in out.rows if r.name == "fused optimizer"]
    assert row.speedup == pytest.approx(1.3)
    pair = out.pairs["fused optimizer"]
    assert pair.before.name == pair.after.name == "baseline, after fused optimizer"
    assert pair.before is not pair.after and pair.noise == [] and out.plan.fused_optimizer
    assert ran[:6] == [
        "baseline",
        "baseline, seed 1",
        "fused optimizer",
        "baseline, after fused optimizer",
        "fused optimizer",
        "baseline, after fused optimizer",
    ]


def test_a_gain_inside_the_scripts_own_process_noise_is_noisy_after_more_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A quiet machine, a script whose runs vary from one process to the next (a small GPT's
    # baselines ran 43-66 ms a step, each steady): a 5-15% gain is not a verdict. Planted: the
    # script as written at 100, 80, 120, 85 and 118 ms; fused Adam at 95 ms every run.
    ran = _plant(
        monkeypatch,
        {
            **TIMES,
            "baseline, seed 1": [80.0],
            "fused optimizer": [95.0],
            "baseline, after fused optimizer": [120.0, 85.0, 118.0],
        },
        set(),
    )
    out = _tune(tmp_path)
    verdict = _verdict(out, "fused optimizer")
    assert verdict.startswith(f"{NOISY}: the script as written varies ")
    assert "from one process to the next (5 runs of it)" in verdict
    assert not out.plan.fused_optimizer and "fused optimizer" in out.noisy
    assert ran.count("fused optimizer") == 3  # run again while unsettled, up to MAX_ATTEMPTS


def test_paired_rounds_on_both_sides_of_1_do_not_confirm_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plant(
        monkeypatch,
        {**TIMES, "confirm plan 2": [110.0], "confirm baseline 3": [100.0]},
        set(),
    )
    monkeypatch.setattr(search, "CONFIRM_PAIRS", 2)
    out = _tune(tmp_path)
    assert out.confirm["ratios"] == pytest.approx([100 / 77, 100 / 110])
    assert not out.confirm["confirmed"]  # the plan stays on its trials' verdicts, unconfirmed
    assert out.plan.fused_optimizer and "withdrawn" not in out.confirm


def test_a_clear_gain_beside_a_little_process_noise_is_kept_in_one_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _plant(
        monkeypatch,
        {
            **TIMES,
            "baseline, seed 1": [102.0],
            "baseline, after fused optimizer": [99.0],
        },
        set(),
    )
    out = _tune(tmp_path)
    assert _verdict(out, "fused optimizer") == "kept alone" and out.plan.fused_optimizer
    assert ran.count("fused optimizer") == 1


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="other processes' load needs /proc")
def test_a_loaded_confirmation_confirms_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plant(monkeypatch, TIMES, {("confirm plan 1", 0)})
    out = _tune(tmp_path)
    assert out.noisy == ["confirmation"] and out.confirm["noise"] and "confirmation" in out.noisy
    assert _verdict(out, "confirmation").startswith(NOISY)
    assert out.plan.fused_optimizer  # kept on its own trial's verdict; not withdrawn


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="other processes' load needs /proc")
def test_require_quiet_waits_for_a_hog_to_leave_and_is_bounded() -> None:
    # Planted: a CPU hog that ends after 2 s. The wait sees it, then the quiet machine after it
    # (unless this machine is busy of its own accord: then it gives up at its bound, as it must).
    from torchpace.measure.noise import MAX_FOREIGN_CORES, wait_for_quiet

    busy: list[float] = []
    spin = f"'{sys.executable}' -c 'import time; t = time.time()\nwhile time.time() - t < 2: pass'"
    subprocess.run(["sh", "-c", f"{spin} >/dev/null 2>&1 &"], check=True)
    t0 = time.monotonic()
    quiet, load = wait_for_quiet(8.0, window_s=1.0, say=lambda c, w: busy.append(c))
    waited = time.monotonic() - t0
    assert busy and busy[0] > MAX_FOREIGN_CORES  # it saw the hog
    if quiet:
        assert load is not None and load <= MAX_FOREIGN_CORES
    else:  # still busy at the bound: it stopped there
        assert waited < 8.0 + 2.0
    # A bound shorter than a window returns after one busy window.
    with cpu_hogs():
        t0 = time.monotonic()
        quiet, load = wait_for_quiet(0.1, window_s=0.5)
        assert not quiet and load is not None and load > MAX_FOREIGN_CORES
        assert time.monotonic() - t0 < 5.0


def test_require_quiet_is_a_tune_flag_that_says_when_the_machine_stayed_busy(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from torchpace.cli import build_parser
    from torchpace.measure import noise
    from torchpace.tune import command

    args = build_parser().parse_args(["tune", "--require-quiet", "cnn"])
    assert args.require_quiet and args.recipe == "cnn"

    def busy(limit: float, say: Any) -> tuple[bool, float]:  # a machine that stays busy
        say(1.9, 2.0)
        return False, 1.9

    monkeypatch.setattr(noise, "wait_for_quiet", busy)
    command._wait_for_quiet(300.0)
    err = capsys.readouterr().err
    assert (
        "other processes use 1.90 cores (over 0.25); waiting for a quiet machine (2 of 300" in err
    )
    assert "the machine stayed busy for 300 s (1.90 cores of other work); tuning anyway" in err


def test_the_progress_names_the_stage_the_trial_and_its_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plant(monkeypatch, TIMES, set())
    said: list[str] = []
    _tune(tmp_path, progress=lambda name, used: said.append(name))
    assert said == [
        "1/6 the baseline, two seeds: baseline (trial 1)",
        "1/6 the baseline, two seeds: baseline, seed 1 (trial 2)",
        "2/6 each technique alone: fused optimizer (trial 3)",
        "2/6 each technique alone: baseline, after fused optimizer (trial 4)",
        "6/6 the paired confirmation: confirm baseline 1 (trial 5)",
        "6/6 the paired confirmation: confirm plan 1 (trial 6)",
        "6/6 the paired confirmation: confirm baseline 2 (trial 7)",
    ]


def test_a_machine_speeding_up_through_the_confirmation_confirms_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The machine gets 10% faster from one confirmation run to the next; the plan is 2% slower
    # than the script as written would be at its time. Against the baseline before it alone it
    # read 1.09x, confirmed; between its two baselines (100 and 81 ms: 90) it is 0.98x.
    _plant(
        monkeypatch,
        {**TIMES, "confirm plan 1": [91.8], "confirm baseline 2": [81.0]},
        set(),
    )
    out = _tune(tmp_path)
    assert out.confirm["ratios"] == pytest.approx([90 / 91.8])
    assert not out.confirm["confirmed"]


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="other processes' load needs /proc")
def test_a_busy_machine_is_said_above_the_table_and_in_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 29: beside two CPU-bound processes a small GPT's tune spent its budget on the two
    # baselines and printed a table of "not run: out of budget" with nothing about the load.
    # Planted: a hog beside the first baseline; the command says so, and so does the plan.
    import json

    from torchpace.cli import build_parser
    from torchpace.tune import command, survey

    _plant(monkeypatch, TIMES, {("baseline", 0)})
    monkeypatch.setattr(
        survey, "survey", lambda *a, **kw: survey.Survey([], "doctor: no measured gain")
    )
    monkeypatch.setattr(
        "torchpace.tune.candidates.for_script", lambda base, device, findings: ([FUSED], [])
    )
    monkeypatch.setenv("TORCHPACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('a training script')\n")
    args = build_parser().parse_args(
        ["tune", "--budget", "1m", "--steps", "8", "--warmup", "2", "--out", "out", "train.py"]
    )
    args.script_args = []
    assert command.run(args) == 0
    err = capsys.readouterr().err
    assert "torchpace tune: the machine was busy: other processes used more than 0.25 cores" in err
    assert "during 1 of " in err and "(baseline)" in err
    plan = json.loads((tmp_path / "out" / "torchpace-plan.json").read_text())
    assert plan["noisy"]["loaded_trials"] == ["baseline"]
    assert next(iter(plan)) == "noisy"  # at the top, for whoever applies it
    from torchpace.train.plan import Plan

    assert Plan.load(tmp_path / "out" / "torchpace-plan.json").fused_optimizer  # still a plan
    result = json.loads((tmp_path / "out" / "torchpace-tune.json").read_text())
    assert result["loaded_trials"] == ["baseline"]


def test_run_and_apply_say_when_their_plan_was_tuned_on_a_noisy_machine(tmp_path: Path) -> None:
    import json

    from torchpace.train.plan import Plan

    path = tmp_path / "torchpace-plan.json"
    plan = {"noisy": {"verdicts_not_drawn": ["compile"], "loaded_trials": ["baseline"]}}
    path.write_text(json.dumps({**plan, **Plan.as_written().to_dict()}))
    assert Plan.load(path) == Plan.as_written()
    assert Plan.noise_note(path) == (
        f"{path} was tuned on a noisy machine (verdicts not drawn for compile; 1 trial(s) ran "
        "beside other work): it holds only what could be judged; tune again on a quiet "
        "machine for the rest"
    )
    path.write_text(json.dumps(Plan.as_written().to_dict()))
    assert Plan.noise_note(path) is None


def _slow_trial(spec: TrialSpec, wall_seconds: float) -> TrialResult:
    """A steady 100 ms trial of the planted batch that took ``wall_seconds`` of the budget."""
    return _result(spec, 100.0, wall_seconds=wall_seconds, batch_size=BATCH)


def test_a_batch_search_the_budget_never_reached_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Beside two CPU-bound processes a char model's tune spent its 3 minutes on four trials:
    # its table ended without a word on the batch size, which the quiet tune had kept.
    def fake(spec: TrialSpec, *, timeout_s: float, workdir: str | Path) -> TrialResult:
        return _slow_trial(spec, 20.0)  # each trial takes a third of the budget

    monkeypatch.setattr(search, "run_trial", fake)
    out = _tune(tmp_path)
    assert _verdict(out, "fused optimizer") == "not run: out of budget"
    assert _verdict(out, "batch size") == "not run: out of budget"
    assert "batch size" in out.skipped_for_budget


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="other processes' load needs /proc")
def test_rows_the_budget_never_reached_beside_load_are_noisy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Beside two CPU-bound processes a small GPT's 3 minutes went to its two baselines: the
    # rows it never reached are the load's doing, noise, not a plain "not run".
    calls: list[str] = []

    def slow(spec: TrialSpec, *, timeout_s: float, workdir: str | Path) -> TrialResult:
        calls.append(spec.name)
        if len(calls) == 1:
            with cpu_hogs():
                time.sleep(1.5)
        return _slow_trial(spec, 25.0)  # slowed by the load: two trials spend the budget

    monkeypatch.setattr(search, "run_trial", slow)
    out = _tune(tmp_path)
    assert calls == ["baseline", "baseline, seed 1"]
    verdict = _verdict(out, "fused optimizer")
    assert verdict == (
        f"{NOISY}: not run: the budget went to 1 trial(s) beside other processes' work"
    )
    assert "fused optimizer" in out.noisy


def test_a_trials_baseline_reads_the_same_speed_in_steps_and_in_samples() -> None:
    # The pooled speed-up of a technique (step times) is what a batch size's gain is later
    # divided by (samples/s): the baseline carrying it must say the same in both.
    from torchpace.tune.search import Pair, _at_median

    def trial(ms: float) -> TrialResult:
        return TrialResult(
            "k", "baseline", "ok", median_step_s=ms / 1e3, samples_per_step=BATCH,
            samples_per_s=BATCH / (ms / 1e3),
        )  # fmt: skip

    ref = Pair(trial(100.0), trial(121.0), []).reference
    assert ref.median_step_s == pytest.approx(0.110)
    assert ref.samples_per_s == pytest.approx(BATCH / 0.110)
    pooled = _at_median(ref, 0.125)
    assert pooled.samples_per_s == pytest.approx(BATCH / 0.125)


def test_a_tune_stopped_during_its_whole_runs_keeps_its_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole runs come after the search and may take half of --budget: the plan is written
    with its estimate before them, so a Ctrl-C there loses no finished search."""
    import json

    from torchpace.cli import build_parser
    from torchpace.tune import command, survey

    _plant(monkeypatch, TIMES, set())
    monkeypatch.setattr(survey, "survey", lambda *a, **kw: survey.Survey([], "surveyed", 2.1, 0.1))
    monkeypatch.setattr(
        "torchpace.tune.candidates.for_script", lambda base, device, findings: ([FUSED], [])
    )
    monkeypatch.setenv("TORCHPACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('a training script')\n")
    asked: list[dict] = []

    def interrupted(whole: dict, *a: object) -> dict:
        asked.append(whole)
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "_measure_whole", interrupted)
    args = build_parser().parse_args(
        ["tune", "--budget", "1m", "--steps", "8", "--warmup", "2", "--out", "out", "train.py"]
    )
    args.script_args = []
    with pytest.raises(KeyboardInterrupt):
        command.run(args)
    assert asked and asked[0]["measured"] is False
    plan = json.loads((tmp_path / "out" / "torchpace-plan.json").read_text())
    assert plan["fused_optimizer"] is True
    assert plan["expected"]["measured"] is False and plan["expected"]["whole_run"] > 1
