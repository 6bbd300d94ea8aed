"""``torchpace doctor``: measure an unmodified training run, point at the lines that cost time,
and rank the fixes by the share of step time they can recover.

``watch``, ``render`` and ``print_report`` import torch when first used; importing this package
alone does not (the command line imports it to build its parser, lint included).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Watch", "print_report", "render", "watch"]


def __getattr__(name: str) -> Any:
    if name in ("Watch", "watch"):
        from torchpace.doctor import session

        return getattr(session, name)
    if name in ("print_report", "render"):
        from torchpace.doctor import terminal

        return getattr(terminal, name)
    raise AttributeError(f"module 'torchpace.doctor' has no attribute {name!r}")
