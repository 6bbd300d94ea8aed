"""`torchpace lint`, `rules` and `rule` from the command line: output, fixes, bad input."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import ROOT, run_python
from torchpace.cli import main
from torchpace.lint import rules as registry
from torchpace.lint.engine import MAX_PYTHON_BYTES
from torchpace.lint.rule import FileContext, Report

SLOW = "from torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=True)\n"
FIXABLE = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"
TP101 = "TP101 DataLoader loads every batch in the training process (no `num_workers`)"


def _lint(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["lint", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(autouse=True)
def _no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from an empty directory: no pyproject.toml above it changes the selection."""
    monkeypatch.chdir(tmp_path)


def test_text_output_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "train.py").write_text(SLOW)
    (tmp_path / "clean.py").write_text("x = 1\n")
    rc, out, err = _lint(capsys, str(tmp_path))
    assert (rc, err) == (1, "")
    assert out.splitlines() == [
        f"{tmp_path / 'train.py'}:2:10: {TP101}",
        "Found 1 finding in 2 files.",
    ]
    rc, out, _ = _lint(capsys, str(tmp_path / "clean.py"))
    assert rc == 0 and out == "All clear: no findings in 1 file.\n"


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.py").write_text(FIXABLE)
    rc, out, _ = _lint(capsys, "--format", "json", "--extend-select", "TP301", "a.py")
    assert rc == 1
    [finding] = json.loads(out)
    assert finding == {
        "path": "a.py",
        "cell": None,
        "line": 2,
        "col": 10,
        "end_line": 2,
        "end_col": 35,
        "code": "TP301",
        "name": "deprecated-cuda-amp",
        "technique": "amp-fp16",
        "message": registry.get("TP301").message,
        "fix": {
            "title": 'Use `torch.amp.GradScaler("cuda", ...)`',
            "safety": "safe",
            "edits": [
                {
                    "start_line": 2,
                    "start_col": 9,
                    "end_line": 2,
                    "end_col": 34,
                    "text": "torch.amp.GradScaler",
                },
                {"start_line": 2, "start_col": 35, "end_line": 2, "end_col": 35, "text": '"cuda"'},
            ],
            "needs_torch": "2.3",
        },
    }


def test_github_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a,b.py").write_text(SLOW)
    (tmp_path / "bad.py").write_text("def f(:\n")
    rc, out, err = _lint(capsys, "--format", "github", "a,b.py", "bad.py")
    assert rc == 2
    assert out.splitlines() == [
        "::warning file=a%2Cb.py,line=2,col=10,endLine=2,endColumn=41,"
        "title=TP101 dataloader-without-workers::"
        "DataLoader loads every batch in the training process (no `num_workers`)",
        "::error file=bad.py,title=torchpace::syntax error at line 1: invalid syntax",
    ]
    assert err == "bad.py: error: syntax error at line 1: invalid syntax\n"


def test_noqa_bare_and_with_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.py").write_text(
        "from torch.utils.data import DataLoader\n"
        "a = DataLoader(ds, pin_memory=True)  # noqa\n"
        "b = DataLoader(ds, pin_memory=True)  # noqa: TP101\n"
        "c = DataLoader(ds, pin_memory=True)  # noqa: TP301, TP101\n"
        "d = DataLoader(ds, pin_memory=True)  # noqa: TP301\n"
    )
    rc, out, _ = _lint(capsys, "--format", "json", "--select", "TP101", "a.py")
    assert rc == 1 and [f["line"] for f in json.loads(out)] == [5]


def test_fix_writes_only_the_edits_and_is_idempotent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "a.py"
    # CRLF line endings, a BOM and non-ASCII text around the edits must survive byte for byte.
    path.write_bytes(
        b"\xef\xbb\xbf# \xc3\xa9t\xc3\xa9\r\nimport torch\r\n"
        b"s = torch.cuda.amp.GradScaler()  # \xe2\x86\x92\r\n" + SLOW.encode()
    )
    rc, out, _ = _lint(capsys, "--fix", "--select", "TP101,TP301", str(path))
    # The file is linted again after the fix: what remains is reported where it now is.
    assert (rc, out.splitlines()) == (
        1,
        [f"{path}:5:10: {TP101}", "Found 1 finding in 1 file. Fixed 1."],
    )
    assert path.read_bytes() == (
        b'\xef\xbb\xbf# \xc3\xa9t\xc3\xa9\r\nimport torch\r\ns = torch.amp.GradScaler("cuda")'
        b"  # \xe2\x86\x92\r\n" + SLOW.encode()
    )
    fixed = path.read_bytes()
    _lint(capsys, "--fix", str(path))
    assert path.read_bytes() == fixed


