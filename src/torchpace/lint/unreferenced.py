"""Findings in code that nothing in the project names: left out of a directory's lint.

A class or function defined at a module's top level, that no file of the linted directory
names anywhere else (its sources, notebooks and configuration files, where a YAML config names
the classes it builds), nor only from other such definitions, never runs: YOLOv7's
``utils/loss.py`` keeps three loss classes no script builds (``RankSort``, ``aLRPLoss``,
``APLoss``), and their host-built tensors are no step's cost (issue 32's judges called findings
there false, as dead code). Their findings are left out and counted in a note.

It is read only of a directory linted (a file named alone shows too little of its project),
whose project is its git repository (or the directory, outside one: a subfolder is read with
the files beside it), read as the lint walk reads it (git-ignored files left out). Never of an
installable package (a ``setup.py``, ``pyproject.toml`` or ``setup.cfg`` at or above the file,
up to the project's top: what it defines is for its users to call), a decorated definition (a
registry's, such as a model library's ``@register_model``), a test, a ``hubconf.py`` (torch.hub's
entry points) or a notebook's. A name
written anywhere else, in a string, a document or a launcher (a Makefile, a job script), counts
as a use; not on a line commented out in code, a configuration or a shell script
(``# self.tiny_att = RWKV_TinyAttn(config)``), which nothing runs. A project of more than
:data:`MAX_FILES` text files is not read: nothing is left out.
"""

from __future__ import annotations

import ast
import bisect
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from torchpace.lint.discovery import (
    DEFAULT_EXCLUDES,
    Spec,
    git_root,
    ignored,
    outer_specs,
    read_spec,
)
from torchpace.lint.loops import dotted
from torchpace.lint.results import FileResult, LintError

# What a project's files may name its definitions in: code, notebooks, configuration, docs, and
# the files that launch its scripts (a Makefile's ``python -c "import lib; lib.fit()"``).
TEXT_SUFFIXES: tuple[str, ...] = (".py", ".ipynb", ".yaml", ".yml", ".json", ".toml", ".cfg")
TEXT_SUFFIXES += (".ini", ".sh", ".bash", ".zsh", ".slurm", ".sbatch", ".md", ".rst", ".txt")
TEXT_NAMES = frozenset({"Makefile", "makefile", "GNUmakefile", "Dockerfile", "Justfile"})
CODE_SUFFIXES = (".py", ".ipynb")
# Files whose lines starting with ``#`` are comments (a notebook's within its JSON strings).
COMMENTED_SUFFIXES: tuple[str, ...] = (*CODE_SUFFIXES, ".yaml", ".yml", ".toml", ".cfg", ".ini")
COMMENTED_SUFFIXES += (".sh", ".bash", ".zsh", ".slurm", ".sbatch")
_COMMENT = re.compile(r'[ \t]*"?[ \t]*#')
MAX_TEXT_BYTES = 1 << 20  # a larger configuration or text file is data, not what names code
MAX_CODE_BYTES = 64 << 20  # a notebook with its outputs: read whole, up to this
MAX_FILES = 50_000  # a project with more text files than this: nothing is left out
PACKAGE_FILES = ("setup.py", "pyproject.toml", "setup.cfg")
_SKIPPED_DIRS = frozenset({"site-packages", "dist-packages"})
_TEST_FOLDERS = frozenset({"tests", "test", "testing", "test_utils"})


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


def project_root(directory: Path) -> Path:
    """The top of the project a linted directory is in: its git repository's, or the directory
    itself outside one (a subfolder linted alone is read with the files beside it)."""
    return git_root(directory) or directory


def _root_of(path: Path, roots: Sequence[Path]) -> Path | None:
    inside = [r for r in roots if r == path or r in path.parents]
    return min(inside, key=lambda r: len(r.parts)) if inside else None  # the outermost


def _installable(path: Path, root: Path) -> bool:
    folder = path.parent
    while True:
        if any((folder / name).is_file() for name in PACKAGE_FILES):
            return True
        if folder == root or root not in folder.parents:
            return False
        folder = folder.parent


def _a_test(path: Path) -> bool:
    name = path.name
    return (
        name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
        or bool(_TEST_FOLDERS.intersection(path.parts[:-1]))
    )


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
        and not (
            isinstance(node, ast.ClassDef)
            and any((dotted(b) or "").endswith("TestCase") for b in node.bases)
        )
    ]


def _read(path: Path, limit: int) -> str | None:
    """The text of a regular file of at most ``limit`` bytes (a FIFO or a device is never
    opened: reading one could block or never end)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    return None if len(data) > limit else data.decode("utf-8", errors="replace")


def _texts(root: Path) -> Iterator[tuple[Path, str]] | None:
    """Every text file of the project under ``root`` that may name its code, git-ignored
    folders and files left out as the lint walk leaves them; None for a project with more
    than :data:`MAX_FILES` of them (too many to read: nothing is left out)."""
    paths: list[tuple[Path, int]] = []
    outer = outer_specs(root)
    specs_at: dict[Path, list[Spec]] = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        inherited = outer if here == root else specs_at[here.parent]
        specs = specs_at[here] = inherited + read_spec(here, here / ".gitignore")
        dirs[:] = [
            d
            for d in dirs
            if d not in DEFAULT_EXCLUDES
            and d not in _SKIPPED_DIRS
            and not ignored(specs, here / d, is_dir=True)
            and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))  # a virtual env
        ]
        for name in files:
            code = name.endswith(CODE_SUFFIXES)
            if not (code or name.endswith(TEXT_SUFFIXES) or name in TEXT_NAMES):
                continue
            if ignored(specs, here / name, is_dir=False):
                continue
            paths.append((here / name, MAX_CODE_BYTES if code else MAX_TEXT_BYTES))
            if len(paths) > MAX_FILES:
                return None
    return ((path, text) for path, limit in paths if (text := _read(path, limit)) is not None)


def _unnamed(root: Path, candidates: list[_Definition]) -> set[str]:
    """The candidates' names that no text under ``root`` uses, other than in their own
    definitions or in those of names found unused too."""
    texts = _texts(root)
    if texts is None:
        return set()
    names = {d.name for d in candidates}
    spans: dict[Path, list[_Definition]] = {}
    for d in candidates:
        spans.setdefault(d.path, []).append(d)
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names))) + r")\b")
    used_by: dict[str, set[str]] = {n: set() for n in names}  # name -> names whose code uses it
    live: set[str] = set()
    for path, text in texts:
        inside = spans.get(path.resolve(), [])
        starts = [0] + [m.end() for m in re.finditer("\n", text)] if inside else []
        commented = path.name.endswith(COMMENTED_SUFFIXES)
        for match in pattern.finditer(text):
            name = match.group(1)
            if name in live:
                continue
            if commented and _COMMENT.match(text, text.rfind("\n", 0, match.start()) + 1):
                continue  # a line commented out, or a comment's prose: nothing runs it
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
    roots = [project_root(Path(p).resolve()) for p in paths if Path(p).is_dir()]
    if not roots:
        return list(results), []
    candidates: dict[Path, list[_Definition]] = {}
    where: dict[str, tuple[Path, list[_Definition]]] = {}
    for r in results:
        if not isinstance(r, FileResult) or r.notebook or not r.findings:
            continue
        path = Path(r.path).resolve()
        root = _root_of(path, roots)
        if root is None or _a_test(path.relative_to(root)) or _installable(path, root):
            continue
        if path.name == "hubconf.py":
            continue  # its functions are torch.hub's entry points, named by hub users only
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
