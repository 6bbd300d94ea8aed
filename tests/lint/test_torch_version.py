"""`--fix` knows the project's torch (issue 32): a fix that needs a newer torch than the project
declares is never applied as safe. Tests with projects pinned to old versions in each place a
project declares torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchpace.cli import main
from torchpace.lint import torch_version
from torchpace.lint.torch_version import Declared, declared, unsafe_reason

AMP = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    torch_version.declared.cache_clear()


@pytest.mark.parametrize(
    ("name", "text", "lowest"),
    [
        ("requirements.txt", "numpy\ntorch==1.9.0\n", (1, 9, 0)),
        ("requirements.txt", "torch>=1.6,<2  # old\n", (1, 6, 0)),
        ("requirements.txt", "torch<2\n", None),  # unbounded below
        ("requirements-train.txt", "torch~=2.1.0\n", (2, 1, 0)),
        ("setup.py", "setup(install_requires=['numpy', 'torch>=1.8.1'])\n", (1, 8, 1)),
        ("setup.cfg", "[options]\ninstall_requires =\n    torch==1.7\n", (1, 7, 0)),
        ("environment.yml", "dependencies:\n  - pip:\n    - torch==1.10.2\n", (1, 10, 2)),
        ("pyproject.toml", '[project]\nname = "x"\ndependencies = ["torch>=1.13"]\n', (1, 13, 0)),
        ("pyproject.toml", '[tool.poetry.dependencies]\ntorch = "^1.12"\n', (1, 12, 0)),
        ("Dockerfile", "FROM pytorch/pytorch:1.6.0-cuda10.1-cudnn7-runtime\n", (1, 6, 0)),
        ("Dockerfile", "FROM nvcr.io/nvidia/pytorch:21.06-py3\n", (1, 8, 0)),
        ("Dockerfile", "FROM python:3.8\nRUN pip install torch==1.9.0 torchvision\n", (1, 9, 0)),
    ],
)  # fmt: skip
def test_each_place_a_project_declares_torch(tmp_path: Path, name: str, text: str, lowest) -> None:
    (tmp_path / name).write_text(text)
    found = declared(tmp_path)
    assert isinstance(found, Declared) and found.lowest == lowest, found
    assert name in found.where


def test_unpinned_or_undeclared_torch_keeps_the_fix_safe(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "requirements.txt").write_text("torch\nnumpy\n")  # any torch: the newest
    (repo / "train.py").write_text(AMP)
    assert unsafe_reason(str(repo / "train.py"), "2.3") is None
    new = tmp_path / "new"
    (new / ".git").mkdir(parents=True)
    (new / "requirements.txt").write_text("torch>=2.4\n")
    assert unsafe_reason(str(new / "train.py"), "2.3") is None


def test_outside_a_repository_the_search_stops_at_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "requirements.txt").write_text("torch==1.6\n")  # above the current directory
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    monkeypatch.chdir(work)
    assert declared(work / "src") is None
    (work / "requirements.txt").write_text("torch==1.8\n")
    torch_version.declared.cache_clear()
    found = declared(work / "src")
    assert found is not None and found.lowest == (1, 8, 0)


def test_the_search_stops_at_the_repository_root(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==1.6\n")  # outside the repository
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    assert declared(repo / "src") is None


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("requirements.txt", "torch==1.9.0\n"),
        ("Dockerfile", "FROM pytorch/pytorch:1.6.0-cuda10.1-cudnn7-runtime\n"),
        ("pyproject.toml", '[project]\nname = "x"\ndependencies = ["torch>=1.6,<2"]\n'),
    ],
)
def test_fix_leaves_a_gradscaler_that_the_declared_torch_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / name).write_text(text)
    script = tmp_path / "train.py"
    script.write_text(AMP)
    assert (
        main(["lint", "--fix", "--extend-select", "TP301", str(script)]) == 1
    )  # the finding stays
    assert script.read_text() == AMP  # nothing written: torch.amp.GradScaler needs 2.3
    capsys.readouterr()
    main(["lint", "--format", "json", "--extend-select", "TP301", str(script)])
    (finding,) = json.loads(capsys.readouterr().out)
    fix = finding["fix"]
    assert fix["safety"] == "unsafe" and fix["needs_torch"] == "2.3"
    assert "needs torch >= 2.3; the project declares" in fix["title"] and name in fix["title"]
    # The user can still ask for it.
    assert main(["lint", "--fix", "--unsafe-fixes", "--extend-select", "TP301", str(script)]) == 0
    assert 'torch.amp.GradScaler("cuda")' in script.read_text()


def test_fix_applies_where_the_declared_torch_has_it(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("torch>=2.3\n")
    script = tmp_path / "train.py"
    script.write_text(AMP)
    assert main(["lint", "--fix", "--extend-select", "TP301", str(script)]) == 0
    assert 'torch.amp.GradScaler("cuda")' in script.read_text()