def test_a_file_that_cannot_be_written_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: str, data: bytes) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("torchpace.lint.command.write_fixed", refuse)
    (tmp_path / "a.py").write_text(FIXABLE)
    rc, out, err = _lint(capsys, "--fix", "--select", "TP301", "a.py")
    assert rc == 2 and out.endswith("(1 fixable with --fix).\n")
    assert err == "a.py: error: cannot write the fixes: Permission denied\n"
    assert (tmp_path / "a.py").read_text() == FIXABLE


def test_diff_prints_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.py"
    path.write_text(FIXABLE)
    rc, out, _ = _lint(capsys, "--diff", "--extend-select", "TP301", str(path))
    assert rc == 1
    assert '-scaler = torch.cuda.amp.GradScaler()\n+scaler = torch.amp.GradScaler("cuda")' in out
    assert path.read_text() == FIXABLE
    path.write_text("x = 1\n")
    assert _lint(capsys, "--diff", str(path)) == (0, "", "")


@pytest.mark.parametrize(
    ("name", "content", "cause"),
    [
        ("bad.py", b"def f(:\n    pass\n", "syntax error at line 1: invalid syntax"),
        ("bad.py", b"x = '\xff\xfe'\n", "not valid UTF-8 (byte 5: invalid start byte)"),
        ("bad.py", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file (contains NUL bytes)"),
        ("bad.ipynb", b"", "not a notebook: the file is empty (a notebook is JSON)"),
        (
            "bad.ipynb",
            b'{"cells": [\n  {"cell_type": "code",\n',
            "invalid notebook JSON at line 3, column 1: Expecting property name enclosed in "
            "double quotes",
        ),
        ("bad.ipynb", b"[1, 2]", 'not a notebook: no "cells" list at the top level (nbformat 4)'),
        (
            "bad.ipynb",
            b'{"cells": [{"cell_type": "code", "source": 3}]}',
            'not a notebook: cell 1 has no valid "source" (a string or a list of strings)',
        ),
    ],
    ids=[
        "syntax-error",
        "non-utf8",
        "binary",
        "empty-notebook",
        "notebook-broken-json",
        "notebook-not-an-object",
        "notebook-bad-source",
    ],
)
def test_bad_file_is_one_error_line_and_others_still_linted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes, cause: str
) -> None:
    bad = tmp_path / name
    bad.write_bytes(content)
    (tmp_path / "good.py").write_text(SLOW)
    rc, out, err = _lint(capsys, str(tmp_path))
    assert rc == 2
    assert out.splitlines() == [
        f"{tmp_path / 'good.py'}:2:10: {TP101}",
        "Found 1 finding in 1 file.",
    ]
    assert err == f"{bad}: error: {cause}\n"


def test_very_large_file_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big.py"
    with big.open("wb") as f:
        f.write(b"x = 1\n")
        f.truncate(MAX_PYTHON_BYTES + 1)  # sparse: the size is checked before reading
    (tmp_path / "good.py").write_text(SLOW)
    rc, out, err = _lint(capsys, str(tmp_path))
    assert rc == 2 and out.endswith("Found 1 finding in 1 file.\n")
    assert err == f"{big}: error: file too large (10.1 MiB; the limit is 10 MiB)\n"


def test_missing_path_and_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.py").write_text("")
    rc, out, err = _lint(capsys, str(tmp_path / "nope.py"), str(tmp_path / "empty.py"))
    assert rc == 2
    assert err == f"{tmp_path / 'nope.py'}: error: no such file or directory\n"
    assert out == "No findings in 1 file, but 1 error (listed below).\n"
    assert _lint(capsys, str(tmp_path / "empty.py")) == (
        0,
        "All clear: no findings in 1 file.\n",
        "",
    )


def _boom(ctx: FileContext) -> Iterator[Report]:
    raise RuntimeError("the rule has a bug")


def test_a_crashing_rule_is_an_error_for_that_file_and_rule_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = dataclasses.replace(registry.get("TP101"), check=_boom)
    monkeypatch.setattr(
        registry, "RULES", tuple(broken if r.code == "TP101" else r for r in registry.RULES)
    )
    (tmp_path / "a.py").write_text(SLOW + FIXABLE)
    (tmp_path / "b.py").write_text(FIXABLE)
    rc, out, err = _lint(capsys, "--select", "TP101,TP301", "a.py", "b.py")
    assert rc == 2
    assert out.splitlines() == [
        "a.py:4:10: TP301 " + registry.get("TP301").message,
        "b.py:2:10: TP301 " + registry.get("TP301").message,
        "Found 2 findings in 2 files (2 fixable with --fix).",
    ]
    at = f"test_lint_cli.py:{_boom.__code__.co_firstlineno + 1}"
    assert err.splitlines() == [
        f"{name}: error: internal error in TP101: RuntimeError: the rule has a bug (at {at}); "
        "please report it"
        for name in ("a.py", "b.py")
    ]


