"""Lint under hostile input (issue 17): every case ends in a finding or a clear error, the exit
code says which, and no user file is lost, split or overridden."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchpace.cli import main
from torchpace.lint.discovery import discover
from torchpace.lint.results import LintError

# TP301's fix is safe: `torch.cuda.amp.GradScaler()` → `torch.amp.GradScaler("cuda")`.
FIXABLE = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"
FIXED = 'import torch\nscaler = torch.amp.GradScaler("cuda")\n'


def _lint(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["lint", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_an_unreadable_directory_is_an_error_not_all_clear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "train.py").write_text(FIXABLE)
    real_scandir = os.scandir

    def scandir(path: str | os.PathLike[str] = ".") -> object:
        if Path(path).name == "secret":  # as chmod 000 does, for any user, root included
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    rc, out, err = _lint(capsys, ".")
    assert rc == 2 and out == "No findings in 1 file, but 1 error (listed below).\n"
    assert "secret: error: cannot read: Permission denied" in err


def test_fix_through_a_symlink_fixes_the_target_and_keeps_the_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "real.py").write_text(FIXABLE)
    (tmp_path / "link.py").symlink_to("real.py")
    rc, _, _ = _lint(capsys, "--fix", "--extend-select", "TP301", "link.py")
    assert rc == 0
    assert (tmp_path / "link.py").is_symlink()
    assert (tmp_path / "real.py").read_text() == FIXED


def test_fix_refuses_to_split_hard_links_or_override_read_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.py").write_text(FIXABLE)
    os.link(tmp_path / "a.py", tmp_path / "b.py")
    rc, _, err = _lint(capsys, "--fix", "--extend-select", "TP301", "a.py")
    assert rc == 2 and "a.py: error: 2 hard links, so not fixed" in err
    assert (tmp_path / "a.py").read_text() == FIXABLE
    assert os.stat(tmp_path / "a.py").st_ino == os.stat(tmp_path / "b.py").st_ino

    (tmp_path / "ro.py").write_text(FIXABLE)
    (tmp_path / "ro.py").chmod(0o444)
    rc, _, err = _lint(capsys, "--fix", "--extend-select", "TP301", "ro.py")
    assert rc == 2 and "ro.py: error: read-only, so not fixed" in err
    assert (tmp_path / "ro.py").read_text() == FIXABLE


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_named_py_is_reported_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pkg").mkdir()
    os.mkfifo(tmp_path / "pkg" / "pipe.py")  # opening it for reading would block forever
    (tmp_path / "pkg" / "train.py").write_text("x = 1\n")
    assert discover(["pkg"]) == [LintError("pkg/pipe.py", "not a regular file"), "pkg/train.py"]
    rc, _, err = _lint(capsys, "pkg")
    assert rc == 2 and "pkg/pipe.py: error: not a regular file" in err


def test_a_latin1_file_with_its_coding_declaration_is_linted_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ("# -*- coding: latin-1 -*-\n# caf\u00e9\n" + FIXABLE).encode("latin-1")
    (tmp_path / "old.py").write_bytes(data)
    rc, out, _ = _lint(capsys, "--fix", "--extend-select", "TP301", "old.py")
    assert rc == 1 and out.startswith("old.py:4:10: TP301")
    assert (tmp_path / "old.py").read_bytes() == data  # no fix in a re-encoded text
    (tmp_path / "bad.py").write_bytes(b"# caf\xe9\nx = 1\n")  # no declaration: not UTF-8
    rc, _, err = _lint(capsys, "bad.py")
    assert rc == 2 and "not valid UTF-8" in err


def test_long_operator_chains_do_not_overflow_a_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = " + ".join(["loss"] * 900)
    (tmp_path / "t.py").write_text(
        "for x in loader:\n    loss = model(x.to(device))\n    loss.backward()\n"
        f"    opt.step()\n    t = {chain}\n    print(t)\n"
    )
    rc, out, err = _lint(capsys, "t.py")
    assert (rc, err) == (1, "") and "t.py:6:11: TP202" in out
