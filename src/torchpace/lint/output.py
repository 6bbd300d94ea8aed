"""Render lint results as text (one line per finding, then a summary), JSON, or GitHub Actions
workflow commands. SARIF lives in :mod:`torchpace.lint.sarif`.

A finding in a notebook is placed as ``path:cell N:line:col`` (see :mod:`.notebooks`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from torchpace._terminal import printable
from torchpace.findings import Finding, Location
from torchpace.lint.notebooks import file_lines
from torchpace.lint.results import LintError


def position(loc: Location) -> str:
    """``path:line:col``, or ``path:cell N:line:col`` in a notebook."""
    cell = "" if loc.cell is None else f"cell {loc.cell}:"
    return f"{loc.path}:{cell}{loc.line}:{loc.col}"


def _plural(n: int, noun: str, plural: str = "") -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def fixable(finding: Finding) -> bool:
    """True when ``--fix`` applies this finding's fix: a safe one, outside a notebook."""
    return (
        finding.fix is not None and finding.fix.safety == "safe" and finding.location.cell is None
    )


def render_text(
    findings: Sequence[Finding],
    *,
    files: int,
    fixed: int = 0,
    notebook_unfixed: int = 0,
    errors: int = 0,
) -> str:
    """``path:line:col: CODE message`` per finding, then a summary line.

    ``notebook_unfixed``: findings in notebooks whose fix ``--fix`` left unapplied; ``errors``:
    paths that could not be linted (or fixed), listed on stderr: never "All clear" then.
    """
    lines = [printable(f"{position(f.location)}: {f.code} {f.message}") for f in findings]
    count = sum(1 for f in findings if fixable(f))
    where = _plural(files, "file")
    if not findings and errors:
        summary = f"No findings in {where}, but {_plural(errors, 'error')} (listed below)."
    elif not findings:
        summary = f"All clear: no findings in {where}."
    else:
        summary = f"Found {_plural(len(findings), 'finding')} in {where}"
        summary += f" ({count} fixable with --fix)." if count else "."
    if fixed:
        summary += f" Fixed {fixed}."
    if notebook_unfixed:
        fixes = _plural(notebook_unfixed, "fix", "fixes")
        summary += f" Not applied: {fixes} in notebooks (torchpace does not edit notebooks)."
    return "\n".join([*lines, summary])


def render_json(findings: Sequence[Finding]) -> str:
    """A JSON list of finding objects (see :meth:`Finding.to_dict`)."""
    return json.dumps([f.to_dict() for f in findings], indent=2)


def _escape_data(text: str) -> str:
    # As the GitHub Actions toolkit escapes a command's message (actions/toolkit command.ts).
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _command(kind: str, properties: Mapping[str, object], message: str) -> str:
    props = ",".join(f"{k}={_escape_property(str(v))}" for k, v in properties.items())
    return f"::{kind} {props}::{_escape_data(message)}"


# GitHub Actions shows at most 10 annotations of each kind (notice, warning, error) per step
# (GitHub docs, "Workflow commands for GitHub Actions"); the rest would vanish silently.
ANNOTATIONS_PER_KIND = 10


def render_github(
    findings: Sequence[Finding],
    errors: Sequence[LintError],
    levels: Mapping[str, str],
    sources: Mapping[str, bytes] | None = None,
) -> str:
    """One ``::warning`` (``::notice`` for info-level rules) per finding, ``::error`` per error,
    at most :data:`ANNOTATIONS_PER_KIND` of each kind: the last one a kind has room for then
    summarises the rest, which follow as plain log lines (``path:line:col: CODE message``).

    A notebook's finding is annotated on the line of the ``.ipynb`` file that holds its source
    line (``sources``: the notebook's JSON), its cell and line in the message.
    """
    made: list[tuple[str, str, str]] = []  # (kind, annotation, plain line)
    for f in findings:
        loc = f.location
        kind = "notice" if levels.get(f.code) == "info" else "warning"
        title = f"{f.code} {f.name}"
        plain = f"{position(loc)}: {f.code} {f.message}"
        if loc.cell is None:
            props: dict[str, object] = {
                "file": loc.path,
                "line": loc.line,
                "col": loc.col,
                "endLine": loc.end_line,
                "endColumn": loc.end_col,
                "title": title,
            }
            made.append((kind, _command(kind, props, f.message), plain))
        else:
            rows = file_lines((sources or {}).get(loc.path, b"")).get(loc.cell, [])
            props = {"file": loc.path}
            if 0 < loc.line <= len(rows):
                props["line"] = rows[loc.line - 1]
            props["title"] = title
            where = f"cell {loc.cell}, line {loc.line}, col {loc.col}"
            made.append((kind, _command(kind, props, f"{where}: {f.message}"), plain))
    for e in errors:
        made.append(
            ("error", _command("error", {"file": e.path, "title": "torchpace"}, e.cause), str(e))
        )
    totals = {kind: sum(1 for m in made if m[0] == kind) for kind in ("error", "warning", "notice")}
    room = {
        k: n if n <= ANNOTATIONS_PER_KIND else ANNOTATIONS_PER_KIND - 1 for k, n in totals.items()
    }
    out: list[str] = []
    rest: list[str] = []
    for kind, annotation, plain in made:  # in the findings' order
        if room[kind]:
            room[kind] -= 1
            out.append(annotation)
        else:
            rest.append(plain)
    for kind, n in totals.items():
        if n > ANNOTATIONS_PER_KIND:
            more = f"{n - ANNOTATIONS_PER_KIND + 1} more {kind}s are listed in this step's log"
            out.append(_command(kind, {"title": f"torchpace: {n} {kind}s"}, more))
    return "\n".join(out + rest)
