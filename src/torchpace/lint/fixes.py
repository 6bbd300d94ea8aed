"""Apply fixes as byte edits on exact positions, and keep only those whose result parses.

Nothing outside an edit changes: the file is handled as bytes, so line endings, the encoding
and a UTF-8 byte-order mark stay as they were.
"""

from __future__ import annotations

import ast
import difflib
import os
import stat
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from torchpace._files import atomic_writer
from torchpace.findings import Edit, Finding, Fix
from torchpace.lint.engine import BOM
from torchpace.lint.notebooks import DATABRICKS_HEADER, databricks_python
from torchpace.lint.rule import line_starts


@dataclass(frozen=True)
class FixResult:
    source: bytes  # the fixed file
    applied: tuple[Finding, ...]  # the findings whose fix was applied
    refused: tuple[Finding, ...]  # fixes dropped: they overlapped another or broke the parse


def _span(starts: Sequence[int], edit: Edit) -> tuple[int, int]:
    return starts[edit.start_line - 1] + edit.start_col, starts[edit.end_line - 1] + edit.end_col


def _apply(source: bytes, fixes: Iterable[Fix]) -> bytes:
    starts = line_starts(source)
    spans = sorted((*_span(starts, e), e.text.encode("utf-8")) for f in fixes for e in f.edits)
    out, pos = [], 0
    for start, end, text in spans:
        out += [source[pos:start], text]
        pos = end
    out.append(source[pos:])
    return b"".join(out)


def _overlaps(fix: Fix, taken: list[tuple[int, int]], starts: Sequence[int]) -> bool:
    for edit in fix.edits:
        start, end = _span(starts, edit)
        # Two insertions at one point, or a replacement touching another, are ambiguous.
        if any((start < t_end and t_start < end) or start == t_start for t_start, t_end in taken):
            return True
    return False


def _parses(source: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            if source.startswith(DATABRICKS_HEADER):  # its IPython lines are not Python
                ast.parse(databricks_python(source.decode("utf-8")))
            else:
                ast.parse(source)
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return False
    return True


def apply_fixes(data: bytes, findings: Iterable[Finding], *, unsafe: bool = False) -> FixResult:
    """Apply the safe fixes of ``findings`` (and the unsafe ones when ``unsafe``) to ``data``."""
    bom = BOM if data.startswith(BOM) else b""
    source = data[len(bom) :]
    starts = line_starts(source)
    taken: list[tuple[int, int]] = []
    accepted: list[Finding] = []
    refused: list[Finding] = []
    for finding in findings:
        fix = finding.fix
        if fix is None or (fix.safety == "unsafe" and not unsafe):
            continue
        if _overlaps(fix, taken, starts) or not _parses(
            _apply(source, [f.fix for f in (*accepted, finding) if f.fix is not None])
        ):
            refused.append(finding)
            continue
        accepted.append(finding)
        taken += [_span(starts, e) for e in fix.edits]
    fixed = _apply(source, [f.fix for f in accepted if f.fix is not None])
    return FixResult(bom + fixed, tuple(accepted), tuple(refused))


def unified_diff(path: str, before: bytes, after: bytes) -> str:
    """A unified diff of a file's change, for ``--diff``."""
    return "".join(
        difflib.unified_diff(
            before.decode("utf-8").splitlines(keepends=True),
            after.decode("utf-8").splitlines(keepends=True),
            fromfile=path,
            tofile=path,
        )
    )


class NotFixable(OSError):
    """The file is there but a fix must not replace it; the message says why and what to do."""


def write_fixed(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, as bytes, keeping the file's permissions.

    A symbolic link is followed: its target is fixed and the link stays a link. A file with
    other hard links, or one its owner made read-only, is not written (:class:`NotFixable`):
    replacing it would split the links or override the owner's choice."""
    target = os.path.realpath(path)
    info = os.stat(target)
    if not info.st_mode & stat.S_IWUSR or not os.access(target, os.W_OK):
        raise NotFixable("read-only, so not fixed (make it writable to apply the fixes)")
    if info.st_nlink > 1:
        raise NotFixable(
            f"{info.st_nlink} hard links, so not fixed: replacing the file would split them "
            "(apply the fixes by hand, or with --diff and patch)"
        )
    with atomic_writer(target, "wb", keep_mode=True) as f:
        f.write(data)
