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
         first_s: float = 0.0, round_: int = 0) -> Run:  # fmt: skip
    """A run: ``start`` s to its first forward, ``steps`` steps of ``step_s`` (the first
    ``first_s`` longer: a compile), an evaluation of ``eval_s`` after the middle step."""
    ends, t = [], start
    for i in range(steps):
        t += step_s + (first_s if i == 0 else 0.0)
        ends.append(t)
        if i == steps // 2:
            t += eval_s
    return Run(side=side, round=round_, wall_s=t, start_s=0.5, exit_code=0,
               outcome="the script finished", first_forward_s=start, step_ends_s=tuple(ends),
               losses=(1.0,) * steps, samples=(16,) * steps)  # fmt: skip


def _outcome(plan: Plan) -> SimpleNamespace:
    base = SimpleNamespace(name="baseline", median_step_s=0.1, compile_seconds=None)
    return SimpleNamespace(
        confirm={"median": 2.0, "noise": [], "confirmed": True}, trials=[base], plan=plan
    )


SURVEY = SimpleNamespace(first_step_s=2.1, step_s=0.1)


def _as_written() -> tuple[Run, Run]:
    # 2 s of start-up, 100 steps of 0.1 s, and 8 s of evaluation the survey cannot see.
    return (
        _run("as written", start=2.0, steps=100, step_s=0.1, eval_s=8.0),
        _run("as written", start=2.0, steps=100, step_s=0.1, eval_s=8.4, round_=2),
    )


def test_the_time_outside_the_steps_counts_in_the_whole_run_figure() -> None:
    b1, b2 = _as_written()
    assert b1.in_steps_s == pytest.approx(10.0) and b1.outside_s == pytest.approx(10.0)
    outcome = _outcome(Plan())
    guessed = _whole_run(outcome, SURVEY, str(SCRIPT), ["--max-steps", "100"], 1000)
    assert guessed is not None and guessed["measured"] is False
    assert guessed["whole_run"] == pytest.approx(12 / 7)  # 2 + 10 against 2 + 5
    # The plan's steps twice as fast; its evaluation as long as the as-written runs'.
    plan = _run("with the plan", start=2.0, steps=100, step_s=0.05, eval_s=8.2, round_=1)
    got = _whole_run(
        outcome, SURVEY, str(SCRIPT), ["--max-steps", "100"], 1000, Measured((b1, b2), plan)
    )
    assert got is not None and got["measured"] is True and got["outside_slower"] is False
    wall = (20 * 20.4) ** 0.5
    assert got["whole_run"] == pytest.approx(wall / (10.2 + 5), rel=1e-6)  # about 20 / 15
    assert got["outside_s"] == pytest.approx(wall - 10) and got["steps"] == 100
    assert "10.2 s outside them" in got["text"] and "SLOWER" not in got["text"]
    assert got["one_pair"] == pytest.approx(wall / 15.2)


def test_a_plan_that_speeds_up_the_time_outside_the_steps_is_counted() -> None:
    # Loader workers feed the evaluation loader too (io_images: 2.08x stated from the
    # as-written time outside the steps, 3.02x measured): the plan's own run says how much.
    b1, b2 = _as_written()
    plan = _run("with the plan", start=2.0, steps=100, step_s=0.05, eval_s=2.0, round_=1)
    got = _whole_run(_outcome(Plan()), SURVEY, str(SCRIPT), [], 1000, Measured((b1, b2), plan))
    assert got is not None and got["whole_run"] == pytest.approx((20 * 20.4) ** 0.5 / (4 + 5))


def test_a_measured_compile_is_in_the_plans_time_outside_the_steps() -> None:
    b1, b2 = _as_written()
    outcome = _outcome(Plan(compile="default"))
    outcome.trials.append(SimpleNamespace(name="+ compile", median_step_s=0.05, compile_seconds=5))
    plan = _run("with the plan", start=2.0, steps=100, step_s=0.05, eval_s=8.2, first_s=5.0)
    got = _whole_run(outcome, SURVEY, str(SCRIPT), [], 1000, Measured((b1, b2), plan))
    assert got is not None and got["whole_run"] == pytest.approx((20 * 20.4) ** 0.5 / 20.2)


def test_a_plan_that_slows_the_time_outside_the_steps_says_so() -> None:
    plan = Plan(fast_math=True)
    assert process_wide(plan.techniques()) == ("tf32",)
    b1, b2 = _as_written()
    # Steps twice as fast, and the evaluation 1.75x as long (6 s more outside the steps).
    slow = _run("with the plan", start=2.0, steps=100, step_s=0.05, eval_s=14.0, round_=1)
    got = _whole_run(
        _outcome(plan), SURVEY, str(SCRIPT), [], 1000, Measured((b1, b2), slow, ("tf32",))
    )
    assert got is not None and got["outside_slower"] is True
    assert got["outside_ratio"] == pytest.approx(16 / ((20 * 20.4) ** 0.5 - 10), rel=1e-6)
    assert "SLOWER outside the steps" in got["text"] and "tf32 set the whole process" in got["text"]
    assert got["whole_run"] == pytest.approx((20 * 20.4) ** 0.5 / (16 + 10 / 2), rel=1e-6)
    # Within the as-written runs' own spread (8 and 8.4 s of evaluation): nothing to say.
    near = _run("with the plan", start=2.0, steps=100, step_s=0.05, eval_s=8.4, round_=1)
    got = _whole_run(
        _outcome(plan), SURVEY, str(SCRIPT), [], 1000, Measured((b1, b2), near, ("tf32",))
    )
    assert got is not None and got["outside_slower"] is False and "SLOWER" not in got["text"]


