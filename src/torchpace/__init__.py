"""torchpace: make PyTorch training fast, and prove it.

Importing this package neither imports torch nor initialises CUDA. Submodules are loaded on
first attribute access (``torchpace.catalog``, ``torchpace.speedups``, ``torchpace.train``, ...),
and so are ``torchpace.Plan``, ``torchpace.prepare`` and ``torchpace.fit``.
"""

from __future__ import annotations

import importlib
from typing import Any

from torchpace._version import __version__

_LAZY_SUBMODULES = ("bench", "catalog", "measure", "speedups", "train", "workloads")
_LAZY_NAMES = ("Plan", "fit", "prepare")

__all__ = ["__version__", *_LAZY_SUBMODULES, *_LAZY_NAMES]


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"torchpace.{name}")
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module("torchpace.train"), name)
    raise AttributeError(f"module 'torchpace' has no attribute {name!r}")
