"""Defects a reviewer who wrote none of the twenty-ninth session's lint changes reproduced
(issue 32), each a case of ``fixtures/session29_review.json`` linted as a project: every case
failed on the reviewed code (a6d2d1e), and each expectation is what lint at 531008a, before the
reviewed changes, also gave, or what the changes' own docs promise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lint_findings import findings, write_project

from torchpace.cli import main

CASES: dict[str, dict[str, str]] = json.loads(
    (Path(__file__).parent / "fixtures" / "session29_review.json").read_text()
)

# (file, notebook cell, line, code) of every finding of each case
EXPECTED: dict[str, set[tuple[str, int | None, int, str]]] = {
    # TP502: the accumulating backward of an if/else nested in another if (use_amp) is still
    # reported; only a branch whose statements after the backward step on every pass is not
    "tp502_nested_branches": {("tp502_nested_branches.py", None, 11, "TP502"),
                              ("tp502_nested_branches.py", None, 23, "TP502")},
    "tp502_flat_control": {("tp502_flat_control.py", None, 5, "TP302"),
                           ("tp502_flat_control.py", None, 8, "TP502")},
    # TP104's "every call passes 1": not through **config, not a parameter the body rebinds, not
    # in a file another one imports (main.py passes 100)
    "tp104_param_kwargs": {("tp104_param_kwargs.py", None, 8, "TP104")},
    "tp104_param_rebound": {("tp104_param_rebound.py", None, 7, "TP104")},
    "tp104_param_called_elsewhere": {("engine.py", None, 6, "TP104")},
    # TP101: a notebook that defines the class again, first reading files, then only indexing
    "tp101_expensive_then_cheap": {("tp101_expensive_then_cheap.ipynb", 2, 1, "TP101"),
                                   ("tp101_expensive_then_cheap.ipynb", 4, 1, "TP101"),
                                   ("tp101_expensive_then_cheap.ipynb", 5, 4, "TP302")},
    # a Trainer behind an option (args.cuda) is no GPU run; `"cpu" if not available else "gpu"`
    # is one
    "lightning_option_cuda": {("lightning_option_cuda.py", None, 5, "TP104")},
    # (train_model is called nowhere in the project: its TP302 is read on the file alone, below)
    # (on the GPU where there is one, the loader is unpinned too: TP102, since session 30's
    # Lightning reading in device.uses_cuda)
    "lightning_inverted_available": {
        ("lightning_inverted_available.py", None, 5, "TP104"),
        ("lightning_inverted_available.py", None, 5, "TP102"),
    },
    # the loader another file's loop iterates in an epoch loop that runs once: not re-iterated
    "vf_const1": {("datasets/dataloader.py", None, 9, "TP101"),
                  ("utils/train.py", None, 9, "TP302")},
    "vf_range1": {("datasets/dataloader.py", None, 9, "TP101"),
                  ("utils/train.py", None, 8, "TP302")},
    # a loader handed to a keyword-only parameter of the function that re-iterates it
    "vf_kwonly": {("datasets/dataloader.py", None, 6, "TP104"),
                  ("datasets/dataloader.py", None, 9, "TP101"),
                  ("utils/train.py", None, 8, "TP302")},
    # (its functions are called nowhere: read on the file alone, below)
    "lightning_max_epochs_name": set(),
    "vf_while": {("datasets/dataloader.py", None, 6, "TP104"),
                 ("datasets/dataloader.py", None, 9, "TP101"),
                 ("utils/train.py", None, 8, "TP302")},
    "single_file_const1": {("train.py", None, 14, "TP302")},
    # the loader of the name the fit's scope binds, not another function's single-pass loader
    "fit_name_other_function": set(),
    # a loader handed on under any name, not only one with "loader" in the script
    "tp104_reiterated_no_loader_word": {("datasets/data.py", None, 6, "TP104"),
                                        ("datasets/data.py", None, 9, "TP101"),
                                        ("utils/train.py", None, 8, "TP302")},
    "tp104_reiterated_no_loader_word_control": {("datasets/data.py", None, 6, "TP104"),
                                                ("datasets/data.py", None, 9, "TP101"),
                                                ("utils/train.py", None, 8, "TP302")},
    # built in eval mode through .to(device).eval(), and the inner blocks of such a Sequential
    "tp401_eval_variants": set(),
    # an evaluation pass over a loader with a sanity assert in it is still an evaluation pass
    "tp403_eval_with_sanity_assert": {("tp403_eval_with_sanity_assert.py", None, 9, "TP403")},
}  # fmt: skip


def test_every_case_has_an_expectation() -> None:
    assert set(EXPECTED) == set(CASES)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_reviewed_case(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    write_project(tmp_path, CASES[case])
    main(["lint", str(tmp_path), "--format", "json"])
    root = tmp_path.resolve()
    found = {
        (Path(f["path"]).resolve().relative_to(root).as_posix(), f["cell"], f["line"], f["code"])
        for f in json.loads(capsys.readouterr().out)
    }
    assert found == EXPECTED[case]


def test_a_trainer_is_on_the_gpu_where_torch_says_one_is_not_where_an_option_says() -> None:
    (inverted,) = CASES["lightning_inverted_available"].values()
    assert findings(inverted, "TP302") == [("TP302", 17)]
    (option,) = CASES["lightning_option_cuda"].values()
    assert findings(option, "TP302") == []


def test_a_trainer_run_for_a_name_bound_to_one_epoch_and_a_loader_built_in_the_fit() -> None:
    (source,) = CASES["lightning_max_epochs_name"].values()
    # max_epochs=EPOCHS with EPOCHS = 1: workers start once; fit(model, DataLoader(...)) for 50
    # epochs: restarted each one; a persistent loader: kept
    assert findings(source, "TP104") == [("TP104", 23)]
