"""Defects a helper who wrote none of the twenty-fourth session's lint changes found in them,
each reproduced on the reviewed code (fixtures in fixtures/session24_review.json, the reviewer's
case files): notebooks trained through Accelerate, Fabric or DeepSpeed, a model moved on
``self`` or under ``global``, a model handed to a trainer's parameter of another name, and names
a ``%run`` magic binds, all read as training on the host (TP201 silenced); a 0-dim device tensor
put through a mask (TP203); the string form of a 16-bit default tensor type (TP302)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lint_findings import findings, notebook_findings

CASES = json.loads((Path(__file__).parent / "fixtures" / "session24_review.json").read_text())
NOTEBOOKS = sorted(name for name, case in CASES.items() if "cells" in case)
SCRIPTS = sorted(name for name, case in CASES.items() if "source" in case)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_notebook_on_the_device_keeps_its_finding(name: str) -> None:
    case = CASES[name]
    assert case["code"] in [code for code, _, _ in notebook_findings(case["cells"])], case["why"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_review_script(name: str) -> None:
    case = CASES[name]
    reported = bool(findings(case["source"], case["code"]))
    assert reported == case["reported"], case["why"]
