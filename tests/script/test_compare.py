"""``torchpace compare``: the whole run on both sides (issue 30).

The judgement is tested on planted runs (step ends and losses written by hand); the command end
to end on a planted script whose step time is a sleep, so a 10% slower step is 10% slower on any
machine, busy or not, and whose loss is a least-squares fit, so a worse learning rate ends higher
in every seed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchpace.runtime.work import step_flags
from torchpace.script.compare import (
    compare_runs,
    equal_samples_window,
    judge_loss,
    judge_times,
)
from torchpace.train.plan import Plan
from torchpace.tune.whole_run import Run, tail_for

HERE = Path(__file__).parent
PLANTED = HERE / "scripts" / "planted_whole_run.py"


def planted_run(
    *,
    side: str = "a",
    round_: int = 0,
    start: float = 2.0,
    step: float = 0.1,
    steps: int = 40,
    evals: dict[int, float] | None = None,
    after: float = 1.0,
    loss0: float = 1.0,
    decay: float = 0.95,
    batch: int = 16,
    load: float | None = 0.0,
) -> Run:
    """A run that starts training at ``start`` s, steps every ``step`` s, pauses ``evals[i]`` s
    after step i, and ends ``after`` s after its last step; its loss decays geometrically."""
    ends, t = [], start
    for i in range(1, steps + 1):
        t += step
        ends.append(t)
        t += (evals or {}).get(i, 0.0)
    return Run(
        side=side,
        round=round_,
        wall_s=ends[-1] + after,
        start_s=0.5,
        exit_code=0,
        outcome="the script finished",
        first_forward_s=start,
        step_ends_s=tuple(ends),
        losses=tuple(loss0 * decay**i for i in range(steps)),
        samples=(batch,) * steps,
        foreign_cores=load,
        batch_size=batch,
    )


def test_a_run_is_split_into_its_steps_and_what_is_outside_them() -> None:
    run = planted_run(start=2.0, step=0.1, steps=40, evals={10: 3.0, 20: 3.0}, after=1.0)
    assert run.median_step_s == pytest.approx(0.1)
    # Two evaluations of 3 s sit in two gaps: each counts one median step, the rest is outside.
    assert run.in_steps_s == pytest.approx(4.0)
    assert run.wall_s == pytest.approx(2.0 + 4.0 + 6.0 + 1.0)
    assert run.outside_s == pytest.approx(2.0 + 6.0 + 1.0)


def test_time_to_loss_uses_the_final_losses_window() -> None:
    run = planted_run(steps=40, decay=0.9)
    k = tail_for(40)
    assert k == 8
    final = run.final_loss
    assert final is not None
    # The run reaches its own final loss at its last step, never before.
    assert run.time_to_loss(final) == pytest.approx(run.step_ends_s[-1])
    # A loss the run passed earlier is reached earlier; one below its end never.
    assert run.time_to_loss(final * 2) < run.step_ends_s[-1]
    assert run.time_to_loss(final / 10) is None
    assert run.time_to_samples(16 * 10) == pytest.approx(run.step_ends_s[9])
    assert run.time_to_samples(16 * 41) is None


def test_a_slower_candidate_in_every_round_is_slower() -> None:
    got = judge_times("t", [1.0, 1.01, 0.99], [1.1, 1.11, 1.09], max_slowdown=0.05, loaded=False)
    assert got is not None and got.verdict == "slower"
    assert got.median == pytest.approx(1 / 1.1, rel=1e-3)


def test_a_slowdown_inside_the_rounds_spread_is_noisy_not_slower() -> None:
    # Median 10% slower, but one side's own rounds spread 30%: not a verdict.
    got = judge_times("t", [1.0, 1.3, 1.0], [1.1, 1.45, 1.1], max_slowdown=0.05, loaded=False)
    assert got is not None and got.verdict == "noisy"


def test_load_asks_for_twice_the_spread_but_never_makes_a_verdict_alone() -> None:
    base, cand = [1.0, 1.06, 1.0], [1.1, 1.166, 1.1]  # 10% slower, rounds spread 6%
    quiet = judge_times("t", base, cand, max_slowdown=0.05, loaded=False)
    loaded = judge_times("t", base, cand, max_slowdown=0.05, loaded=True)
    assert quiet is not None and quiet.verdict == "slower"
    assert loaded is not None and loaded.verdict == "noisy"
    # A tight sleep-bound measurement keeps its verdict beside other work.
    tight = judge_times("t", [1.0, 1.0], [1.1, 1.1], max_slowdown=0.05, loaded=True)
    assert tight is not None and tight.verdict == "slower"


def test_one_round_not_slower_makes_the_median_noisy() -> None:
    got = judge_times("t", [1.0, 1.0, 1.0], [1.2, 1.2, 1.0], max_slowdown=0.05, loaded=False)
    assert got is not None and got.verdict == "noisy"


def test_within_and_faster() -> None:
    within = judge_times("t", [1.0, 1.0], [1.02, 0.99], max_slowdown=0.05, loaded=False)
    faster = judge_times("t", [1.0, 1.0], [0.8, 0.81], max_slowdown=0.05, loaded=False)
    assert within is not None and within.verdict == "within"
    assert faster is not None and faster.verdict == "faster"


def test_loss_above_the_seed_band_fails_and_below_is_trained_lower() -> None:
    base = [planted_run(loss0=1.0, round_=i, decay=0.95 + 0.001 * i) for i in range(3)]
    same = judge_loss(base, [planted_run(loss0=1.0, decay=0.951)])
    worse = judge_loss(base, [planted_run(loss0=1.0, decay=0.99)])
    better = judge_loss(base, [planted_run(loss0=1.0, decay=0.8)])
    assert same.ok and not same.lower
    assert not worse.ok and "above the band" in worse.why
    assert better.ok and better.lower
    nan = planted_run()
    nan = Run(**{**nan.__dict__, "losses": (*nan.losses[:-1], float("nan"))})
    assert not judge_loss(base, [nan]).ok


def test_another_batch_is_judged_at_the_baselines_samples() -> None:
    # The baseline: 40 steps of 16 = 640 samples; the candidate: 40 steps of 32, the same loss
    # per sample seen. At 640 samples (its step 20) it is where the baseline ended.
    base = [planted_run(batch=16, decay=0.95, round_=i) for i in range(2)]
    cand = planted_run(batch=32, decay=0.95**2, steps=40)
    verdict = judge_loss(base, [cand])
    assert verdict.ok and not verdict.lower, verdict.why
    assert equal_samples_window([32] * 40, 640, 8 * 16) == [16, 17, 18, 19]
    assert equal_samples_window([32] * 10, 640, 128) == []


def test_a_plan_that_doubles_the_batch_of_a_step_bounded_script_says_so(tmp_path: Path) -> None:
    base = [planted_run(batch=16, round_=i) for i in range(3)]
    cand = [planted_run(batch=32, round_=i, step=0.15, decay=0.95**2) for i in range(2)]
    c = compare_runs(
        base, cand, base_name="as written", cand_name="plan", flags=[("--max-steps", 40)]
    )
    assert "the work changes" in c.work[0] and "batch 16 → 32" in c.work[0]
    assert "pass --max-steps 20" in c.work[1]
    # Per sample it is faster (0.15 s for 32 against 0.1 s for 16); steps are not compared.
    assert c.ratios["time per sample"].verdict == "faster"
    assert "time per step" not in c.ratios
    assert c.ratios["whole run"].verdict in ("other work", "noisy")
    assert c.ratios["time to the baseline's samples"].median > 1
    assert not c.regressed


def _drifting(n: int, rate: float, **kw: object) -> list[Run]:
    """The same run n times, in the order A B A B ... A, on a machine that gets ``rate`` faster
    from one run to the next (a tune's processes ending, a neighbour leaving)."""
    runs = [planted_run(start=2.0 * (1 - rate) ** i, step=0.1 * (1 - rate) ** i,
                        after=1.0 * (1 - rate) ** i, **kw) for i in range(n)]  # type: ignore[arg-type]  # fmt: skip
    return runs


def test_a_machine_that_speeds_up_steadily_does_not_make_an_a_a_comparison_faster() -> None:
    # Three A/A comparisons right after a tune read 1.06-1.09x "faster" by the median: the
    # machine sped up about 3% from one run to the next, and ABBA over 3 rounds put the
    # candidate later in 2 of them. Each candidate run between two baseline runs cancels it.
    runs = _drifting(7, 0.03)
    base, cand = runs[0::2], runs[1::2]  # A B A B A B A
    c = compare_runs(base, cand, base_name="as written", cand_name="as written again")
    for name in ("whole run", "training steps", "time per step"):
        assert c.ratios[name].median == pytest.approx(1.0, abs=0.002), name
        assert c.ratios[name].verdict == "within", name
    # The same runs judged against the baseline before each alone read 3% faster every round.
    assert base[0].wall_s / cand[0].wall_s == pytest.approx(1 / 0.97, rel=1e-3)
    with pytest.raises(ValueError, match="one baseline run more than rounds"):
        compare_runs(base[:3], cand, base_name="a", cand_name="b")


def test_step_flags_are_read_from_the_scripts_argparse(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import argparse\np = argparse.ArgumentParser()\n"
        "p.add_argument('--max_iters', type=int, default=600)\n"
        "p.add_argument('--lr', type=float, default=0.1)\n"
        "p.add_argument('-n', '--num-steps', type=int)\n"
        "p.add_argument('--steps-per-epoch', type=int, default=3)\n"
    )
    assert step_flags(script) == [("--max_iters", 600), ("--num-steps", None)]
    assert step_flags(PLANTED) == [("--max-steps", 30)]


# -- end to end ---------------------------------------------------------------------------------
def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text(PLANTED.read_text())
    _git(repo, "init", "-q")
    _git(repo, "add", "train.py")
    _git(repo, "commit", "-qm", "planted")
    return repo


def _compare(repo: Path, *extra: str) -> tuple[int, dict, str]:
    out = repo.parent / "compare.json"
    proc = subprocess.run(
        [sys.executable, "-m", "torchpace", "compare", "train.py", "--against", "HEAD",
         "--rounds", "2", "--json", str(out), *extra, "--", "--max-steps", "20"],
        cwd=repo, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads(out.read_text()), proc.stdout


# Measures time: `make test` runs it alone, never beside another test (pytest -m serial).
@pytest.mark.serial
def test_gate_fails_on_a_step_planted_10_percent_slower(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    script = repo / "train.py"
    script.write_text(script.read_text().replace("STEP_MS = 20.0", "STEP_MS = 22.0"))
    rc, doc, text = _compare(repo, "--format", "github")
    assert rc == 1, text
    assert doc["ratios"]["time per step"]["verdict"] == "slower"
    assert doc["loss"]["ok"]  # the same training, slower
    assert "::error title=torchpace compare::time per step" in text
    # The reference ran from a worktree that is gone again; the user's tree is untouched.
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True)
    assert len(listed.stdout.strip().splitlines()) == 1
    assert "STEP_MS = 22.0" in script.read_text()


def test_gate_fails_on_a_worse_learning_rate(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    script = repo / "train.py"
    script.write_text(script.read_text().replace("LR = 0.05", "LR = 0.005"))
    rc, doc, text = _compare(repo)
    assert rc == 1, text
    assert not doc["loss"]["ok"] and "above the band" in doc["loss"]["why"]
    assert doc["ratios"]["time per step"]["verdict"] != "slower"
    assert "REGRESSED" in text


def test_bad_input_is_refused_with_what_to_change(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "torchpace", "compare", "train.py", "--against", "no-such-ref"],
        cwd=repo, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "no-such-ref" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "torchpace", "compare", "train.py", "--plan", "p.json",
         "--rounds", "1"],
        cwd=repo, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "at least 2" in proc.stderr


def test_a_compare_result_renders_in_the_report(tmp_path: Path) -> None:
    from torchpace.cli import main
    from torchpace.report.load import COMPARE_SCHEMA
    from torchpace.script.compare import SCHEMA

    assert SCHEMA == COMPARE_SCHEMA
    base = [planted_run(side="as written", round_=i) for i in range(3)]
    cand = [planted_run(side="with the plan", round_=i, step=0.08) for i in range(2)]
    c = compare_runs(base, cand, base_name="as written", cand_name="with the plan")
    assert c.ratios["time per step"].verdict == "faster" and not c.regressed
    path = tmp_path / "compare.json"
    doc = c.to_json(script="train.py", args=["--max-steps", "40"], plan="p.json", against=None)
    path.write_text(json.dumps(doc, allow_nan=False))
    html = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(html), "--quiet"]) == 0
    page = html.read_text()
    assert 'id="compare-loss"' in page and "<svg" in page and "time per step" in page


