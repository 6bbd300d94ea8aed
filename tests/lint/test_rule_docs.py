"""docs/rules.md is generated from the rule registry and up to date; the pre-commit hook works."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT
from torchpace.cli import build_parser, main
from torchpace.lint import RULES
from torchpace.lint.docs import render_markdown, render_rule
from torchpace.lint.rule import Rule

DOCS = ROOT / "docs" / "rules.md"


def test_docs_rules_md_is_up_to_date() -> None:
    actual = DOCS.read_text(encoding="utf-8") if DOCS.exists() else ""
    assert actual == render_markdown(RULES), (
        "docs/rules.md is stale or missing: run `make docs` "
        "(torchpace rules --write-docs docs/rules.md) and commit the result"
    )


def test_render_has_every_rule_and_says_how_to_select_off_rules() -> None:
    text = render_markdown(RULES)
    assert text == render_markdown(RULES)
    assert "torchpace rules --write-docs docs/rules.md" in text and "make docs" in text
    assert "a prefix such as `TP6` or `TP` never turns them on" in text
    for rule in RULES:
        assert f'<a id="{rule.code.lower()}"></a>\n\n## {rule.code} {rule.name}\n' in text
        assert f"](#{rule.code.lower()})" in text
        assert f"](techniques.md#{rule.technique})" in text
        # The rule's own sections sit one level below its heading.
        assert "\n### What it does\n" in text


def test_one_rule_section() -> None:
    rule = Rule(
        "TP999",
        "slow-thing",
        "A slow thing happens",
        "tf32",
        "## What it does\nFlags it.\n\n## Example\n```python\n## not a heading\nx = 1\n```\n",
        lambda ctx: iter(()),
        default=False,
        level="info",
    )
    assert render_rule(rule) == (
        "# TP999 slow-thing\n\n"
        "- **Message:** A slow thing happens.\n"
        "- **Technique:** tf32\n"
        "- **Enabled by default:** no (select `TP999` to run it)\n"
        "- **Level:** info\n\n"
        "## What it does\nFlags it.\n\n## Example\n```python\n## not a heading\nx = 1\n```\n"
    )
    section = render_markdown([rule]).split('<a id="tp999"></a>\n\n', 1)[1]
    assert section == (
        "## TP999 slow-thing\n\n"
        "- **Message:** A slow thing happens.\n"
        "- **Technique:** [`tf32`](techniques.md#tf32)\n"
        "- **Enabled by default:** no (select `TP999` to run it)\n"
        "- **Level:** info\n\n"
        "### What it does\nFlags it.\n\n### Example\n```python\n## not a heading\nx = 1\n```\n"
    )


def test_write_docs_writes_the_rendering(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "docs" / "rules.md"
    assert main(["rules", "--write-docs", str(target)]) == 0
    assert capsys.readouterr().out == f"wrote {target}\n"
    assert target.read_text(encoding="utf-8") == render_markdown(RULES)
    assert [p.name for p in target.parent.iterdir()] == ["rules.md"]  # no temporary left behind


def _hooks(text: str) -> list[dict[str, str]]:
    """The flat ``- key: value`` entries of a pre-commit hooks file (no YAML library needed)."""
    hooks: list[dict[str, str]] = []
    for line in text.splitlines():
        match = re.fullmatch(r"(- |  )(\w+): (.*)", line)
        if match is None:
            assert line.strip()[:1] in ("", "#"), f"unexpected line {line!r}"
            continue
        if match.group(1) == "- ":
            hooks.append({})
        hooks[-1][match.group(2)] = match.group(3)
    return hooks


def test_pre_commit_hook_runs_a_real_subcommand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [hook] = _hooks((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "torchpace-lint"
    assert hook["language"] == "python"
    assert hook["types_or"] == "[python, jupyter]"
    program, *args = hook["entry"].split()
    assert program == "torchpace"  # the console script of pyproject.toml
    assert 'torchpace = "torchpace.cli:main"' in (ROOT / "pyproject.toml").read_text()
    subcommands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert args == ["lint"] and "lint" in subcommands
    # pre-commit appends the staged file names to the entry.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("x = 1\n")
    assert main([*args, "a.py"]) == 0
    assert capsys.readouterr().out == "All clear: no findings in 1 file.\n"
