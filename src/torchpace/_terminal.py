"""One sanitiser for the strings the CLI prints to a terminal from data it did not write.

A result file someone hands you, a file name, a finding's text: any of them can hold control
characters. Printed as they are, ``ESC ] 0 ; title BEL`` sets the window title, ``ESC [ 2 J``
clears the screen and ``ESC ] 8`` makes a link (issue 17). :func:`printable` shows every C0 and
C1 control character except newline and tab as its escape (``\\x1b``), so the text stays
readable and nothing reaches the terminal as a command. :func:`printable_tree` does the same
through nested dataclasses, tuples, lists and dicts (a report ``Document``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, TypeVar

# C0 controls but tab and newline, DEL, and the C1 controls (U+0080-U+009F: CSI, OSC, ...).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")

T = TypeVar("T")


def printable(text: str) -> str:
    """``text`` with terminal control characters shown as ``\\xNN`` escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def printable_tree(value: T) -> T:
    """``value`` with :func:`printable` applied to every string inside it."""
    return _walk(value)  # type: ignore[no-any-return]


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, tuple):
        return tuple(_walk(v) for v in value)
    if isinstance(value, list):
        return [_walk(v) for v in value]
    if isinstance(value, dict):
        return {_walk(k): _walk(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _walk(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    return value
