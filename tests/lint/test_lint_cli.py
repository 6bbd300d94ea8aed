"""`torchpace lint`, `rules` and `rule` from the command line: output, fixes, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT, run_python
from torchpace.cli import main

SLOW = "from torch.utils.data import DataLoader\nloader = DataLoader(ds)\n"
FIXABLE = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"


def _lint(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["lint", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_text_output_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "train.py").write_text(SLOW)
    (tmp_path / "clean.py").write_text("x = 1\n")
    rc, out, _ = _lint(capsys, str(tmp_path))
    assert rc == 1
    assert out.splitlines() == [
        f"{tmp_path / 'train.py'}:2:10: TP101 DataLoader loads every batch in the training "
        "process (no `num_workers`)",
        "Found 1 finding in 2 files.",
    ]
    rc, out, _ = _lint(capsys, str(tmp_path / "clean.py"))
    assert rc == 0 and out == "All clear: no findings in 1 file.\n"


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.py").write_text(FIXABLE)
    rc, out, _ = _lint(capsys, "--format", "json", str(tmp_path / "a.py"))
    assert rc == 1
    [finding] = json.loads(out)
    assert finding["code"] == "TP301" and finding["technique"] == "amp-fp16"
    assert (finding["line"], finding["col"], finding["end_line"]) == (2, 10, 2)
    assert finding["name"] == "deprecated-cuda-amp" and finding["path"].endswith("a.py")
    assert finding["fix"]["safety"] == "safe" and len(finding["fix"]["edits"]) == 2


def test_noqa_bare_and_with_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.py").write_text(
        "from torch.utils.data import DataLoader\n"
        "a = DataLoader(ds)  # noqa\n"
        "b = DataLoader(ds)  # noqa: TP101\n"
        "c = DataLoader(ds)  # noqa: TP301, TP101\n"
        "d = DataLoader(ds)  # noqa: TP301\n"
    )
    rc, out, _ = _lint(capsys, "--format", "json", str(tmp_path / "a.py"))
    assert rc == 1 and [f["line"] for f in json.loads(out)] == [5]


def test_select_and_ignore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.py").write_text(SLOW + FIXABLE)
    codes = lambda out: [f["code"] for f in json.loads(out)]  # noqa: E731
    assert codes(_lint(capsys, "--format", "json", "--select", "TP3", str(tmp_path))[1]) == [
        "TP301"
    ]
    assert codes(_lint(capsys, "--format", "json", "--ignore", "TP301", str(tmp_path))[1]) == [
        "TP101"
    ]
    rc, _, err = _lint(capsys, "--select", "TP999", str(tmp_path))
    assert rc == 2 and "unknown rule code or prefix 'TP999'" in err


def test_fix_writes_only_the_edits_and_is_idempotent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "a.py"
    # CRLF line endings, a BOM and non-ASCII text around the edits must survive byte for byte.
    path.write_bytes(
        b"\xef\xbb\xbf# \xc3\xa9t\xc3\xa9\r\nimport torch\r\n"
        b"s = torch.cuda.amp.GradScaler()  # \xe2\x86\x92\r\n" + SLOW.encode()
    )
    rc, out, _ = _lint(capsys, "--fix", str(path))
    assert rc == 1 and "Fixed 1." in out and "TP101" in out and "TP301" not in out
    assert path.read_bytes() == (
        b'\xef\xbb\xbf# \xc3\xa9t\xc3\xa9\r\nimport torch\r\ns = torch.amp.GradScaler("cuda")'
        b"  # \xe2\x86\x92\r\n" + SLOW.encode()
    )
    fixed = path.read_bytes()
    _lint(capsys, "--fix", str(path))
    assert path.read_bytes() == fixed


def test_diff_prints_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.py"
    path.write_text(FIXABLE)
    rc, out, _ = _lint(capsys, "--diff", str(path))
    assert rc == 1
    assert '-scaler = torch.cuda.amp.GradScaler()\n+scaler = torch.amp.GradScaler("cuda")' in out
    assert path.read_text() == FIXABLE
    path.write_text("x = 1\n")
    assert _lint(capsys, "--diff", str(path)) == (0, "", "")


@pytest.mark.parametrize(
    ("content", "cause"),
    [
        (b"def f(:\n    pass\n", "syntax error at line 1"),
        (b"x = '\xff\xfe'\n", "not valid UTF-8"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
    ],
    ids=["syntax-error", "non-utf8", "binary"],
)
def test_bad_file_is_one_error_line_and_others_still_linted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, cause: str
) -> None:
    bad = tmp_path / "bad.py"
    bad.write_bytes(content)
    (tmp_path / "good.py").write_text(SLOW)
    rc, out, err = _lint(capsys, str(tmp_path))
    assert rc == 2
    assert "good.py:2:10: TP101" in out
    assert err.splitlines() == [err.strip()] and err.startswith(f"{bad}: error: {cause}")
    assert "Traceback" not in err


def test_missing_path_and_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.py").write_text("")
    rc, out, err = _lint(capsys, str(tmp_path / "nope.py"), str(tmp_path / "empty.py"))
    assert rc == 2
    assert err == f"{tmp_path / 'nope.py'}: error: no such file or directory\n"
    assert out == "All clear: no findings in 1 file.\n"


def test_excluded_directories_are_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for d in (".venv", "build", "__pycache__"):
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
        ("naive_cnn.py", 36, "TP101"),
        ("naive_cnn.py", 37, "TP101"),
        ("naive_cnn.py", 51, "TP402"),
        ("naive_lm.py", 32, "TP101"),
        ("naive_seqcls.py", 40, "TP101"),
    } <= found
    assert _lint(capsys, str(ROOT / "src"))[0] == 0


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
    out = capsys.readouterr().out
    assert out.startswith("TP101  dataloader-without-workers") and "TP604" in out
    assert main(["rule", "TP401"]) == 0
    doc = capsys.readouterr().out
    assert doc.startswith("# TP401 conv-bias-before-batchnorm") and "## Fix safety" in doc
    assert main(["rule", "TP999"]) == 2
    assert "unknown rule code 'TP999'" in capsys.readouterr().err
