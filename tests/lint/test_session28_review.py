"""Defects a reviewer who wrote none of the twenty-eighth session's lint changes reproduced
(issue 32), each a case of ``fixtures/session28_review.json`` that failed on the reviewed code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lint_findings import findings, write_project

from torchpace.cli import main

CASES: dict[str, dict[str, str]] = json.loads(
    (Path(__file__).parent / "fixtures" / "session28_review.json").read_text()
)


def _one_file(case: str, code: str) -> list[tuple[str, int]]:
    (source,) = CASES[case].values()
    return findings(source, code)


def _project(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> set[tuple]:
    write_project(tmp_path, CASES[case])
    main(["lint", str(tmp_path), "--format", "json"])
    found = json.loads(capsys.readouterr().out)
    root = tmp_path.resolve()
    return {
        (Path(f["path"]).resolve().relative_to(root).as_posix(), f["line"], f["code"])
        for f in found
    }


def test_a_device_loss_over_a_host_token_count_is_on_the_device() -> None:
    # a CPU scalar tensor combines with a CUDA one: the quotient is the device's
    assert _one_file("host_scalar_norm", "TP201") == [("TP201", 15)]


def test_a_split_is_read_in_the_scope_that_unpacks_it_whatever_the_functions_order() -> None:
    assert _one_file("tp101_split_scopes", "TP101") == [("TP101", 9)]  # of an ImageFolder
    assert _one_file("tp101_split_scopes_swapped", "TP101") == [("TP101", 15)]


def test_a_projects_own_add_scalar_that_keeps_the_tensor_is_no_writer() -> None:
    assert _one_file("tp201_own_logger", "TP201") == []


def test_soft_caps_as_methods_fft_imported_by_name_and_grad_disabled_decoding() -> None:
    assert _one_file("tp307_tanh_method", "TP307") == []
    assert _one_file("tp307_fft_import", "TP307") == []
    assert _one_file("tp307_softcap", "TP307") == [("TP307", 27)]  # a gate's tanh is no cap
    # ``torch.set_grad_enabled(False)`` turns autograd off as ``torch.no_grad()`` does
    assert _one_file("tp307_grad_disabled", "TP307") == [("TP307", 6)]


def test_only_the_loader_the_epoch_loop_iterates_is_reported_in_the_factory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = {f for f in _project(tmp_path, capsys, "tp104_tuple") if f[2] == "TP104"}
    assert found == {("data/factory.py", 6, "TP104")}  # not the memory bank's, returned beside it


def test_options_handed_to_the_factory_by_keyword_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert {f for f in _project(tmp_path, capsys, "tp104_keyword") if f[2] == "TP104"} == set()


def test_a_class_sets_cudnn_up_only_in_the_methods_the_file_runs_outside_an_if(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = {f for f in _project(tmp_path, capsys, "tp303_branch") if f[2] == "TP303"}
    assert found == {
        ("train.py", 12, "TP303"),  # make_reproducible() only under `if args.seed is not None:`
        ("train_nevercalled.py", 12, "TP303"),
        ("train_nobuild.py", 12, "TP303"),
    }


def test_a_deterministic_keyword_of_an_agents_method_chooses_nothing_for_cudnn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = {f for f in _project(tmp_path, capsys, "tp303_rl") if f[2] == "TP303"}
    assert found == {("train.py", 6, "TP303")}
