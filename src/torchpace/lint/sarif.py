"""Render lint results as SARIF 2.1.0, for code-scanning services (GitHub, Azure DevOps).

One run: the tool and the rules that ran, one result per finding (with its fix, when there is
one) and the files that could not be linted as tool notifications. URIs are relative to
``%SRCROOT%``: the root of the git repository holding the current directory (what code scanning
maps paths against), or the current directory outside a repository; a file outside the root
gets a relative URI with ``..``, never a ``file://`` URI. Columns count Unicode code points, as
the text output does. A notebook's result points at the lines of the ``.ipynb`` file that hold
the finding's source lines (no columns: a line of the file is a JSON string), and names the
cell and its line in its message and in ``properties``; its fix is left out (``--fix`` does
not edit notebooks).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from torchpace._version import __version__
from torchpace.findings import Edit, Finding
from torchpace.lint.engine import BOM
from torchpace.lint.notebooks import file_lines
from torchpace.lint.results import LintError
from torchpace.lint.rule import Rule, line_starts

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://pypi.org/project/torchpace/"  # the project's public home
_LEVELS = {"warning": "warning", "info": "note"}  # a rule's level → SARIF's
_SECTION = re.compile(r"^## What it does\n(?P<text>.*?)(?=^## |\Z)", re.M | re.S)


def source_root(start: Path) -> Path:
    """The git repository root at or above ``start``, else ``start``."""
    start = start.resolve()
    return next((d for d in (start, *start.parents) if (d / ".git").exists()), start)


def _artifact(path: str, root: Path) -> dict[str, str]:
    relative = Path(os.path.relpath(os.path.abspath(path), root)).as_posix()
    return {"uri": quote(relative), "uriBaseId": "%SRCROOT%"}


def _descriptor(rule: Rule) -> dict[str, Any]:
    match = _SECTION.search(rule.doc)
    what = " ".join(match.group("text").split()) if match else rule.message
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.message},
        "fullDescription": {"text": what},
        "help": {"text": rule.doc, "markdown": rule.doc},
        "defaultConfiguration": {"enabled": rule.default, "level": _LEVELS[rule.level]},
        "properties": {"technique": rule.technique, "tags": ["performance", rule.technique]},
    }


def _column(lines: Sequence[bytes], line: int, byte_col: int) -> int:
    """1-based code-point column of a 0-based UTF-8 byte offset."""
    return len(lines[line - 1][:byte_col].decode("utf-8", errors="replace")) + 1


def _replacement(edit: Edit, lines: Sequence[bytes]) -> dict[str, Any]:
    return {
        "deletedRegion": {
            "startLine": edit.start_line,
            "startColumn": _column(lines, edit.start_line, edit.start_col),
            "endLine": edit.end_line,
            "endColumn": _column(lines, edit.end_line, edit.end_col),
        },
        "insertedContent": {"text": edit.text},
    }


def _lines(source: bytes) -> list[bytes]:
    source = source[len(BOM) :] if source.startswith(BOM) else source
    starts = line_starts(source)
    return [source[a:b] for a, b in zip(starts, (*starts[1:], len(source)), strict=True)]


def _result(
    finding: Finding,
    rule_index: Mapping[str, int],
    levels: Mapping[str, str],
    source: bytes,
    root: Path,
) -> dict[str, Any]:
    loc = finding.location
    artifact = _artifact(loc.path, root)
    region: dict[str, int] = {
        "startLine": loc.line,
        "startColumn": loc.col,
        "endLine": loc.end_line,
        "endColumn": loc.end_col,
    }
    if loc.cell is not None:
        rows = file_lines(source).get(loc.cell, [])
        if 0 < loc.line <= len(rows):
            end = rows[min(loc.end_line, len(rows)) - 1]
            region = {"startLine": rows[loc.line - 1], "endLine": end}
        else:
            region = {}
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "level": _LEVELS[levels.get(finding.code, "warning")],
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": {"artifactLocation": artifact}}],
    }
    if region:
        result["locations"][0]["physicalLocation"]["region"] = region
    if finding.code in rule_index:
        result["ruleIndex"] = rule_index[finding.code]
    if loc.cell is not None:
        result["message"]["text"] += f" (notebook cell {loc.cell}, line {loc.line})"
        result["properties"] = {"cell": loc.cell, "cellLine": loc.line}
    elif finding.fix is not None:
        lines = _lines(source)
        change = {
            "artifactLocation": artifact,
            "replacements": [_replacement(e, lines) for e in finding.fix.edits],
        }
        result["fixes"] = [
            {
                "description": {"text": finding.fix.title},
                "artifactChanges": [change],
                "properties": {"safety": finding.fix.safety},
            }
        ]
    return result


def render_sarif(
    findings: Sequence[Finding],
    *,
    rules: Sequence[Rule],
    errors: Sequence[LintError] = (),
    sources: Mapping[str, bytes],
) -> str:
    """A SARIF 2.1.0 log of one run. ``sources``: each finding's file as read (for fixes)."""
    root = source_root(Path.cwd())
    rule_index = {r.code: i for i, r in enumerate(rules)}
    levels = {r.code: r.level for r in rules}
    notifications = [
        {
            "level": "error",
            "message": {"text": e.cause},
            "locations": [{"physicalLocation": {"artifactLocation": _artifact(e.path, root)}}],
        }
        for e in errors
    ]
    run = {
        "tool": {
            "driver": {
                "name": "torchpace",
                "version": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_descriptor(r) for r in rules],
            }
        },
        "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "invocations": [
            {"executionSuccessful": not errors, "toolExecutionNotifications": notifications}
        ],
        "results": [
            _result(f, rule_index, levels, sources.get(f.location.path, b""), root)
            for f in findings
        ],
    }
    return json.dumps({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2)
