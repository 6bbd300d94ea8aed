"""The review of the twenty-seventh session's lint changes (issue 32): each case is a small file a
helper who wrote none of the changes built to reproduce a defect, and what lint must report on it
now (fixtures/session27_review.json). Each failed on the reviewed code (d358cc9): a stored
activation function taken for a model handed in; a batch loop's reads dropped as an update loop's;
reads taken as needed by OpenCV or SciPy through an index, ``self`` or a call after the loop; a
training loop read as evaluation for the validation batch it draws; FlashAttention's rotary helper
taken for a fused kernel; a graph net over a large graph taken as small; a one-epoch loop in a
function called in a sweep; a pickled gather of device tensors reported nowhere; a wrapper that
runs a method of the model it holds; a single visible device set only under a debug option; a
parameter a caller hands a tensor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lint_findings import write_project

from torchpace.cli import main

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "fixtures" / "session27_review.json").read_text()
)["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_review_case(
    case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_project(tmp_path, case["files"])
    (name,) = case["files"]  # one file each, linted by its path, as the reviewer ran it
    rc = main(["lint", str(tmp_path / name), "--select", case["select"], "--format", "json"])
    assert rc in (0, 1)
    found = json.loads(capsys.readouterr().out)
    where = sorted([Path(f["path"]).name, f["line"], f["code"]] for f in found)
    assert where == case["expected"]
