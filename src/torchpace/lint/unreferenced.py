"""Findings in code that nothing in the project names: left out of a directory's lint.

A class or function defined at a module's top level, that no file of the linted directory
names anywhere else (its sources, notebooks and configuration files, where a YAML config names
the classes it builds), nor only from other such definitions, never runs: YOLOv7's
``utils/loss.py`` keeps three loss classes no script builds (``RankSort``, ``aLRPLoss``,
``APLoss``), and their host-built tensors are no step's cost (issue 32's judges called findings
there false, as dead code). Their findings are left out and counted in a note.

It is read only of a directory linted whole (a file named alone shows too little of its
project), never of an installable package (a ``setup.py``, ``pyproject.toml`` or ``setup.cfg``
at or above the file, up to the linted directory: what it defines is for its users to call),
and never of a decorated definition (a registry's, such as a model library's
``@register_model``), a test, or a notebook's. A name written anywhere else, in a comment, a
string or another definition of the same name, counts as a use.
"""

from __future__ import annotations

import ast
import bisect
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from torchpace.lint.results import FileResult, LintError

# What a project's files may name its definitions in: code, notebooks, configuration, docs.
TEXT_SUFFIXES: tuple[str, ...] = (".py", ".ipynb", ".yaml", ".yml", ".json", ".toml", ".cfg")
TEXT_SUFFIXES += (".ini", ".sh", ".md", ".rst", ".txt")
MAX_TEXT_BYTES = 1 << 20  # a larger file is data, not something that names code
PACKAGE_FILES = ("setup.py", "pyproject.toml", "setup.cfg")
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages"})


@dataclass(frozen=True)
class Left:
    """Findings left out in one definition nothing names."""

    path: str
    name: str
    findings: int


@dataclass(frozen=True)
class _Definition:
    name: str
    path: Path
    first: int
    last: int


def _root_of(path: Path, roots: Sequence[Path]) -> Path | None:
    return next((r for r in roots if r == path or r in path.parents), None)


def _installable(path: Path, root: Path) -> bool:
    folder = path.parent
    while True:
        if any((folder / name).is_file() for name in PACKAGE_FILES):
            return True
        if folder == root or root not in folder.parents:
            return False
        folder = folder.parent


def _definitions(source: bytes, path: Path) -> list[_Definition]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    return [
        _Definition(node.name, path, node.lineno, node.end_lineno or node.lineno)
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and not node.decorator_list
        and not node.name.lower().startswith("test")
        and not (node.name.startswith("__") and node.name.endswith("__"))
    ]


def _texts(root: Path) -> Iterator[tuple[Path, str]]:
    """Every text file of the project under ``root`` that may name its code."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [
            d
            for d in dirs
            if not d.startswith(".")
            and d not in _SKIPPED_DIRS
            and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))  # a virtual env
        ]
        for name in files:
            if not name.endswith(TEXT_SUFFIXES):
                continue
            path = Path(folder) / name
            try:
                if path.stat().st_size > MAX_TEXT_BYTES:
                    continue
                yield path, path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue


def _unnamed(root: Path, candidates: list[_Definition]) -> set[str]:
    """The candidates' names that no text under ``root`` uses, other than in their own
    definitions or in those of names found unused too."""
    names = {d.name for d in candidates}
    spans: dict[Path, list[_Definition]] = {}
    for d in candidates:
        spans.setdefault(d.path, []).append(d)
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names))) + r")\b")
    used_by: dict[str, set[str]] = {n: set() for n in names}  # name -> names whose code uses it
    live: set[str] = set()
    for path, text in _texts(root):
        inside = spans.get(path.resolve(), [])
        starts = [0] + [m.end() for m in re.finditer("\n", text)] if inside else []
        for match in pattern.finditer(text):
            name = match.group(1)
            if name in live:
                continue
            line = bisect.bisect_right(starts, match.start()) if inside else 0
            owner = next((d.name for d in inside if d.first <= line <= d.last), None)
            if owner is None:
                live.add(name)
            elif owner != name:
                used_by[name].add(owner)
    # a name used from a used definition is used: grow the used set to a fixed point
    grown = True
    while grown:
        grown = False
        for name in names - live:
            if used_by[name] & live:
                live.add(name)
                grown = True
    return names - live


def leave_out(
    results: Sequence[FileResult | LintError], paths: Sequence[str]
) -> tuple[list[FileResult | LintError], list[Left]]:
    """``results`` without the findings in definitions that nothing under a linted directory
    of ``paths`` names (module doc), and what was left out."""
    roots = [Path(p).resolve() for p in paths if Path(p).is_dir()]
    if not roots:
        return list(results), []
    candidates: dict[Path, list[_Definition]] = {}
    where: dict[str, tuple[Path, list[_Definition]]] = {}
    for r in results:
        if not isinstance(r, FileResult) or r.notebook or not r.findings:
            continue
        path = Path(r.path).resolve()
        root = _root_of(path, roots)
        if root is None or _installable(path, root):
            continue
        lines = {f.location.line for f in r.findings}
        holding = [
            d for d in _definitions(r.source, path) if any(d.first <= n <= d.last for n in lines)
        ]
        if holding:
            candidates.setdefault(root, []).extend(holding)
            where[r.path] = (root, holding)
    unnamed = {root: _unnamed(root, found) for root, found in candidates.items()}
    out: list[FileResult | LintError] = []
    left: list[Left] = []
    for r in results:
        if not isinstance(r, FileResult) or r.path not in where:
            out.append(r)
            continue
        root, holding = where[r.path]
        dead = [d for d in holding if d.name in unnamed[root]]
        kept = []
        counts: dict[str, int] = {}
        for f in r.findings:
            owner = next((d for d in dead if d.first <= f.location.line <= d.last), None)
            if owner is None:
                kept.append(f)
            else:
                counts[owner.name] = counts.get(owner.name, 0) + 1
        left += [Left(r.path, name, n) for name, n in counts.items()]
        out.append(replace(r, findings=tuple(kept)) if counts else r)
    return out, left
