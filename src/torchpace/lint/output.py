"""Render lint results: text (one line per finding, then a summary) or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence

from torchpace.findings import Finding


def render_text(findings: Sequence[Finding], *, files: int, fixed: int = 0) -> str:
    """``path:line:col: CODE message`` per finding, then a summary line."""
    lines = [
        f"{f.location.path}:{f.location.line}:{f.location.col}: {f.code} {f.message}"
        for f in findings
    ]
    fixable = sum(1 for f in findings if f.fix is not None and f.fix.safety == "safe")
    noun = "file" if files == 1 else "files"
    if not findings:
        summary = f"All clear: no findings in {files} {noun}."
    else:
        s = "" if len(findings) == 1 else "s"
        summary = f"Found {len(findings)} finding{s} in {files} {noun}"
        summary += f" ({fixable} fixable with --fix)." if fixable else "."
    if fixed:
        summary += f" Fixed {fixed}."
    return "\n".join([*lines, summary])


def render_json(findings: Sequence[Finding]) -> str:
    """A JSON list of finding objects (see :meth:`Finding.to_dict`)."""
    return json.dumps([f.to_dict() for f in findings], indent=2)