def test_the_work_note_reads_the_step_option_from_the_command_line_first() -> None:
    from torchpace.runtime.work import batch_work_note

    flags = [("--max-steps", 300)]
    assert batch_work_note(flags, [], 64, 64) is None
    assert "pass --max-steps 150" in (batch_work_note(flags, [], 64, 128) or "")
    assert "pass --max-steps 50" in (batch_work_note(flags, ["--max-steps", "100"], 64, 128) or "")
    assert "pass --max-steps=25" in (batch_work_note(flags, ["--max-steps=50"], 64, 128) or "")
    assert "scale --iters by 0.5" in (batch_work_note([("--iters", None)], [], 64, 128) or "")
    unbounded = batch_work_note([], [], 64, 128) or ""
    assert "2× the samples" in unbounded and "torchpace compare" in unbounded


def test_the_tunes_whole_run_estimate_is_amdahl_over_its_start_up_and_steps(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from torchpace.runtime.work import whole_run_effect
    from torchpace.tune.command import _whole_run

    # 10 s of start-up, 100 steps of 0.1 s made 2x faster: 20 s -> 15 s.
    assert whole_run_effect(startup_s=10, step_s=0.1, steps=100, per_step=2.0) == pytest.approx(
        20 / 15
    )
    # 5 s of compile on top: 20 s -> 20 s.
    assert whole_run_effect(
        startup_s=10, step_s=0.1, steps=100, per_step=2.0, compile_s=5
    ) == pytest.approx(1.0)
    base = SimpleNamespace(name="baseline", median_step_s=0.1, compile_seconds=None)
    plan = SimpleNamespace(name="confirm plan 1", median_step_s=0.05, compile_seconds=None)
    confirmed = {"median": 2.0, "noise": [], "confirmed": True}
    eager = Plan()
    outcome = SimpleNamespace(confirm=confirmed, trials=[base, plan], plan=eager)
    surveyed = SimpleNamespace(first_step_s=10.1, step_s=0.1)
    got = _whole_run(outcome, surveyed, str(PLANTED), ["--max-steps", "100"], 1000)
    assert got is not None and got["steps"] == 100 and got["steps_from"] == "--max-steps 100"
    assert got["whole_run"] == pytest.approx(20 / 15) and "torchpace compare" in got["text"]
    # Without a step option in the arguments the script's default (30) is the run.
    assert _whole_run(outcome, surveyed, str(PLANTED), [], 1000)["steps"] == 30  # type: ignore[index]
    # A noisy confirmation gives no estimate.
    noisy = SimpleNamespace(
        confirm={"median": 2.0, "ratios": [2.0], "noise": ["loaded"], "confirmed": False},
        trials=[base, plan],
        plan=eager,
    )
    assert _whole_run(noisy, surveyed, str(PLANTED), [], 1000) is None
    # No confirmation ran (the budget ran out first: io_images' tune kept loader workers at
    # 1.19x and wrote no whole-run effect): the trials' gain, said to be unconfirmed.
    unconfirmed = SimpleNamespace(
        confirm={"ratios": []}, trials=[base, plan], plan_gain=2.0, plan=eager
    )
    got = _whole_run(unconfirmed, surveyed, str(PLANTED), ["--max-steps", "100"], 1000)
    assert got is not None and got["confirmed"] is False
    assert got["whole_run"] == pytest.approx(20 / 15) and "paired confirmation" in got["text"]
    as_written = SimpleNamespace(confirm={}, trials=[base], plan_gain=None, plan=eager)
    assert _whole_run(as_written, surveyed, str(PLANTED), [], 1000) is None
    # A compiled plan pays its compile once: the confirmation's plan trial's, else the compiled
    # trials' (io_images kept compile unconfirmed and its estimate counted 0 s: 4.66x stated,
    # 2.22x measured).
    compiled = Plan(compile="default")
    trial = SimpleNamespace(name="+ compile", median_step_s=0.05, compile_seconds=5.0)
    kept = SimpleNamespace(
        confirm={"ratios": []}, trials=[base, trial], plan_gain=2.0, plan=compiled
    )
    got = _whole_run(kept, surveyed, str(PLANTED), ["--max-steps", "100"], 1000)
    assert got is not None and got["compile_s"] == 5.0 and got["whole_run"] == pytest.approx(1.0)
    plan.compile_seconds = 3.0  # the confirmation's plan trial, when it ran, is the figure
    confirmed_compile = SimpleNamespace(
        confirm=confirmed, trials=[base, trial, plan], plan=compiled
    )
    got = _whole_run(confirmed_compile, surveyed, str(PLANTED), ["--max-steps", "100"], 1000)
    assert got is not None and got["compile_s"] == 3.0
    # Rounds on both sides of 1 confirm nothing either: no whole-run figure from their median.
    split = {"median": 1.05, "ratios": [0.8, 1.3], "noise": [], "confirmed": False}
    assert (
        _whole_run(
            SimpleNamespace(confirm=split, trials=[base, plan]), surveyed, str(PLANTED), [], 1000
        )
        is None
    )


def test_a_step_option_given_on_the_command_line_counts_without_add_argument() -> None:
    """Config systems take options no add_argument declares: minGPT's
    ``--trainer.max_iters=1001`` and nanoGPT's configurator's ``--max_iters=120`` (the corpus's
    command lines). The note names the option as the command line writes it."""
    from torchpace.runtime.work import batch_work_note, step_flags

    mingpt = ["--trainer.max_iters=1001", "--trainer.batch_size=64"]
    flags = step_flags(PLANTED, mingpt)
    assert flags == [("--max-steps", 30), ("--trainer.max_iters", None)]
    note = batch_work_note(flags[1:], mingpt, 64, 128) or ""
    assert "--trainer.max_iters=1001 steps" in note and "pass --trainer.max_iters=500" in note
    nanogpt = ["config/train_shakespeare_char.py", "--max_iters=120", "--eval_iters=5",
               "--lr_decay_iters=120", "--warmup_iters=10"]  # fmt: skip
    assert step_flags(PLANTED, nanogpt)[1:] == [("--max_iters", None)]
    # declared ones are not counted twice
    assert step_flags(PLANTED, ["--max-steps", "100"]) == [("--max-steps", 30)]


def test_runs_whose_work_follows_their_seed_are_the_same_work() -> None:
    """pytorch/examples' regression stops on its loss: each seed trains its own number of steps
    (830, 287, 396, 252 in one compare). Round i of each side draws the same seed, so an A/A
    comparison trains the same work in each round, whatever the medians over the sides say."""
    from torchpace.script.compare import work_notes

    steps = [830, 287, 396, 252]  # the baseline's last run is the spare, with a seed of its own
    base = [planted_run(side="a", round_=i, steps=n) for i, n in enumerate(steps)]
    cand = [planted_run(side="b", round_=i, steps=n) for i, n in enumerate(steps[:3])]
    assert work_notes(base, cand, []) == []
    bigger = [planted_run(side="b", round_=i, steps=n, batch=32) for i, n in enumerate(steps[:3])]
    notes = work_notes(base, bigger, [])
    assert notes and "the work changes" in notes[0] and "batch 16 → 32" in notes[0]
