"""`torchpace tune` and `torchpace run` on scripts, from the command line: clear one-line errors
for what cannot be used, and `run` applying a plan to an unmodified script."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpace.cli import main
from torchpace.train.plan import Plan

SCRIPT = str(Path(__file__).parent / "scripts" / "planted.py")


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("torchpace: error: ") and "\n" not in err, err
    return err


def test_tune_on_a_file_that_is_neither_is_a_one_line_error(tmp_path, capsys):
    lib = tmp_path / "notarecipe.py"
    lib.write_text("def helper():\n    return 1\n")
    assert main(["tune", str(lib), "--out", str(tmp_path / "out")]) == 2
    assert "neither a recipe" in _one_line_error(capsys)
    assert not (tmp_path / "out").exists()


def test_tune_names_the_steps_it_needs_before_running_anything(tmp_path, capsys):
    assert main(["tune", SCRIPT, "--steps", "4", "--out", str(tmp_path / "o"), "--", "-x"]) == 2
    assert "--steps 5 or more" in _one_line_error(capsys)


def test_arguments_after_dashes_are_for_scripts_only(capsys):
    assert main(["tune", "cnn", "--", "--lr", "3"]) == 2
    assert "takes no arguments after --" in _one_line_error(capsys)


def test_run_applies_a_plan_to_the_unmodified_script_and_keeps_its_exit_code(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    Plan(fused_optimizer=True, grad_set_to_none=True, loader_workers=0).save(plan)
    assert main(["run", "--plan", str(plan), SCRIPT, "--", "--steps", "3"]) == 0
    out = capsys.readouterr()
    assert "trained 3 steps" in out.out
    err = out.err
    assert "torchpace run: training starts:" in err
    assert "applied  grad-set-to-none: SGD.zero_grad frees gradients (None)" in err
    assert "applied  fused-optimizer: SGD fused over" in err  # at its first step(), after start
    assert "torchpace run: the script finished" in err
    assert main(["run", "--plan", str(plan), SCRIPT, "--", "--crash-at", "2"]) == 1
    assert "RuntimeError: planted crash at step 2" in capsys.readouterr().err


def test_run_refuses_a_recipe_and_names_the_command_for_it(tmp_path, capsys):
    recipe = tmp_path / "r.py"
    recipe.write_text("model = dataset = loss = None\nbatch_size = 1\nlr = 0.1\n")
    plan = tmp_path / "plan.json"
    Plan().save(plan)
    assert main(["run", "--plan", str(plan), str(recipe)]) == 2
    assert "torchpace fit" in _one_line_error(capsys)


@pytest.mark.parametrize("bad", ['{"version": 1, "amp": "fp8"}', "not json"])
def test_run_with_a_bad_plan_names_the_problem(tmp_path, capsys, bad):
    plan = tmp_path / "plan.json"
    plan.write_text(bad)
    assert main(["run", "--plan", str(plan), SCRIPT]) == 2
    err = _one_line_error(capsys)
    assert str(plan) in err


def test_run_says_what_a_larger_batch_does_to_a_run_bounded_by_steps(tmp_path, capsys):
    # Issue 30: a doubled batch on a --max-steps script trained twice the data, unsaid.
    plan = tmp_path / "plan.json"
    Plan.as_written().replace(batch_size=32).save(plan)
    script = str(Path(__file__).parent / "scripts" / "planted_whole_run.py")
    args = ["--max-steps", "6", "--step-ms", "0"]
    assert main(["run", "--plan", str(plan), script, "--", *args]) == 0
    err = capsys.readouterr().err
    assert "work     the batch changes from 16 to 32: each step trains 2× the samples" in err
    assert "the script stops after --max-steps 6 steps" in err and "pass --max-steps 3" in err
