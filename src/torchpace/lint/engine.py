"""Lint files: read and parse each once, run every selected rule, honour ``# noqa``.

Bad input (a missing path, a binary or non-UTF-8 file, a syntax error) becomes a
:class:`LintError` naming the file and the cause; the other files are still linted.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from torchpace.findings import Finding, Location
from torchpace.lint.imports import Resolver
from torchpace.lint.rule import FileContext, Rule

# Directories never worth linting: environments, VCS data, caches and build outputs.
EXCLUDED_DIRS = frozenset({".venv", "venv", ".git", "__pycache__", "build", "dist", ".tox"})
BOM = b"\xef\xbb\xbf"
_NEWLINE = re.compile(rb"\r\n|\r|\n")
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*))?", re.I)


@dataclass(frozen=True)
class LintError:
    """A file that could not be linted, and why."""

    path: str
    cause: str

    def __str__(self) -> str:
        return f"{self.path}: error: {self.cause}"


@dataclass(frozen=True)
class FileResult:
    path: str
    source: bytes  # the file as read, byte-order mark included
    findings: tuple[Finding, ...]


def discover(paths: Sequence[str]) -> Iterator[str | LintError]:
    """The ``.py`` files under ``paths`` (files as given, directories recursively, sorted)."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in EXCLUDED_DIRS)
                for name in sorted(files):
                    if name.endswith(".py"):
                        yield os.path.join(root, name)
        elif path.exists():
            yield raw
        else:
            yield LintError(raw, "no such file or directory")


def line_starts(source: bytes) -> tuple[int, ...]:
    return (0, *(m.end() for m in _NEWLINE.finditer(source)))


def parse(path: str, data: bytes) -> FileContext | LintError:
    """Parse ``data`` once and precompute what every rule reads."""
    if b"\0" in data:
        return LintError(path, "binary file (contains NUL bytes)")
    source = data[len(BOM) :] if data.startswith(BOM) else data
    try:
        source.decode("utf-8")
    except UnicodeDecodeError as exc:
        return LintError(path, f"not valid UTF-8 (byte {exc.start}: {exc.reason})")
    try:
        # Invalid escape sequences warn at parse time; they are the user's business, not ours.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        return LintError(path, f"syntax error at line {exc.lineno}: {exc.msg}")
    except (ValueError, RecursionError) as exc:
        return LintError(path, f"cannot parse: {exc}")
    nodes = tuple(ast.walk(tree))
    names = Resolver.from_nodes(list(nodes))
    calls = tuple((n, names.qualname(n.func)) for n in nodes if isinstance(n, ast.Call))
    return FileContext(path, source, tree, nodes, calls, names, line_starts(source))


def _char_col(line: bytes, byte_col: int) -> int:
    """1-based character column of a 0-based UTF-8 byte offset."""
    return len(line[:byte_col].decode("utf-8", errors="replace")) + 1


def _line(ctx: FileContext, lineno: int) -> bytes:
    starts = ctx.line_starts
    end = starts[lineno] if lineno < len(starts) else len(ctx.source)
    return ctx.source[starts[lineno - 1] : end]


def _suppressed(ctx: FileContext, lineno: int, code: str) -> bool:
    match = _NOQA.search(_line(ctx, lineno).decode("utf-8"))
    if match is None:
        return False
    codes = match.group("codes")
    return codes is None or code in {c.strip().upper() for c in codes.split(",")}


def check(ctx: FileContext, rules: Iterable[Rule]) -> tuple[Finding, ...]:
    """Run ``rules`` over one parsed file; findings sorted by position, ``# noqa`` honoured."""
    found: list[Finding] = []
    for rule in rules:
        for report in rule.check(ctx):
            node = report.node
            line, end_line = node.lineno, node.end_lineno  # type: ignore[attr-defined]
            if _suppressed(ctx, line, rule.code):
                continue
            col = _char_col(_line(ctx, line), node.col_offset)  # type: ignore[attr-defined]
            end_col = _char_col(_line(ctx, end_line), node.end_col_offset)  # type: ignore[attr-defined]
            location = Location(ctx.path, line, col, end_line, end_col)
            found.append(
                Finding(rule.code, rule.name, rule.technique, rule.message, location, report.fix)
            )
    found = list(dict.fromkeys(found))  # one rule may reach a node twice (call and decorator)
    found.sort(key=lambda f: (f.location.line, f.location.col, f.code))
    return tuple(found)


def lint_source(path: str, data: bytes, rules: Iterable[Rule]) -> FileResult | LintError:
    ctx = parse(path, data)
    if isinstance(ctx, LintError):
        return ctx
    return FileResult(path, data, check(ctx, rules))


def lint_file(path: str, rules: Iterable[Rule]) -> FileResult | LintError:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return LintError(path, exc.strerror or str(exc))
    return lint_source(path, data, rules)


def lint_paths(paths: Sequence[str], rules: Sequence[Rule]) -> list[FileResult | LintError]:
    """Lint every file under ``paths``; errors are returned in order, never raised."""
    return [
        item if isinstance(item, LintError) else lint_file(item, rules) for item in discover(paths)
    ]


def select(rules: Sequence[Rule], select: str | None, ignore: str | None) -> list[Rule]:
    """The rules whose codes start with one of ``select`` and none of ``ignore`` (comma lists).

    Raises ValueError naming an entry that matches no rule.
    """

    def parse_codes(text: str | None) -> list[str]:
        codes = [c.strip().upper() for c in (text or "").split(",") if c.strip()]
        for c in codes:
            if not any(r.code.startswith(c) for r in rules):
                raise ValueError(f"unknown rule code or prefix {c!r}")
        return codes

    chosen, dropped = parse_codes(select), parse_codes(ignore)
    return [
        r
        for r in rules
        if (not chosen or any(r.code.startswith(c) for c in chosen))
        and not any(r.code.startswith(c) for c in dropped)
    ]
