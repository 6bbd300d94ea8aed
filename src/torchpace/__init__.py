"""torchpace: make PyTorch training fast, and prove it.

Importing this package neither imports torch nor initialises CUDA. Submodules are loaded on
first attribute access (``torchpace.catalog``, ``torchpace.measure``, ``torchpace.workloads``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from torchpace._version import __version__

_LAZY_SUBMODULES = ("bench", "catalog", "measure", "workloads")

__all__ = ["__version__", *_LAZY_SUBMODULES]


def __getattr__(name: str) -> ModuleType:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"torchpace.{name}")
    raise AttributeError(f"module 'torchpace' has no attribute {name!r}")
