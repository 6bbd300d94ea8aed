"""Golden fixtures: every rule's findings equal the `# TPxxx` markers of its fixture."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchpace.catalog import ids
from torchpace.lint import RULES, FileResult, lint_source
from torchpace.lint.fixes import apply_fixes
from torchpace.lint.rule import DOC_HEADINGS

FIXTURES = Path(__file__).parent / "fixtures"
_MARKER = re.compile(r"#\s*(TP\d{3}(?:[ ,]+TP\d{3})*)\b")
CODES = [r.code for r in RULES]
FIXABLE = sorted(p.name.removesuffix(".in.py") for p in FIXTURES.glob("*.in.py"))


def _lint(path: Path) -> FileResult:
    result = lint_source(str(path), path.read_bytes(), RULES)
    assert isinstance(result, FileResult), result
    return result


def _markers(path: Path) -> set[tuple[int, str]]:
    marked = set()
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        match = _MARKER.search(line)
        if match:
            marked |= {(lineno, c) for c in re.split(r"[ ,]+", match.group(1))}
    return marked


@pytest.mark.parametrize("code", CODES)
def test_findings_match_markers(code: str) -> None:
    path = FIXTURES / f"{code}.py"
    found = {(f.location.line, f.code) for f in _lint(path).findings}
    assert found == _markers(path)
    assert "# OK" in path.read_text(), "each fixture needs tricky non-cases marked # OK"


@pytest.mark.parametrize("code", FIXABLE)
def test_fix_matches_golden_output_and_is_idempotent(code: str) -> None:
    source = (FIXTURES / f"{code}.in.py").read_bytes()
    expected = (FIXTURES / f"{code}.out.py").read_bytes()
    fixed = apply_fixes(source, _lint(FIXTURES / f"{code}.in.py").findings, unsafe=True)
    assert fixed.applied and not fixed.refused
    assert fixed.source == expected
    again = lint_source("out.py", fixed.source, RULES)
    assert isinstance(again, FileResult)
    assert apply_fixes(fixed.source, again.findings, unsafe=True).source == fixed.source


def test_codes_are_unique_and_well_formed() -> None:
    assert len(set(CODES)) == len(CODES)
    assert all(re.fullmatch(r"TP[1-6]\d\d", c) for c in CODES)
    assert len({r.name for r in RULES}) == len(RULES)


@pytest.mark.parametrize("rule", RULES, ids=CODES)
def test_rule_has_docs_fixture_and_technique(rule: object) -> None:
    from torchpace.lint.rule import Rule

    assert isinstance(rule, Rule)
    assert rule.technique in ids()
    headings = re.findall(r"^## (.+)$", rule.doc, flags=re.M)
    assert tuple(headings) == DOC_HEADINGS
    assert all(section.strip() for section in re.split(r"^## .+$", rule.doc, flags=re.M)[1:]), (
        "every doc section has text"
    )
    assert (FIXTURES / f"{rule.code}.py").is_file()
    assert rule.message and not rule.message.endswith(".")
