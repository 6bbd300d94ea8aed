"""Static and runtime findings, merged into one ranked list.

A lint finding on a line that ran (in the probe step, or as a sync, loader, optimizer, forward or
backward call the instruments saw) is *confirmed* and carries what was measured there; a runtime
finding on the same line and technique as a lint finding becomes one entry with the rule's code
(STYLE rule 7: a finding seen both ways shares one id and message). A lint finding whose line
never ran is kept and marked "not seen running".
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from torchpace import techniques
from torchpace.catalog import get as technique
from torchpace.doctor.evidence import NOT_PAYING, RuntimeFinding, estimated
from torchpace.doctor.sites import Site
from torchpace.findings import Applies, DoctorFinding, Finding


def applies(technique_id: str | None) -> Applies:
    """How torchpace can apply a technique to the doctor's target, a script: its verb (once the
    installed torchpace has it) and whether a script tune can try it, from the registry."""
    verb = techniques.verb(technique_id or "")
    try:
        speedups = importlib.import_module("torchpace.speedups")
    except ImportError:
        speedups = None
    has_verb = verb is not None and speedups is not None and hasattr(speedups, verb)
    tune = techniques.script_tunable(technique_id or "")
    return Applies(f"torchpace.speedups.{verb}" if has_verb else None, tune)


def lint_files(paths: Iterable[str]) -> tuple[list[Finding], list[str]]:
    """Lint findings of the default rules for these files, and files that could not be read."""
    from torchpace.lint.engine import lint_file
    from torchpace.lint.results import FileResult
    from torchpace.lint.rules import RULES

    rules = [r for r in RULES if r.default]
    findings: list[Finding] = []
    errors: list[str] = []
    for path in sorted(set(paths)):
        result = lint_file(path, rules)
        if isinstance(result, FileResult):
            findings.extend(result.findings)
        else:
            errors.append(str(result))
    return findings, errors


def entry(technique_id: str, **kw: Any) -> DoctorFinding:
    """A finding of ``technique_id``, with how torchpace applies it (the registry)."""
    return DoctorFinding(technique=technique_id, applies=applies(technique_id), **kw)


def _from_runtime(f: RuntimeFinding) -> DoctorFinding:
    found = entry(
        f.technique,
        pattern=f.pattern,
        severity=f.severity,
        message=f.message,
        fix=f.fix,
        path=None if f.site is None else f.site[0],
        line=None if f.site is None else f.site[1],
        gain=f.gain,
        measured=dict(f.measured),
    )
    if not f.plan_applies:
        found.applies = replace(found.applies, tune=False)
    return found


def _same_place(found: DoctorFinding, lint: Finding) -> bool:
    loc = lint.location
    return (
        found.path is not None
        and found.line is not None
        and os.path.abspath(loc.path) == found.path
        and loc.line <= found.line <= loc.end_line
    )


def merge(
    runtime: list[RuntimeFinding],
    lint: list[Finding],
    *,
    lines_seen: set[Site],
    syncs: list[dict[str, Any]],
    checked: dict[str, str] | None = None,
) -> list[DoctorFinding]:
    """``checked``: technique -> why its runtime pattern found nothing to report on this run; a
    lint finding of that technique carries it (a VAE's "CUDA loop without autocast" ranked
    second on a CPU run whose own bf16 timing said bf16 would not pay)."""
    checked = checked or {}
    entries = [_from_runtime(f) for f in runtime]
    for finding in lint:
        loc = finding.location
        path = os.path.abspath(loc.path)
        span = range(loc.line, loc.end_line + 1)
        twin = next(
            (
                e
                for e in entries
                if e.source == "runtime"
                and e.technique == finding.technique
                and _same_place(e, finding)
            ),
            None,
        )
        if twin is not None:
            twin.merged_with_lint(finding.code, finding.message)
            continue
        ran = any((path, line) in lines_seen for line in span)
        at_line = [
            r
            for r in syncs
            if finding.technique == "avoid-syncs" and r["path"] == path and r["line"] in span
        ]
        measured: dict[str, Any] = {}
        if at_line:
            measured = {
                "syncs_per_step": sum(r["per_step"] for r in at_line),
                "blocked_s_per_step": (
                    None
                    if any(r["blocked_s_per_step"] is None for r in at_line)
                    else sum(r["blocked_s_per_step"] for r in at_line)
                ),
            }
        entries.append(
            entry(
                finding.technique,
                source="lint",
                code=finding.code,
                severity="info",
                message=finding.message,
                fix=technique(finding.technique).title,
                path=path,
                line=loc.line,
                measured=measured,
                status="seen running" if (ran or at_line) else "not seen running",
                runtime_check=checked.get(finding.technique),
            )
        )
    return rank(entries)


def rank(entries: list[DoctorFinding]) -> list[DoctorFinding]:
    """Measured gains first (largest first), then runtime findings, then lint findings seen
    running, then those not seen; a lint finding the run measured as not paying here comes after
    the others of its status."""
    severity = {"high": 0, "moderate": 1, "info": 2}
    status = {"measured": 0, "seen running": 1, "not seen running": 2}
    return sorted(
        entries,
        key=lambda e: (
            not estimated(e.gain),
            -(e.gain or 0.0),
            status[e.status],
            NOT_PAYING in (e.runtime_check or ""),
            severity[e.severity],
            e.path or "",
            e.line or 0,
        ),
    )
