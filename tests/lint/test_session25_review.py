"""Defects a helper who wrote none of the twenty-fifth session's lint changes found in them,
each reproduced on the reviewed code, cb00f85 (fixtures in fixtures/session25_review.json, the
reviewer's case files): TP302's small-graph exemption taken on a text corpus named "pubmed", on a
file that may load a large graph, and missed on a loader named by its class; "amp" read as
mixed precision in ``amp_to_db``; TP203's mask names taken on slices and file-level bindings of
indices, on ``torch.where``'s and ``random.sample``'s indices, and missed on a bool-dtype tensor
and a list of device masks; an exportable autograd op with a backward skipped as an export
stub; an evaluation that steps a scheduler read as training; a name also bound to a chosen
device read as the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lint_findings import findings

CASES = json.loads((Path(__file__).parent / "fixtures" / "session25_review.json").read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_review_case(name: str) -> None:
    case = CASES[name]
    got = [line for code, line in findings(case["source"], case["code"])]
    assert got == case["lines"], case["why"]
