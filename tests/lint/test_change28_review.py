"""Defects a helper who wrote none of the twenty-third session's lint changes found in them,
each reproduced on the reviewed code (fixtures in fixtures/change28_review.json, the reviewer's
case files): a loader rebuilt every epoch inside a per-split loop (TP104), a norm after an `if`
read as following the conv inside it, a name resolved across functions or loop targets (TP401),
a literal list bound in the step read as per-step data (TP207)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lint_findings import findings

from torchpace.lint import RULES, FileResult, lint_source

CASES = json.loads((Path(__file__).parent / "fixtures" / "change28_review.json").read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_review_case(name: str) -> None:
    case = CASES[name]
    got = [line for code, line in findings(case["source"], case["code"])]
    assert got == case["lines"], case["why"]


def test_a_named_conv_appended_before_its_norm_gets_no_fix() -> None:
    case = CASES["tp401_named_append.py"]
    result = lint_source("vgg.py", case["source"].encode(), RULES)
    assert isinstance(result, FileResult)
    assert [f.fix for f in result.findings if f.code == "TP401"] == [None]
