"""The tune's whole-run figure from whole runs of the script (issue 30): the time outside the
training steps (evaluation, generation) counts, and a plan that sets the whole process is judged
on its own time outside the steps. Planted runs for the arithmetic; planted sleeps in a real
script for the measurement, whose bounds hold on a loaded machine (a sleep is never shorter)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from torchpace.train.plan import Plan
from torchpace.tune.command import _whole_run
from torchpace.tune.whole_run import Measured, Run, measure, process_wide

SCRIPT = Path(__file__).parents[1] / "script" / "scripts" / "planted_whole_run.py"


def _run(side: str, *, start: float, steps: int, step_s: float, eval_s: float = 0.0,
         tail: float = 0.0, round_: int = 0) -> Run:  # fmt: skip
    """A run: ``start`` s to its first forward, ``steps`` steps of ``step_s``, an evaluation of
    ``eval_s`` after the middle step, ``tail`` s after the last step."""
    ends, t = [], start
    for i in range(steps):
        t += step_s
        ends.append(t)
        if i == steps // 2:
            t += eval_s
    return Run(side=side, round=round_, wall_s=t + tail, start_s=0.5, exit_code=0,
               outcome="the script finished", first_forward_s=start, step_ends_s=tuple(ends),
               losses=(1.0,) * steps, samples=(16,) * steps)  # fmt: skip


def _outcome(plan: Plan) -> SimpleNamespace:
    base = SimpleNamespace(name="baseline", median_step_s=0.1, compile_seconds=None)
    return SimpleNamespace(
        confirm={"median": 2.0, "noise": [], "confirmed": True}, trials=[base], plan=plan
    )


SURVEY = SimpleNamespace(first_step_s=2.1, step_s=0.1)


def test_the_time_outside_the_steps_counts_in_the_whole_run_figure() -> None:
    # 2 s of start-up, 100 steps of 0.1 s, and 8 s of evaluation the survey cannot see.
    as_written = _run("as written", start=2.0, steps=100, step_s=0.1, eval_s=8.0)
    assert as_written.in_steps_s == pytest.approx(10.0)
    assert as_written.outside_s == pytest.approx(10.0)
    outcome = _outcome(Plan())
    guessed = _whole_run(outcome, SURVEY, str(SCRIPT), ["--max-steps", "100"], 1000)
    assert guessed is not None and guessed["measured"] is False
    assert guessed["whole_run"] == pytest.approx(12 / 7)  # 2 + 10 against 2 + 5
    got = _whole_run(
        outcome, SURVEY, str(SCRIPT), ["--max-steps", "100"], 1000, Measured((as_written,))
    )
    assert got is not None and got["measured"] is True
    assert got["whole_run"] == pytest.approx(20 / 15)  # 10 + 10 against 10 + 5
    assert got["outside_s"] == pytest.approx(10.0) and got["steps"] == 100
    assert "10.0 s outside them" in got["text"] and "torchpace compare" not in got["text"]


def test_a_measured_compile_is_paid_once_on_top_of_the_time_outside() -> None:
    base = _run("as written", start=2.0, steps=100, step_s=0.1, eval_s=8.0)
    outcome = _outcome(Plan(compile="default"))
    outcome.trials.append(SimpleNamespace(name="+ compile", median_step_s=0.05, compile_seconds=5))
    got = _whole_run(outcome, SURVEY, str(SCRIPT), [], 1000, Measured((base,)))
    assert got is not None and got["whole_run"] == pytest.approx(20 / 20)


def test_a_process_wide_plan_that_slows_the_time_outside_the_steps_says_so() -> None:
    plan = Plan(fast_math=True)
    assert process_wide(plan.techniques()) == ("tf32",)
    b1 = _run("as written", start=2.0, steps=100, step_s=0.1, eval_s=8.0)
    b2 = _run("as written", start=2.0, steps=100, step_s=0.1, eval_s=8.4, round_=2)
    # Steps twice as fast, and the evaluation 1.5x as long (6 s more outside the steps).
    slow = _run("with the plan", start=2.0, steps=100, step_s=0.05, eval_s=14.0, round_=1)
    got = _whole_run(
        _outcome(plan), SURVEY, str(SCRIPT), [], 1000, Measured((b1, b2), slow, ("tf32",))
    )
    assert got is not None and got["outside_slower"] is True
    assert got["outside_ratio"] == pytest.approx(16 / ((20 * 20.4) ** 0.5 - 10), rel=1e-6)
    assert "SLOWER outside the steps" in got["text"] and "tf32" in got["text"]
    assert got["whole_run"] == pytest.approx((20 * 20.4) ** 0.5 / (16 + 10 / 2), rel=1e-6)
    # The same plan whose evaluation takes as long as the as-written runs': nothing to say.
    same = _run("with the plan", start=2.0, steps=100, step_s=0.05, eval_s=8.2, round_=1)
    got = _whole_run(
        _outcome(plan), SURVEY, str(SCRIPT), [], 1000, Measured((b1, b2), same, ("tf32",))
    )
    assert got is not None and got["outside_slower"] is False and "SLOWER" not in got["text"]


def test_the_whole_run_is_measured_in_a_fresh_process(tmp_path: Path) -> None:
    said: list[str] = []
    # 30 steps sleeping 20 ms each, and 3 evaluations sleeping 300 ms: at least 0.9 s outside.
    measured, why = measure(
        Plan().to_dict(),
        script=str(SCRIPT),
        args=["--max-steps", "30", "--step-ms", "20", "--eval-ms", "300"],
        cwd=str(tmp_path),
        device="cpu",
        workdir=tmp_path / "whole",
        expected_s=5.0,
        budget_s=300.0,
        always=False,
        say=said.append,
    )
    assert why == "" and measured is not None and measured.plan is None
    (run,) = measured.base
    assert run.steps == 30 and run.in_steps_s >= 30 * 0.020
    assert run.outside_s >= 3 * 0.300
    assert said and "--whole-run no" in said[0]
    assert (tmp_path / "whole" / "whole-1-as-written.log").exists()


def test_whole_runs_longer_than_a_third_of_the_budget_are_not_run(tmp_path: Path) -> None:
    measured, why = measure(
        Plan(fast_math=True).to_dict(),
        script=str(SCRIPT),
        args=[],
        cwd=str(tmp_path),
        device="cpu",
        workdir=tmp_path / "whole",
        expected_s=40.0,  # three runs: 120 s, over a third of 300 s
        budget_s=300.0,
        always=False,
        say=lambda m: None,
    )
    assert measured is None and "3 whole run(s)" in why and "--whole-run yes" in why
    assert not (tmp_path / "whole").exists()


def test_a_failing_whole_run_gives_the_reason_and_its_log(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit('no data at ./data')\n")
    measured, why = measure(
        Plan().to_dict(),
        script=str(bad),
        args=[],
        cwd=str(tmp_path),
        device="cpu",
        workdir=tmp_path / "whole",
        expected_s=1.0,
        budget_s=300.0,
        always=False,
        say=lambda m: None,
    )
    assert measured is None and "no data at ./data" in why and ".log" in why


def test_the_tune_command_states_the_measured_whole_run_or_why_not(tmp_path: Path) -> None:
    import argparse

    from torchpace.tune.command import _measure_whole

    outcome = _outcome(Plan())
    script_args = ["--max-steps", "30", "--step-ms", "20", "--eval-ms", "300"]
    guessed = _whole_run(outcome, SURVEY, str(SCRIPT), script_args, 1000)
    assert guessed is not None and guessed["measured"] is False

    def args(budget_s: float, whole_run: str = "auto") -> argparse.Namespace:
        return argparse.Namespace(recipe=str(SCRIPT), script_args=script_args, out=tmp_path,
                                  budget=budget_s, whole_run=whole_run, run_steps=1000)  # fmt: skip

    plan = Plan().to_dict()
    got = _measure_whole(guessed, outcome, SURVEY, plan, args(300.0), str(tmp_path), "cpu")
    assert got["measured"] is True and got["outside_s"] >= 0.9 and got["steps"] == 30
    # 2.1 s + 30 steps of 0.1 s is about 5 s: over a third of a 6 s budget, so not run...
    short = _measure_whole(guessed, outcome, SURVEY, plan, args(6.0), str(tmp_path), "cpu")
    assert short["measured"] is False and "not measured whole" in short["text"]
    # ... unless asked for.
    asked = _measure_whole(guessed, outcome, SURVEY, plan, args(6.0, "yes"), str(tmp_path), "cpu")
    assert asked["measured"] is True
