"""Whether running code is torch's or torchpace's own, not the user's (the doctor's sites, the
plan interposer's model finding)."""

from __future__ import annotations

import os
from types import CodeType

import torch

import torchpace

_INTERNAL_DIRS = tuple(
    os.path.dirname(os.path.abspath(m.__file__)) + os.sep
    for m in (torch, torchpace)
    if m.__file__ is not None
)
_internal: dict[CodeType, bool] = {}  # code object -> inside torch or torchpace; cached


def is_internal(code: CodeType) -> bool:
    known = _internal.get(code)
    if known is None:
        path = os.path.abspath(code.co_filename)
        known = path.startswith(_INTERNAL_DIRS) or code.co_filename.startswith("<frozen")
        _internal[code] = known
    return known
