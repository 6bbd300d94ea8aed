"""Rule selection: command-line lists, [tool.torchpace.lint], off-by-default rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchpace.cli import main
from torchpace.lint import RULES
from torchpace.lint.rule import Rule
from torchpace.lint.selection import choose

SOURCE = (
    "import torch\n"
    "from torch.utils.data import DataLoader\n"
    "loader = DataLoader(ds, pin_memory=True)\n"
    "scaler = torch.cuda.amp.GradScaler()\n"
)
FIXTURES = Path(__file__).parent / "fixtures"


def _rule(code: str, *, default: bool = True) -> Rule:
    return Rule(code, code.lower(), "m", "t", "doc", lambda ctx: iter(()), default=default)


def test_off_by_default_rules_need_their_full_code() -> None:
    rules = [_rule("TP101"), _rule("TP102", default=False), _rule("TP201")]
    codes = lambda chosen: [r.code for r in chosen]  # noqa: E731
    assert codes(choose(rules)) == ["TP101", "TP201"]
    assert codes(choose(rules, select=["TP1"])) == ["TP101"]
    assert codes(choose(rules, select=["TP"])) == ["TP101", "TP201"]
    assert codes(choose(rules, select=["TP102"])) == ["TP102"]
    assert codes(choose(rules, extend_select=["TP1"])) == ["TP101", "TP201"]
    assert codes(choose(rules, extend_select=["TP102"])) == ["TP101", "TP102", "TP201"]
    assert codes(choose(rules, select=["TP2"], extend_select=["TP102"])) == ["TP102", "TP201"]
    assert codes(choose(rules, select=["TP"], ignore=["TP1"])) == ["TP201"]
    assert codes(choose(rules, extend_select=["TP102"], ignore=["TP10"])) == ["TP201"]


def _codes(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    main(["lint", "--format", "json", *argv])
    return [f["code"] for f in json.loads(capsys.readouterr().out)]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "src" / "tests").mkdir(parents=True)
    (tmp_path / "src" / "a.py").write_text(SOURCE)
    (tmp_path / "src" / "tests" / "t.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path / "src")  # the config is found above the current directory
    return tmp_path


def _config(project: Path, text: str) -> Path:
    path = project / "pyproject.toml"
    path.write_text('[project]\nname = "x"\n\n[tool.torchpace.lint]\n' + text)
    return path


def test_command_line_lists(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _codes(capsys, "--select", "TP1,tp301", "a.py") == ["TP101", "TP301"]
    assert _codes(capsys, "--select", "TP1", "--extend-select", "TP301", "a.py") == [
        "TP101",
        "TP301",
    ]
    assert _codes(capsys, "--select", "TP1,TP3", "--ignore", "TP301", "a.py") == ["TP101"]


def test_config_select_ignore_and_per_file_ignores(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(
        project,
        'select = ["TP1", "TP3", "TP301"]\nignore = ["TP101"]\n'
        'per-file-ignores = { "src/tests/*" = ["TP3"], "a.py" = ["TP1"] }\n',
    )
    assert _codes(capsys, "a.py", "tests/t.py") == ["TP301"]
    # The command line replaces the config's select and ignore lists, each on its own.
    assert _codes(capsys, "--select", "TP101", "tests/t.py") == []  # the config ignores it
    assert _codes(capsys, "--select", "TP101", "--ignore", "TP302", "tests/t.py") == ["TP101"]
    assert _codes(capsys, "--ignore", "TP302", "tests/t.py") == ["TP101"]
    assert _codes(capsys, "--ignore", "TP302", "a.py") == ["TP301"]  # per-file-ignores apply


def test_config_extend_select_adds_to_the_defaults(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    off = next((r for r in RULES if not r.default), None)
    if off is None:
        pytest.skip("no rule is off by default")
    fixture = str(FIXTURES / f"{off.code}.py")
    prefix = off.code[:3]
    assert off.code not in _codes(capsys, "--select", prefix, fixture)
    assert off.code in _codes(capsys, "--select", off.code, fixture)
    _config(project, f'extend-select = ["{prefix}"]\n')
    assert off.code not in _codes(capsys, fixture)
    _config(project, f'extend-select = ["{off.code}"]\n')
    assert off.code in _codes(capsys, fixture)


def test_explicit_config_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = project / "lint.toml"
    other.write_text('[tool.torchpace.lint]\nselect = ["TP301"]\n')
    assert _codes(capsys, "--config", str(other), "a.py") == ["TP301"]


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ('select = ["TP1",,]\n', "invalid TOML: "),  # the parser words the rest
        ('selct = ["TP1"]\n', "unknown key 'selct' in [tool.torchpace.lint]; known keys: "),
        ('select = "TP1"\n', "[tool.torchpace.lint] select must be a list of strings, not 'TP1'"),
        ("ignore = [1]\n", "[tool.torchpace.lint] ignore must be a list of strings, not [1]"),
        (
            'select = ["TP999"]\n',
            "unknown rule code or prefix 'TP999' in [tool.torchpace.lint] select",
        ),
        (
            'per-file-ignores = { "x.py" = ["XY1"] }\n',
            "unknown rule code or prefix 'XY1' in [tool.torchpace.lint] per-file-ignores 'x.py'",
        ),
        (
            'per-file-ignores = ["x.py"]\n',
            "[tool.torchpace.lint] per-file-ignores must be a table, not ['x.py']",
        ),
    ],
    ids=["bad-toml", "unknown-key", "not-a-list", "not-strings", "unknown-code", "pfi-code", "pfi"],
)
def test_broken_config_is_one_error_line(
    project: Path, capsys: pytest.CaptureFixture[str], text: str, cause: str
) -> None:
    path = _config(project, text)
    assert main(["lint", "a.py"]) == 2
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"{path}: error: {cause}")
    assert err.rstrip().endswith("; linted with the default settings")
    assert "a.py:" in out, "the files are still linted"


def test_bad_codes_and_missing_config_on_the_command_line(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lint", "--extend-select", "TP1,XX9", "a.py"]) == 2
    assert capsys.readouterr().err == (
        "torchpace: error: unknown rule code or prefix 'XX9' in --extend-select\n"
    )
    assert main(["lint", "--config", "nope.toml", "a.py"]) == 2
    assert capsys.readouterr().err == (
        "nope.toml: error: No such file or directory; linted with the default settings\n"
    )
