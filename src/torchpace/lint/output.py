"""Render lint results as text (one line per finding, then a summary), JSON, or GitHub Actions
workflow commands. SARIF lives in :mod:`torchpace.lint.sarif`.

A finding in a notebook is placed as ``path:cell N:line:col`` (see :mod:`.notebooks`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from torchpace.findings import Finding, Location
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
    findings: Sequence[Finding], *, files: int, fixed: int = 0, notebook_unfixed: int = 0
) -> str:
    """``path:line:col: CODE message`` per finding, then a summary line.

    ``notebook_unfixed``: findings in notebooks whose fix ``--fix`` left unapplied.
    """
    lines = [f"{position(f.location)}: {f.code} {f.message}" for f in findings]
    count = sum(1 for f in findings if fixable(f))
    where = _plural(files, "file")
    if not findings:
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


def render_github(
    findings: Sequence[Finding], errors: Sequence[LintError], levels: Mapping[str, str]
) -> str:
    """One ``::warning`` (``::notice`` for info-level rules) per finding, ``::error`` per error.

    A notebook's finding is annotated on the file, its cell and line in the message: the
    lines of a notebook's JSON are not the lines of its cells.
    """
    out = []
    for f in findings:
        loc = f.location
        kind = "notice" if levels.get(f.code) == "info" else "warning"
        title = f"{f.code} {f.name}"
        if loc.cell is None:
            props: dict[str, object] = {
                "file": loc.path,
                "line": loc.line,
                "col": loc.col,
                "endLine": loc.end_line,
                "endColumn": loc.end_col,
                "title": title,
            }
            out.append(_command(kind, props, f.message))
        else:
            where = f"cell {loc.cell}, line {loc.line}, col {loc.col}"
            out.append(_command(kind, {"file": loc.path, "title": title}, f"{where}: {f.message}"))
    out += [_command("error", {"file": e.path, "title": "torchpace"}, e.cause) for e in errors]
    return "\n".join(out)
