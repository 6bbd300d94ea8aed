"""Defects a second reviewer who wrote none of the twenty-eighth session's later lint changes
reproduced (issue 32), each a case of ``fixtures/session28_review2.json`` that failed on the
reviewed code (cb8da19)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lint_findings import findings, write_project

from torchpace.cli import main
from torchpace.lint.fixes import apply_fixes
from torchpace.script.edits import plan_edits
from torchpace.train.plan import Plan

CASES: dict[str, dict[str, str]] = json.loads(
    (Path(__file__).parent / "fixtures" / "session28_review2.json").read_text()
)


def _one_file(case: str) -> list[tuple[str, int]]:
    (source,) = CASES[case].values()
    return sorted((code, line) for code, line in findings(source))


def test_a_per_step_helper_in_eval_mode_under_no_grad_is_still_step_code() -> None:
    # a frozen teacher's logits and a VAE's encoding, each step: no loop of their own
    assert ("TP201", 9) in _one_file("distill_teacher")
    assert {("TP201", 9), ("TP201", 25)} <= set(_one_file("distill_teacher2"))
    assert ("TP207", 9) in _one_file("vae_encode_helper")
    assert ("TP201", 11) in _one_file("step_then_validate")


def test_a_databricks_cell_keeps_its_lines() -> None:
    assert ("TP201", 19) in _one_file("databricks_lines")


def _codes(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, path: str) -> set:
    write_project(tmp_path, CASES[case])
    main(["lint", str(tmp_path / path), "--format", "json"])
    return {(f["line"], f["code"]) for f in json.loads(capsys.readouterr().out)}


def test_options_come_only_from_what_the_options_call_itself_declares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # utils.py's load_config reads YAML; an export tool's parser beside it is not its options
    found = _codes(tmp_path, capsys, "options_wrong_parser", "train.py")
    assert {(9, "TP102"), (9, "TP104")} <= found and not any(c == "TP101" for _, c in found)


def test_options_imported_through_a_package_reexport_are_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (11, "TP101") in _codes(tmp_path, capsys, "options_reexport", "main.py")


def test_apply_never_edits_this_script_at_another_files_positions(tmp_path: Path) -> None:
    write_project(tmp_path, CASES["apply_other_file"])
    source = (tmp_path / "main_sched.py").read_bytes()
    fixes, notes = plan_edits(
        source, str(tmp_path / "main_sched.py"), Plan(loader_workers=4), device="cuda"
    )
    result = apply_fixes(source, fixes)
    assert b"step_size=3000" in result.source  # args.py's default sits at that line and column
    assert any("where it is set" in str(n) for n in notes)


def test_fix_applies_in_a_databricks_notebook_source_file(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(CASES["databricks_fix"]["orig.py"])
    main(["lint", str(path), "--fix", "--select", "TP301"])
    assert 'torch.amp.GradScaler("cuda")' in path.read_text()
