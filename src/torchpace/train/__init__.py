"""Apply a plan: ``Plan``, ``prepare()`` for the user's own loop, ``fit()`` for ours.

Imported lazily: ``torchpace.train.command`` (the CLI parser) must not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Plan": "plan",
    "PlanError": "plan",
    "PRESETS": "plan",
    "prepare": "apply_plan",
    "fit": "loop",
    "FitResult": "loop",
    "evaluate": "loop",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"torchpace.train.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'torchpace.train' has no attribute {name!r}")
