"""docs/speedups.md documents every exported verb and every preset."""

from __future__ import annotations

from pathlib import Path

import pytest

import torchpace.speedups as speedups
from torchpace.train.plan import PRESETS

DOC = (Path(__file__).resolve().parents[2] / "docs" / "speedups.md").read_text()


@pytest.mark.parametrize("name", [n for n in speedups.__all__ if n not in ("Applied",)])
def test_every_exported_verb_is_documented(name: str) -> None:
    assert f"`{name}" in DOC or f"{name}(" in DOC, f"docs/speedups.md does not mention {name}"


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_is_documented(preset: str) -> None:
    assert f"`{preset}`" in DOC
