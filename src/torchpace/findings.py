"""Findings shared by ``torchpace lint`` and ``torchpace doctor``.

A finding names a rule code, the catalogue technique that removes the problem, where it is and,
for lint, an optional fix. This module must not import torch: ``torchpace lint`` uses it.

The doctor's ranked findings (:class:`DoctorFinding`) are typed values too: what ``merge``
ranks, ``--verify`` measures, the report shows and the tune orders its trials by. One is
checked when it is built: its ``measured`` figures are numbers, strings or null
(docs/doctor-result.schema.json, ``finding.measured``), its source, severity and status are the
schema's. ``to_json`` gives the result file's object, key for key as the schema lists it;
``DoctorFinding.of`` reads one back from a result file (or passes a typed one through), so the
readers of a saved result and of a live one share one type.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
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


# --------------------------------------------------------------------------- the doctor's

Figure = float | int | str | None

SOURCES = ("runtime", "lint", "lint+runtime")
SEVERITIES = ("high", "moderate", "info")
STATUSES = ("measured", "seen running", "not seen running")


class FindingError(ValueError):
    """A finding that breaks the result schema: built wrong, or read from a foreign file."""


def measured_figures(values: Mapping[str, Any], where: str = "measured") -> dict[str, Figure]:
    """``values`` as a finding's figures; a value that is not a number, a string or null (a
    bool, a list, a tensor) is an error naming its key."""
    out: dict[str, Figure] = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, str, type(None))):
            raise FindingError(f"{where}[{key!r}] is {type(value).__name__}: {value!r}")
        out[str(key)] = value
    return out


@dataclass(frozen=True)
class Applies:
    """How torchpace can apply the finding's technique: its verb, and whether a tune tries it."""

    verb: str | None
    tune: bool


@dataclass(frozen=True)
class Verified:
    """``--verify``'s measurement of the change alone against the script as written."""

    estimated_gain: float | None
    estimated_speedup: float | None
    speedup: float | None
    speedup_lo: float | None
    speedup_hi: float | None
    speedup_second_baseline: float | None
    noise: tuple[str, ...]
    verdict: str

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["noise"] = list(self.noise)
        return out


@dataclass
class DoctorFinding:
    """One ranked finding (docs/doctor.md, Findings). ``gain``, ``source``, ``code``,
    ``lint_message``, ``verified`` and ``demoted`` change as findings are merged and verified;
    the rest is fixed when it is built."""

    technique: str
    message: str
    fix: str
    applies: Applies
    source: str = "runtime"
    code: str | None = None
    pattern: str | None = None
    severity: str = "moderate"
    path: str | None = None
    line: int | None = None
    gain: float | None = None
    measured: dict[str, Figure] = field(default_factory=dict)
    status: str = "measured"
    lint_message: str | None = None
    runtime_check: str | None = None
    demoted: str | None = None
    verified: Verified | None = None

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("source", self.source, SOURCES),
            ("severity", self.severity, SEVERITIES),
            ("status", self.status, STATUSES),
        ):
            if value not in allowed:
                raise FindingError(f"{self.technique}: {name} {value!r} is not one of {allowed}")
        if self.gain is not None and not (
            isinstance(self.gain, (int, float)) and not math.isnan(self.gain)
        ):
            raise FindingError(f"{self.technique}: gain {self.gain!r} is not a number")
        self.measured = measured_figures(self.measured, f"{self.technique}: measured")

    def merged_with_lint(self, code: str, lint_message: str) -> None:
        """The same line and technique as a lint finding: one entry with the rule's code."""
        self.source, self.code, self.lint_message = "lint+runtime", code, lint_message

    def to_json(self) -> dict[str, Any]:
        """The result file's object (docs/doctor-result.schema.json ``finding``)."""
        out: dict[str, Any] = {
            "source": self.source,
            "code": self.code,
            "pattern": self.pattern,
            "technique": self.technique,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
            "path": self.path,
            "line": self.line,
            "gain": self.gain,
            "measured": dict(self.measured),
            "status": self.status,
            "applies": {"verb": self.applies.verb, "tune": self.applies.tune},
        }
        for key in ("lint_message", "runtime_check", "demoted"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.verified is not None:
            out["verified"] = self.verified.to_json()
        return out

    @classmethod
    def of(cls, value: DoctorFinding | Mapping[str, Any]) -> DoctorFinding:
        """A finding, typed: as it is, or read from a result file's object."""
        if isinstance(value, DoctorFinding):
            return value
        try:
            applies = value["applies"]
            verified = value.get("verified")
            return cls(
                technique=value["technique"],
                message=value["message"],
                fix=value["fix"],
                applies=Applies(applies["verb"], bool(applies["tune"])),
                source=value["source"],
                code=value["code"],
                pattern=value["pattern"],
                severity=value["severity"],
                path=value["path"],
                line=value["line"],
                gain=value["gain"],
                measured=dict(value["measured"]),
                status=value["status"],
                lint_message=value.get("lint_message"),
                runtime_check=value.get("runtime_check"),
                demoted=value.get("demoted"),
                verified=None
                if verified is None
                else Verified(
                    **{
                        **{f.name: None for f in fields(Verified)},
                        **verified,
                        "noise": tuple(verified.get("noise", ())),
                    }
                ),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise FindingError(f"not a doctor finding ({type(exc).__name__}: {exc})") from None


def jsonable(result: Mapping[str, Any]) -> dict[str, Any]:
    """``result`` with its findings as the result file holds them."""
    out = dict(result)
    if "findings" in out:
        out["findings"] = [DoctorFinding.of(f).to_json() for f in out["findings"]]
    return out
