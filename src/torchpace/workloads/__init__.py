"""Built-in workloads. Each is a recipe module that follows the recipe protocol (see protocol.py).

Importing this package does not import torch; ``load(name)`` does.
"""

from __future__ import annotations

import importlib
from types import ModuleType

NAMES: tuple[str, ...] = ("cnn", "lm", "seqcls")


def load(name: str) -> ModuleType:
    """Import the built-in workload ``name`` and return its recipe module."""
    if name not in NAMES:
        raise ValueError(f"unknown workload {name!r}; choose one of: {', '.join(NAMES)}")
    return importlib.import_module(f"torchpace.workloads.{name}")
