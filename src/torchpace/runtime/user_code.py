"""Whether running code is torch's or torchpace's own, not the user's (the doctor's sites, the
plan interposer's model finding), and whether it is the user's own at all (not the standard
library's or an installed package's: the doctor's sampler, the interposer's loader roles)."""

from __future__ import annotations

import os
import sysconfig
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


# The standard library's and installed packages' folders: code there is not the user's.
_LIBRARY_DIRS = tuple(
    {
        os.path.abspath(p) + os.sep
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (p := sysconfig.get_paths().get(key))
    }
)
_user: dict[CodeType, bool] = {}  # code object -> the user's own code; cached


def is_user_code(code: CodeType) -> bool:
    """The user's own code: not torch's or torchpace's, not the standard library's or an
    installed package's, not generated (``<string>``, ``<frozen ...>``). Cached per code object,
    as the probe's line tracer asks on every call and the sampler on every sample."""
    known = _user.get(code)
    if known is None:
        name = code.co_filename
        known = not (
            is_internal(code)
            or name.startswith("<")
            or os.path.abspath(name).startswith(_LIBRARY_DIRS)
        )
        _user[code] = known
    return known