def test_excluded_directories_are_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for d in (".venv", "build", "__pycache__", "node_modules", ".ipynb_checkpoints"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.py").write_text(SLOW)
    assert _lint(capsys, str(tmp_path))[:2] == (0, "All clear: no findings in 0 files.\n")


def test_examples_report_their_loaders_and_src_is_clean(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, _ = _lint(capsys, "--format", "json", str(ROOT / "examples"))
    found = {(Path(f["path"]).name, f["line"], f["code"]) for f in json.loads(out)}
    assert rc == 1
    assert {
        ("naive_cnn.py", 37, "TP101"),
        ("naive_lm.py", 33, "TP101"),
        ("naive_seqcls.py", 41, "TP101"),
    } <= found
    assert _lint(capsys, str(ROOT / "src"))[0] == 0


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["lint", "--format", "xml"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["lint", "--jobs", "0"])
    assert exc.value.code == 2
    assert "--jobs: must be at least 1, not 0" in capsys.readouterr().err


def test_lint_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from torchpace.cli import main\n"
        "rc = main(['lint', 'examples'])\n"
        "assert 'torch' not in sys.modules, 'torchpace lint imported torch'\n"
        "print('rc', rc)\n"
    )
    proc = run_python("-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("rc 1")
    proc = run_python("-X", "importtime", "-m", "torchpace", "lint", "examples")
    assert proc.returncode == 1
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()}
    assert "torchpace.lint.engine" in imported and "torch" not in imported


def test_rules_and_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [r.code for r in registry.RULES]
    for line, rule in zip(lines, registry.RULES, strict=True):
        assert line.split() == [
            rule.code,
            rule.name,
            rule.technique,
            "on" if rule.default else "off",
            rule.level,
        ]
    assert main(["rule", "TP401"]) == 0
    doc = capsys.readouterr().out
    assert doc.startswith(
        "# TP401 conv-bias-before-batchnorm\n\n"
        f"- **Message:** {registry.get('TP401').message}.\n"
        "- **Technique:** conv-bias-before-bn\n"
        "- **Enabled by default:** yes\n"
        "- **Level:** warning\n\n"
        "## What it does\n"
    )
    assert "## Fix safety" in doc
    assert main(["rule", "TP999"]) == 2
    assert "unknown rule code 'TP999'" in capsys.readouterr().err


def test_tests_are_skipped_said_and_configurable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_train.py").write_text(SLOW)
    (tmp_path / "train.py").write_text("x = 1\n")
    rc, out, err = _lint(capsys, ".")
    assert (rc, out) == (0, "All clear: no findings in 1 file.\n")
    assert "not linted, as tests, benchmarks, templates or run snapshots" in err
    assert "tests/" in err
    assert "--exclude ''" in err
    rc, out, _ = _lint(capsys, "--exclude", "", ".")
    assert rc == 1 and "Found 1 finding in 2 files." in out
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchpace.lint]\nexclude = []\nextend-exclude = ["train.py"]\n'
    )
    rc, out, err = _lint(capsys, ".")
    assert rc == 1 and out.startswith("tests/test_train.py:2:10: TP101")
    assert "Found 1 finding in 1 file." in out and "train.py" in err
    (tmp_path / "pyproject.toml").write_text('[tool.torchpace.lint]\nexclude = "tests/"\n')
    rc, _, err = _lint(capsys, ".")
    assert rc == 2 and "exclude must be a list of strings" in err


def test_a_notebook_cell_that_is_not_python_is_left_out_and_the_run_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 32: an automagic shell line (`ls -l data`, which IPython runs without a `!`) made
    # the whole run exit 2. Jupyter runs cells one by one: that cell is left out, said, and the
    # rest of the notebook is linted.
    import json

    cells = [
        {"cell_type": "markdown", "source": "# notes"},
        {"cell_type": "code", "source": ["ls -l data\n", "cd ..\n"]},
        {"cell_type": "code", "source": ["!pip install x\n", "%time y = 1\n"]},
        {"cell_type": "code", "source": ["x = 1\n", "def f(:\n"]},
        {"cell_type": "code", "source": SLOW.splitlines(keepends=True)},
        {"cell_type": "code", "source": ["for batch in loader:\n", "    step(batch)\n"]},
    ]
    nb = tmp_path / "train.ipynb"
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4}))
    rc, out, err = _lint(capsys, str(nb))
    assert rc == 1, err  # findings, not an error
    assert "cell 5" in out
    assert "cell 2: syntax error at line 1" in err and "cell 4: syntax error at line 2" in err
    assert "the cell is not linted" in err and "cell 3" not in err  # magics are not errors
