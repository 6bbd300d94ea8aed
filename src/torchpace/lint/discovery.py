"""Find the files ``torchpace lint`` reads: ``.py`` files and Jupyter notebooks.

A file named on the command line is always linted, whatever its name or ignore rules say, and
a directory named on it is walked even when it is excluded or ignored itself. Directories are
walked recursively in sorted order, skipping :data:`DEFAULT_EXCLUDES`, whatever the
``.gitignore`` files say (those in the walked tree, those of its parent directories up to the
root of the git repository it sits in, and ``.git/info/exclude``) and the *skipped* patterns:
by default :data:`NOT_TRAINING_CODE`, replaced or extended by the ``exclude`` settings.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from pathspec import GitIgnoreSpec

from torchpace.lint.results import LintError

# Environments, VCS data, caches and build outputs: never the user's code (ruff's defaults).
DEFAULT_EXCLUDES = frozenset(
    {
        ".bzr",
        ".direnv",
        ".eggs",
        ".git",
        ".hg",
        ".ipynb_checkpoints",
        ".mypy_cache",
        ".nox",
        ".pytest_cache",
        ".pytype",
        ".ruff_cache",
        ".svn",
        ".tox",
        ".venv",
        "__pycache__",
        "__pypackages__",
        "_build",
        "build",
        "dist",
        "node_modules",
        "site-packages",
        "venv",
    }
)
# Code that is not training code: unit tests and bug-report templates (linting them as training
# code was 80% of one framework's findings in the real-world corpus, issue 16,
# benchmarks/realworld/, and every one of those findings was noise), and the copies of a
# project's code that runs leave in their log folders (PointNet++'s ``log/``, wandb's run
# folders: nothing imports them; issue 32, five false findings), and benchmarks: code written to
# time a setting on purpose (a float32 baseline beside its AMP twin, a timing loop that
# synchronizes), which the lint corpus's verdict rules call wrong in context (issue 32: 9 of 13
# findings in `benchmarks/` folders and `benchmark*.py` files false), and learning-rate finders,
# a short sweep run once to pick a rate before the training run (pytorch-cifar100's
# `lr_finder.py`: its 4 findings judged negligible). Gitignore patterns,
# relative to each directory named on the command line.
NOT_TRAINING_CODE = (
    "tests/",
    "test/",
    "testing/",
    "test_utils/",
    "test_*.py",
    "*_test.py",
    "conftest.py",
    "bug_report*",
    "benchmarks/",
    "benchmark/",
    "benchmark*.py",
    "*lr_finder*.py",
    "log/",
    "logs/",
    "wandb/",
)
# What a directory walk picks up. Stubs (.pyi) hold no code that runs, so nothing to speed up.
SUFFIXES = (".py", ".ipynb")

Spec = tuple[Path, GitIgnoreSpec]  # a .gitignore's directory and its patterns


def read_spec(base: Path, file: Path) -> list[Spec]:
    try:
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []  # unreadable ignore files are skipped, as git does
    return [(base, GitIgnoreSpec.from_lines(lines))]


def ignored(specs: Sequence[Spec], path: Path, *, is_dir: bool) -> bool:
    """Git's verdict: the last matching pattern wins, and deeper files come later in ``specs``."""
    verdict: bool | None = None
    for base, spec in specs:
        try:
            relative = path.relative_to(base).as_posix()
        except ValueError:
            continue
        result = spec.check_file(relative + "/" if is_dir else relative)
        if result.include is not None:
            verdict = result.include
    return bool(verdict)


def git_root(path: Path) -> Path | None:
    """The top of the git repository ``path`` (resolved) is in; None outside one."""
    return next((d for d in (path, *path.parents) if (d / ".git").exists()), None)


def outer_specs(top: Path) -> list[Spec]:
    """The ignore files above ``top`` that apply to it: only inside a git repository."""
    top = top.resolve()
    chain = [top, *top.parents]
    root = git_root(top)
    if root is None:
        return []
    specs = read_spec(root, root / ".git" / "info" / "exclude")
    for d in reversed(chain[1 : chain.index(root) + 1]):
        specs += read_spec(d, d / ".gitignore")
    return specs


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True  # gone or unreadable: reading it reports why


def _walk(
    top: str, skip: Sequence[str], skipped: list[str], problems: list[LintError]
) -> Iterator[str]:
    """The lintable files under ``top``, sorted, excluded and git-ignored ones left out; what
    the ``skip`` patterns leave out is appended to ``skipped``, and directories that cannot be
    read and files that are not regular files to ``problems``."""
    found: list[str] = []
    outer = outer_specs(Path(top))
    absolute_top = Path(top).resolve()
    if ignored(outer, absolute_top, is_dir=True):
        outer = []  # a directory named on the command line is linted, even if ignored
    user = [(absolute_top, GitIgnoreSpec.from_lines(skip))] if skip else []
    specs_at: dict[Path, list[Spec]] = {}  # os.walk is top-down: a parent comes first

    def unreadable(exc: OSError) -> None:
        problems.append(LintError(exc.filename or top, f"cannot read: {exc.strerror or exc}"))

    for root, dirs, files in os.walk(top, onerror=unreadable):
        here = absolute_top / os.path.relpath(root, top)
        inherited = outer if here == absolute_top else specs_at[here.parent]
        specs = specs_at[here] = inherited + read_spec(here, here / ".gitignore")
        kept = []
        for d in sorted(dirs):
            if d in DEFAULT_EXCLUDES or ignored(specs, here / d, is_dir=True):
                continue
            if ignored(user, here / d, is_dir=True):
                skipped.append(os.path.normpath(os.path.join(root, d)) + os.sep)
            else:
                kept.append(d)
        dirs[:] = kept
        for name in files:
            if not name.endswith(SUFFIXES) or ignored(specs, here / name, is_dir=False):
                continue
            path = os.path.normpath(os.path.join(root, name))
            if ignored(user, here / name, is_dir=False):
                skipped.append(path)
            elif _regular(path):
                found.append(path)
            else:  # a FIFO or device named *.py: reading it could block forever
                problems.append(LintError(path, "not a regular file"))
    yield from sorted(found, key=lambda p: Path(p).parts)


def discover(
    paths: Sequence[str],
    skip: Sequence[str] = NOT_TRAINING_CODE,
    skipped: list[str] | None = None,
) -> list[str | LintError]:
    """The files to lint under ``paths``, in order, each once; a missing path is an error.

    Directory walks leave out what the ``skip`` patterns match (a file named on the command line
    is linted all the same); the files and directories left out are appended to ``skipped``."""
    out: list[str | LintError] = []
    seen: set[str] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            problems: list[LintError] = []
            candidates: Iterator[str] = iter(
                list(_walk(raw, skip, [] if skipped is None else skipped, problems))
            )
            out += problems
        elif path.is_file():
            candidates = iter([raw])
        elif path.exists():
            out.append(LintError(raw, "not a regular file"))
            continue
        else:
            out.append(LintError(raw, "no such file or directory"))
            continue
        for candidate in candidates:
            key = os.path.normcase(os.path.abspath(candidate))
            if key not in seen:
                seen.add(key)
                out.append(candidate)
    return out
