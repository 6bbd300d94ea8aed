"""Fix safety against the user's checkpoints: `lint --fix` must keep every checkpoint saved before
it loadable with `load_state_dict(strict=True)` (issue 16: the TP401 fix, labelled safe, broke it).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from torchpace.cli import main

torch = pytest.importorskip("torch")

MODEL = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return self.bn(self.conv(x))
"""


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"m{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_safe_fixes_keep_old_checkpoints_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text(MODEL)
    torch.save(_load(tmp_path / "model.py").Net().state_dict(), tmp_path / "ckpt.pt")
    main(["lint", "--fix", "model.py"])
    out = capsys.readouterr().out
    assert "TP401" in out  # reported, and left for the user to decide
    assert (tmp_path / "model.py").read_text() == MODEL
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    _load(tmp_path / "model.py").Net().load_state_dict(state, strict=True)

    # What the unsafe fix costs, which is why it is unsafe: the old checkpoint no longer loads.
    main(["lint", "--fix", "--unsafe-fixes", "model.py"])
    capsys.readouterr()
    assert "bias=False" in (tmp_path / "model.py").read_text()
    with pytest.raises(RuntimeError, match=r"conv\.bias"):
        _load(tmp_path / "model.py").Net().load_state_dict(state, strict=True)


def test_safe_fixes_keep_a_seeded_run_s_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # TP207 on a random factory would draw from the device's generator: other values in a
    # seeded run, so only the deterministic factories are fixed by --fix.
    monkeypatch.chdir(tmp_path)
    source = (
        "import torch\n"
        "for x in loader:\n"
        "    noise = torch.randn(4).to(device)\n"
        "    mask = torch.ones(4).to(device)\n"
        "    model(x + noise * mask).sum().backward()\n"
    )
    (tmp_path / "train.py").write_text(source)
    main(["lint", "--fix", "train.py"])
    capsys.readouterr()
    fixed = (tmp_path / "train.py").read_text()
    assert "torch.randn(4).to(device)" in fixed
    assert "torch.ones(4, device=device)" in fixed