def test_a_plan_whose_whole_run_is_slower_says_so() -> None:
    # Steps twice as fast, but 30 s of evaluation where the script as written takes 8.
    b1, b2 = _as_written()
    slow = _run("with the plan", start=2.0, steps=100, step_s=0.05, eval_s=30.0, round_=1)
    got = _whole_run(_outcome(Plan()), SURVEY, str(SCRIPT), [], 1000, Measured((b1, b2), slow))
    assert got is not None and got["whole_run"] < 1 and got["slower"] is True
    assert "SLOWER than the script as written" in got["text"]
    fast = _run("with the plan", start=2.0, steps=100, step_s=0.05, eval_s=8.0, round_=1)
    got = _whole_run(_outcome(Plan()), SURVEY, str(SCRIPT), [], 1000, Measured((b1, b2), fast))
    assert got is not None and got["slower"] is False and "SLOWER" not in got["text"]


def _measure(
    tmp_path: Path,
    *,
    plan: Plan | None = None,
    script: Path = SCRIPT,
    args: tuple[str, ...] = (),
    expected_s: float = 5.0,
    expected_plan_s: float = 5.0,
    budget_s: float = 300.0,
    said: list[str] | None = None,
) -> tuple[Measured | None, str]:
    return measure(
        (plan or Plan()).to_dict(),
        script=str(script),
        args=list(args),
        cwd=str(tmp_path),
        device="cpu",
        workdir=tmp_path / "whole",
        expected_s=expected_s,
        expected_plan_s=expected_plan_s,
        budget_s=budget_s,
        always=False,
        say=(said if said is not None else []).append,
    )


def test_the_whole_run_is_measured_in_a_fresh_process(tmp_path: Path) -> None:
    said: list[str] = []
    # 30 steps sleeping 20 ms each, and 3 evaluations sleeping 300 ms: at least 0.9 s outside.
    args = ("--max-steps", "30", "--step-ms", "20", "--eval-ms", "300")
    measured, why = _measure(tmp_path, args=args, said=said)
    assert why == "" and measured is not None
    for run in (*measured.base, measured.plan):
        assert run.steps == 30 and run.in_steps_s >= 30 * 0.020
        assert run.outside_s >= 3 * 0.300
    assert [r.side for r in (measured.base[0], measured.plan, measured.base[1])] == [
        "as written",
        "with the plan",
        "as written",
    ]
    assert said and "--whole-run no" in said[0]
    assert (tmp_path / "whole" / "whole-2-with-the-plan.log").exists()


def test_whole_runs_longer_than_half_the_budget_are_not_run(tmp_path: Path) -> None:
    # 40 + 20 + 40 s: over half of 180 s
    measured, why = _measure(tmp_path, expected_s=40.0, expected_plan_s=20.0, budget_s=180.0)
    assert measured is None and "three whole runs" in why and "--whole-run yes" in why
    assert not (tmp_path / "whole").exists()


def test_a_failing_whole_run_gives_the_reason_and_its_log(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit('no data at ./data')\n")
    measured, why = _measure(tmp_path, script=bad, expected_s=1.0, expected_plan_s=1.0)
    assert measured is None and "no data at ./data" in why and ".log" in why


def test_the_tune_command_states_the_measured_whole_run_or_why_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The glue: what the command asks of ``measure`` and what it states from its answer (the
    runs themselves: test_the_whole_run_is_measured_in_a_fresh_process)."""
    import argparse

    from torchpace.tune import whole_run
    from torchpace.tune.command import _measure_whole

    outcome = _outcome(Plan())
    guessed = _whole_run(outcome, SURVEY, str(SCRIPT), ["--max-steps", "100"], 1000)
    assert guessed is not None
    asked: list[dict] = []
    b1, b2 = _as_written()
    plan_run = _run("with the plan", start=2.0, steps=100, step_s=0.05, eval_s=8.2, round_=1)

    def fake(plan: dict, **kw: object) -> tuple[Measured | None, str]:
        asked.append(kw)
        return (Measured((b1, b2), plan_run), "") if kw["always"] else (None, "too long")

    monkeypatch.setattr(whole_run, "measure", fake)

    def args(whole_run: str) -> argparse.Namespace:
        return argparse.Namespace(recipe=str(SCRIPT), script_args=["--max-steps", "100"],
                                  out=tmp_path, budget=60.0, whole_run=whole_run,
                                  run_steps=1000)  # fmt: skip

    plan = Plan().to_dict()
    work = tmp_path / "cache-work"
    got = _measure_whole(guessed, outcome, SURVEY, plan, args("yes"), str(tmp_path), "cpu", work)
    assert got["measured"] is True and got["steps"] == 100 and got["per_step"] == 2.0
    # 2 s of start-up and 100 steps of 0.1 s as written; 100 of 0.05 s with the plan
    assert asked[0]["expected_s"] == pytest.approx(12.0)
    assert asked[0]["expected_plan_s"] == pytest.approx(7.0)
    assert asked[0]["budget_s"] == 60.0 and asked[0]["workdir"] == work / "whole"
    short = _measure_whole(guessed, outcome, SURVEY, plan, args("auto"), str(tmp_path), "cpu", work)
    assert short["measured"] is False and short["not_measured"] == "too long"
    assert "(not measured whole: too long)" in short["text"]
