"""`torchpace lint examples/` reports the slow patterns planted in the naive scripts.

Each planted pattern lint can see is marked ``# SLOW(TPxxx)`` on the line the finding points at;
plain ``# SLOW`` marks what only measurement can find. The findings must equal the markers.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchpace.lint import RULES, FileResult, lint_source

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("naive_*.py"))
_MARKER = re.compile(r"#\s*SLOW\((TP\d{3}(?:,\s*TP\d{3})*)\)")


def _planted(path: Path) -> set[tuple[int, str]]:
    planted = set()
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        match = _MARKER.search(line)
        if match:
            planted |= {(lineno, code.strip()) for code in match.group(1).split(",")}
    return planted


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_lint_reports_the_planted_patterns_on_their_lines(path: Path) -> None:
    result = lint_source(str(path), path.read_bytes(), [r for r in RULES if r.default])
    assert isinstance(result, FileResult)
    found = {(f.location.line, f.code) for f in result.findings}
    assert _planted(path), "each naive example plants patterns lint can see"
    assert found == _planted(path)


def test_every_example_is_covered() -> None:
    assert {p.name for p in EXAMPLES} == {"naive_cnn.py", "naive_lm.py", "naive_seqcls.py"}
