"""Script trials on a script with planted truths: every loop shape is stepped, and each step's
loss is the one the script itself computed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from torchpace.runtime.steps import BACKWARD, OPTIMIZER
from torchpace.script import trial
from torchpace.train.plan import Plan
from torchpace.tune.trial import TrialSpec

SCRIPT = str(Path(__file__).parent / "scripts" / "planted.py")
AS_WRITTEN = Plan(grad_set_to_none=False).to_dict()


def _run(tmp_path: Path, *args: str, warmup: int = 2, steps: int = 6, seed: int = 0, plan=None):
    spec = TrialSpec(
        name="t",
        recipe=SCRIPT,
        plan=plan or AS_WRITTEN,
        seed=seed,
        warmup=warmup,
        steps=steps,
        args=tuple(args),
        cwd=str(tmp_path),
    )
    return trial.run(spec)


def _truth(path: Path) -> list[float]:
    return json.loads(path.read_text())


@pytest.mark.parametrize(
    "shape, args, mode",
    [
        ("optimizer steps", (), OPTIMIZER),
        ("gradient accumulation", ("--accumulate", "4"), OPTIMIZER),
        ("manual update, no optimizer", ("--manual",), BACKWARD),
        ("LBFGS closure", ("--lbfgs",), OPTIMIZER),
        ("evaluation inside the loop", ("--eval-every", "2"), OPTIMIZER),
    ],
)
def test_each_loop_shape_is_stepped_with_the_scripts_own_losses(tmp_path, shape, args, mode):
    losses = tmp_path / "losses.json"
    r = _run(tmp_path, *args, "--losses", str(losses))
    assert r.status == "ok", r.reason
    assert r.extra["step_mode"] == mode
    assert len(r.step_seconds) == 6
    truth = _truth(losses)
    # The script records a step after its update; the trial stops in the 8th step's hook, before
    # the script could write that one down.
    assert len(r.losses) == 8 and len(truth) >= 7
    assert r.losses[: len(truth)] == pytest.approx(truth[:8], rel=1e-5)
    per_step = 16 * (4 if "--accumulate" in args else 1)
    assert r.samples_per_step == per_step
    assert r.batch_size == 16


def test_the_trial_seeds_a_script_that_seeds_nothing_and_keeps_a_scripts_own_seed(tmp_path):
    a = _run(tmp_path, seed=0).losses
    assert _run(tmp_path, seed=0).losses == a  # the same start and data order
    assert _run(tmp_path, seed=1).losses != a
    own = _run(tmp_path, "--seed", "7", seed=0).losses
    assert _run(tmp_path, "--seed", "7", seed=1).losses == own


def test_a_crash_in_the_trial_is_a_failed_trial_with_the_scripts_error(tmp_path):
    r = _run(tmp_path, "--crash-at", "3")
    assert r.status == "failed"
    assert "RuntimeError: planted crash at step 3" in r.reason
    assert "after 3 of 8 steps" in r.reason


def test_a_script_that_ends_too_soon_says_which_option_to_change(tmp_path):
    r = _run(tmp_path, "--steps", "5")
    assert r.status == "failed"
    assert "after 5 of the 8 steps" in r.reason and "--steps" in r.reason


def test_a_script_that_never_trains_says_what_torchpace_looks_for(tmp_path):
    r = _run(tmp_path, "--no-train")
    assert r.status == "failed"
    assert "no backward() and no optimizer.step()" in r.reason


def test_a_plan_is_applied_and_recorded(tmp_path):
    plan = Plan(fused_optimizer=True, fold_conv_bias=True, grad_set_to_none=True).to_dict()
    r = _run(tmp_path, plan=plan)
    assert r.status == "ok", r.reason
    assert set(r.applied) == {"fused-optimizer", "grad-set-to-none"}
    # The planted forward branches on its input, which torch.fx cannot trace: said, not raised.
    assert "torch.fx could not trace" in r.extra["not_applied"]["conv-bias-before-bn"]
    assert r.extra["facts"]["optimizers"] == ["SGD"]
    assert r.extra["facts"]["has_conv_bias"] is True


def test_a_larger_batch_changes_the_training_loader_only_and_scales_the_lr(tmp_path):
    plan = Plan(grad_set_to_none=False, batch_size=32, lr_scaling="linear").to_dict()
    r = _run(tmp_path, plan=plan)
    assert r.status == "ok", r.reason
    assert r.batch_size == 32 and r.samples_per_step == 32
    assert "max-batch-size" in r.applied


def test_a_manual_lr_schedule_keeps_the_plans_lr_scaling(tmp_path):
    # nanoGPT sets param_group["lr"] itself every step: the LR scaled once at the optimizer's
    # construction was overwritten at the first step, and the larger batch trained at the
    # smaller batch's LR.
    lrs = tmp_path / "lrs.json"
    plan = Plan(grad_set_to_none=False, batch_size=32, lr_scaling="linear").to_dict()
    r = _run(tmp_path, "--manual-lr", "--lrs", str(lrs), plan=plan)
    assert r.status == "ok", r.reason
    seen = json.loads(lrs.read_text())
    assert len(seen) >= 6
    expected = [2 * 0.05 * (1 - k / 80) for k in range(len(seen))]  # x2: batch 16 -> 32
    assert seen == pytest.approx(expected)


def test_a_torch_schedulers_writes_are_not_scaled_twice() -> None:
    import torch

    from torchpace.script.interpose import ScaledGroup

    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    opt.param_groups[0]["lr"] = 0.2  # the factor 2, applied once at construction
    opt.param_groups[0] = ScaledGroup(opt.param_groups[0], 2.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5**e)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)  # initial 0.2 x 0.5, not x2 again
    opt.param_groups[0]["lr"] = 0.3  # the script's own write
    assert opt.param_groups[0]["lr"] == pytest.approx(0.6)


LENGTHS = str(Path(__file__).parent / "scripts" / "lengths.py")


def _lengths_trial(tmp_path: Path, plan: Plan, steps: int) -> tuple[Any, list[dict[str, Any]]]:
    out = tmp_path / f"seen-{plan.batching}.json"
    spec = TrialSpec(
        name="t",
        recipe=LENGTHS,
        plan=plan.to_dict(),
        seed=0,
        warmup=2,
        steps=steps,
        args=("--out", str(out)),
        cwd=str(tmp_path),
    )
    return trial.run(spec), json.loads(out.read_text())


def test_length_bucketing_replaces_the_shuffle_of_a_loader_whose_dataset_has_lengths(tmp_path):
    # Issue 15: the seqcls recipe's plan gained most of its speed from length bucketing, which the
    # script tune could not apply ("batches are the script's own").
    steps = 35  # 37 steps: three epochs of 12 batches are written, the 37th stops in opt.step()
    base, plain = _lengths_trial(tmp_path, Plan(grad_set_to_none=False), steps)
    assert base.status == "ok", base.reason
    (loader,) = base.extra["facts"]["loaders"]
    assert loader["length_max"] <= 63 and loader["length_p90"] <= loader["length_max"]
    r, bucketed = _lengths_trial(
        tmp_path, Plan(grad_set_to_none=False, batching="length-bucket"), steps
    )
    assert r.status == "ok", r.reason
    assert "length-bucketing" in r.applied
    mean = lambda rows: sum(x["padded"] for x in rows) / len(rows)  # noqa: E731
    assert mean(bucketed) < mean(plain) / 2
    by_epoch: dict[int, list[list[int]]] = {}
    for row in bucketed:
        by_epoch.setdefault(row["epoch"], []).append(row["batch"])
    assert len(by_epoch) == 3
    for batches in by_epoch.values():  # every sample once per epoch, BATCH to a batch
        assert sorted(i for b in batches for i in b) == list(range(48))
        assert {len(b) for b in batches} == {4}
    assert by_epoch[0] != by_epoch[1] != by_epoch[2]  # reshuffled every epoch


def test_length_bucketing_says_why_it_cannot_apply(tmp_path):
    r = _run(tmp_path, plan=Plan(grad_set_to_none=False, batching="length-bucket").to_dict())
    assert r.status == "ok", r.reason
    assert "has no `lengths`" in r.extra["not_applied"]["length-bucketing"]


def test_apply_writes_the_same_bucketing_that_run_interposes(tmp_path):
    # One mechanism both ways: the patched script's batches are the interposed trial's, batch for
    # batch, from the same seed (both draw the sampler's seed right after the loader is built).
    from torchpace.lint.fixes import apply_fixes
    from torchpace.script.edits import plan_edits

    plan = Plan(grad_set_to_none=False, batching="length-bucket")
    _, interposed = _lengths_trial(tmp_path, plan, steps=20)
    source = Path(LENGTHS).read_bytes()
    findings, notes = plan_edits(source, LENGTHS, plan)
    assert [f.technique for f in findings] == ["length-bucketing"] and notes == []
    patched = tmp_path / "patched.py"
    patched.write_bytes(apply_fixes(source, findings).source)
    out = tmp_path / "patched-seen.json"
    seed = (
        "import runpy, sys, torch, random; torch.manual_seed(0); random.seed(0); "
        # Three epochs of 12 batches: more than the 22 the trial saw, without the other 97.
        f"sys.argv = ['patched.py', '--out', {str(out)!r}, '--epochs', '3']; "
        f"runpy.run_path({str(patched)!r}, run_name='__main__')"
    )
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", seed], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(out.read_text())
    n = len(interposed)
    assert [r["batch"] for r in written[:n]] == [r["batch"] for r in interposed]
