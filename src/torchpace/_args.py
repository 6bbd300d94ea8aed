"""argparse types for the numeric options of every verb, checked when the command line is read.

A bad number (``fit --steps 0``, ``--epochs -5``, ``bench --block 0``) used to surface as a
wrong run or a traceback after the setup; now argparse exits 2 at once with
``argument --steps: must be at least 1, not 0`` (issue 17).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def at_least(low: int) -> Callable[[str], int]:
    """An integer type that rejects values below ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, not {value}")
        return value

    parse.__name__ = f"integer >= {low}"  # argparse names the type in its messages
    return parse


positive_int = at_least(1)
non_negative_int = at_least(0)
