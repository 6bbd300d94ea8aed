"""Output paths are resolved and checked before any work (issue 17): an unwritable `--json`
failed after the whole run, a relative one followed the script's `os.chdir`, and a wrong
`--checkpoint-dir` surfaced at the first save."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchpace.cli import main

SCRIPT = """\
import os, sys
from pathlib import Path
import torch
Path(sys.argv[1]).write_text("ran")
os.makedirs("elsewhere", exist_ok=True)
os.chdir("elsewhere")
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    opt.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
"""


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a directory\n")


def test_doctor_checks_its_outputs_before_running_the_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    marker = tmp_path / "ran.txt"
    argv = ["doctor", "--json", "a-file/result.json", "train.py", str(marker)]
    assert main(argv) == 2
    assert "--json a-file/result.json: cannot write there" in capsys.readouterr().err
    assert not marker.exists()  # the script never ran
    assert main(["doctor", "--html", ".", "train.py", str(marker)]) == 2
    assert "--html .: is a directory" in capsys.readouterr().err


def test_a_relative_json_lands_where_it_was_asked_even_if_the_script_moves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    argv = ["doctor", "--steps", "2", "--warmup", "1", "--json", "out.json", "train.py", "m"]
    assert main(argv) == 0
    assert json.loads((tmp_path / "out.json").read_text())["steps"]
    assert not (tmp_path / "elsewhere" / "out.json").exists()
    assert f"wrote {tmp_path / 'out.json'}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fit", "cnn", "--checkpoint-dir", "a-file"], "--checkpoint-dir a-file: is a file"),
        (["fit", "cnn", "--json", "a-file/r.json"], "--json a-file/r.json: cannot write there"),
        (["tune", "cnn", "--out", "a-file/sub"], "--out a-file/sub: cannot write there"),
    ],
)
def test_fit_and_tune_check_their_outputs_first(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err
