"""Findings shared by ``torchpace lint`` and ``torchpace doctor``.

A finding names a rule code, the catalogue technique that removes the problem, where it is and,
for lint, an optional fix. This module must not import torch: ``torchpace lint`` uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Safety = Literal["safe", "unsafe"]


@dataclass(frozen=True)
class Location:
    """A span of a file: 1-based lines, 1-based character columns, ``end_col`` exclusive.

    In a Jupyter notebook ``cell`` is the 1-based index of the cell among *all* cells of the
    notebook (markdown and raw cells count, as ``cells[cell - 1]`` of the file and as ruff
    reports it), and the lines are lines of that cell. ``cell`` is None for a Python file.
    """

    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    cell: int | None = None


@dataclass(frozen=True)
class Edit:
    """Replace a span of the source with ``text``.

    Lines are 1-based; columns are 0-based UTF-8 byte offsets within the line, as in ``ast``
    (``end_col`` exclusive). An insertion has equal start and end.
    """

    start_line: int
    start_col: int
    end_line: int
    end_col: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "start_line": self.start_line,
            "start_col": self.start_col,
            "end_line": self.end_line,
            "end_col": self.end_col,
            "text": self.text,
        }


@dataclass(frozen=True)
class Fix:
    """A change that removes a finding. ``title`` states the action; safe fixes apply by default."""

    title: str
    safety: Safety
    edits: tuple[Edit, ...]
    # The oldest torch the edited code runs on, where it needs a newer one than torchpace
    # supports at least ("2.3" for torch.amp.GradScaler): lint makes the fix unsafe in a
    # project that declares an older torch (lint.torch_version).
    needs_torch: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "title": self.title,
            "safety": self.safety,
            "edits": [e.to_dict() for e in self.edits],
        }
        if self.needs_torch:
            out["needs_torch"] = self.needs_torch
        return out


@dataclass(frozen=True)
class Finding:
    """One problem found in one place, named by a rule code and a catalogue technique id."""

    code: str
    name: str
    technique: str
    message: str
    location: Location
    fix: Fix | None = None

    def to_dict(self) -> dict[str, Any]:
        loc = self.location
        return {
            "path": loc.path,
            "cell": loc.cell,
            "line": loc.line,
            "col": loc.col,
            "end_line": loc.end_line,
            "end_col": loc.end_col,
            "code": self.code,
            "name": self.name,
            "technique": self.technique,
            "message": self.message,
            "fix": None if self.fix is None else self.fix.to_dict(),
        }
