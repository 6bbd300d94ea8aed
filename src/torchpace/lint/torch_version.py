"""The torch version a project declares, so ``--fix`` never applies as safe an edit that the
project's torch cannot run (issue 32: ``torch.amp.GradScaler`` written into a project whose
container pins torch 1.6).

Read without importing anything the project has, nearest the linted file first, up to the
repository's root (a folder with ``.git``; outside one, the current directory):

- ``pyproject.toml``: ``project.dependencies``, its optional dependencies, Poetry's
  ``tool.poetry.dependencies``;
- ``setup.py``, ``setup.cfg``, ``requirements*.txt`` (also in a ``requirements/`` folder) and
  ``environment.yml``: requirement strings;
- ``Dockerfile*``: a ``pytorch/pytorch:X`` or NGC ``nvcr.io/nvidia/pytorch:YY.MM`` base image,
  or a ``pip install torch==X`` line.

The lowest version a declaration allows is what counts: ``torch>=1.6`` may run on 1.6. No torch
here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

Version = tuple[int, ...]

# A requirement on torch: `torch`, `torch[opt]`, then its specifiers up to a marker or comment.
_REQ = re.compile(
    r"""(?:^|["'\s,\[])torch(?:\[[^\]]*\])?\s*"""
    r"""(?P<spec>(?:[<>=!~^]=?\s*[\w.*+-]+\s*,?\s*)*)(?=$|["';#\s,\]])""",
    re.MULTILINE,
)
_CLAUSE = re.compile(r"(?P<op>[<>=!~^]=?|===)\s*(?P<v>[\w.*+-]+)")
_IMAGE = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(?P<image>\S+)", re.IGNORECASE | re.MULTILINE)
# NGC's PyTorch containers, by the release year of their tag (YY.MM): the oldest torch of that
# year's releases (NVIDIA's container release notes). 24.xx starts at 2.2 (24.01).
_NGC_YEAR = {
    19: (1, 2, 0),
    20: (1, 4, 0),
    21: (1, 8, 0),
    22: (1, 11, 0),
    23: (1, 14, 0),
    24: (2, 2, 0),
    25: (2, 6, 0),
}


@dataclass(frozen=True)
class Declared:
    """The lowest torch version the project's declaration allows (None: any, unbounded below,
    such as ``torch<2``), and where it was read (``requirements.txt: torch==1.9.0``)."""

    lowest: Version | None
    where: str


def version(text: str) -> Version | None:
    nums = [int(n) for n in re.findall(r"\d+", text.split("+")[0])[:3]]
    return tuple(nums + [0] * (3 - len(nums))) if nums else None


def _lowest(spec: str) -> tuple[bool, Version | None]:
    """(constrained, lowest version allowed) of a requirement's specifiers."""
    clauses = list(_CLAUSE.finditer(spec))
    if not clauses:
        return False, None  # bare `torch`: any version, the newest by default
    lows = []
    for m in clauses:
        op, v = m.group("op"), version(m.group("v"))
        if v is not None and op in ("==", "===", ">=", ">", "~=", "^", "^="):
            lows.append(v)
    return True, (max(lows) if lows else None)


def _requirements(text: str, where: str) -> Declared | None:
    for m in _REQ.finditer(text):
        constrained, low = _lowest(m.group("spec"))
        if constrained:
            line = text[m.start() : m.end()].strip(" \"',[")
            return Declared(low, f"{where}: {line}")
    return None


def _docker(text: str, where: str) -> Declared | None:
    for m in _IMAGE.finditer(text):
        image = m.group("image")
        name, _, tag = image.partition(":")
        if name.endswith("pytorch/pytorch") and version(tag):
            return Declared(version(tag), f"{where}: FROM {image}")
        if name.endswith("nvidia/pytorch") and re.match(r"\d\d\.\d\d", tag):
            year = int(tag[:2])
            low = _NGC_YEAR.get(year)
            if low is None and year > max(_NGC_YEAR):
                continue  # newer than this table: current torch
            return Declared(low, f"{where}: FROM {image}")
    return _requirements(text, where)  # RUN pip install torch==X


def _pyproject(path: Path) -> Declared | None:
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    project = data.get("project", {}) if isinstance(data.get("project"), dict) else {}
    reqs = [r for r in project.get("dependencies", []) if isinstance(r, str)]
    for extra in (project.get("optional-dependencies") or {}).values():
        reqs += [r for r in extra if isinstance(r, str)] if isinstance(extra, list) else []
    for r in reqs:
        found = _requirements(r, path.name)
        if found:
            return found
    poetry = data.get("tool", {}).get("poetry", {}).get("dependencies", {})
    spec = poetry.get("torch") if isinstance(poetry, dict) else None
    if isinstance(spec, dict):
        spec = spec.get("version")
    if isinstance(spec, str) and spec.strip() not in ("", "*"):
        constrained, low = _lowest(spec if spec[0] in "<>=!~^" else f"=={spec}")
        if constrained:
            return Declared(low, f"{path.name}: torch = {spec!r}")
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _in_folder(folder: Path) -> Declared | None:
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        found = _pyproject(pyproject)
        if found:
            return found
    candidates = [folder / "setup.py", folder / "setup.cfg", folder / "environment.yml"]
    candidates += sorted(folder.glob("requirements*.txt"))
    candidates += sorted((folder / "requirements").glob("*.txt"))
    for path in candidates:
        if path.is_file():
            found = _requirements(_read(path), path.name)
            if found:
                return found
    for path in sorted(folder.glob("Dockerfile*")) + sorted(folder.glob("docker/Dockerfile*")):
        if path.is_file():
            found = _docker(_read(path), str(path.relative_to(folder)))
            if found:
                return found
    return None


@lru_cache(maxsize=256)
def declared(folder: Path) -> Declared | None:
    """The torch version declared for code in ``folder``: the nearest declaration, looking up
    to the repository's root (a folder holding ``.git``); outside a repository, up to the
    current directory when ``folder`` is inside it, else in ``folder`` alone (a stray
    requirements file in /tmp is no project's)."""
    here = folder.resolve()
    chain = (here, *here.parents)
    root = next((f for f in chain if (f / ".git").exists()), None)
    if root is None:
        cwd = Path.cwd().resolve()
        root = cwd if cwd in chain else here
    for f in chain:
        found = _in_folder(f)
        if found is not None:
            return found
        if f == root:
            break
    return None


def unsafe_reason(path: str, needs: str) -> str | None:
    """Why a fix needing torch ``needs`` must not be applied as safe to the file at ``path``:
    the project declares a torch that may be older. None when nothing is declared (the torch of
    whoever runs it) or the declaration guarantees ``needs``."""
    found = declared(Path(path).parent)
    want = version(needs)
    if found is None or want is None:
        return None
    if found.lowest is not None and found.lowest >= want:
        return None
    return f"needs torch >= {needs}; the project declares {found.where}"
