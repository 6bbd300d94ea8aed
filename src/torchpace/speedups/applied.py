"""What a speed-up verb did: the record every verb returns (or hands to ``prepare``).

A verb that cannot act on this device or torch version is a no-op: it warns once, with the
reason and what to change, and returns ``Applied(changed=False, reason=...)``. Nothing raises
for a technique that merely does not apply; bad arguments still raise ``ValueError``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from torchpace.catalog import get as get_technique


class SpeedupWarning(UserWarning):
    """A speed-up verb was asked for something this device, model or torch version cannot do."""


@dataclass(frozen=True)
class Applied:
    """``technique`` is a catalogue id; ``changes`` lists what was changed, one line each."""

    technique: str
    changed: bool
    changes: tuple[str, ...] = field(default=())
    reason: str = ""  # why nothing (or not everything) changed

    def __post_init__(self) -> None:
        get_technique(self.technique)  # raises KeyError naming the known ids

    def __str__(self) -> str:
        if not self.changed:
            return f"{self.technique}: not applied ({self.reason})"
        head = f"{self.technique}: {len(self.changes)} change(s)"
        return head + (f" ({self.reason})" if self.reason else "")


def done(technique: str, changes: list[str] | tuple[str, ...], *, reason: str = "") -> Applied:
    """The record of a verb that ran; unchanged (with ``reason``) when ``changes`` is empty."""
    return Applied(technique, bool(changes), tuple(changes), reason)


def skipped(technique: str, reason: str, *, warn: bool = True) -> Applied:
    """A no-op: warn (as SpeedupWarning, attributed to the caller of the verb) and say why."""
    if warn:
        warnings.warn(f"{technique}: {reason}", SpeedupWarning, stacklevel=3)
    return Applied(technique, False, (), reason)
