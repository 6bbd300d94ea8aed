"""Lint Jupyter notebooks: their code cells joined into one virtual Python source.

Each code cell contributes its lines, then a newline, so every line of the virtual source
belongs to exactly one cell and keeps its place. IPython syntax is not Python: a line magic
(``%timeit f()``), a shell line (``!pip install x``, ``files = !ls``) or a help request
(``obj?``, ``?obj``) becomes ``pass`` at the same indentation, lines it continues with ``\\``
becoming empty (a magic or shell assignment, ``files = !ls``, keeps its names: ``files =
None``; ``%run`` and ``%store`` become ``globals()``, names bound out of sight), and a cell
magic (``%%bash``) blanks its whole cell unless the cell body is Python (``%%time``,
``%%timeit``, ``%%capture``, ``%%prun``). So line numbers never shift.

Findings are then reported per cell: ``cell`` is the 1-based index of the cell among all cells
of the notebook, markdown included (``cells[cell - 1]`` in the file, as ruff counts), and
``line`` is the line within that cell. Only a line that begins a logical line can be IPython
syntax: one inside brackets, a triple-quoted string or after a backslash is Python's (a
``% (a, b)`` continuing a format string).
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, replace
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from torchpace.findings import Edit, Finding, Fix

_NEWLINE = re.compile(r"\r\n|\r|\n")
# A line magic, a shell escape, a magic or shell assignment, or a help request.
_MAGIC = re.compile(
    r"^\s*(?:[%!]|\?+[\w.]|[\w.]+\?\??\s*$)"
    r"|^\s*[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*[%!]"
)
# Cell magics whose body is still Python, so only the ``%%`` line is blanked.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})


@dataclass(frozen=True)
class Notebook:
    """The virtual source of a notebook's code cells and where each cell starts in it."""

    source: bytes
    cells: tuple[int, ...]  # the notebook cell number of each code cell, in order
    starts: tuple[int, ...]  # the virtual line where each code cell starts (1-based)
    # Cells blanked because they are not Python even after the IPython rewriting (an automagic
    # shell line such as ``ls -l data``, a cell of another kernel's syntax): "cell N: why".
    skipped: tuple[str, ...] = ()

    def without_unparsable_cells(self) -> Notebook:
        """This notebook with each code cell that does not parse on its own blanked (its lines
        kept as empty lines, so every other cell keeps its place) and named in ``skipped``.
        Jupyter runs cells one by one, so a cell that fails alone is not Python to lint; the
        rest of the notebook still is."""
        import ast
        import warnings

        lines = self.source.decode("utf-8").split("\n")[:-1]
        bounds = [*self.starts, len(lines) + 1]
        skipped = list(self.skipped)
        for i, cell in enumerate(self.cells):
            first, end = bounds[i] - 1, bounds[i + 1] - 1
            text = "\n".join(lines[first:end]) + "\n"
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ast.parse(text)
            except SyntaxError as exc:
                lines[first:end] = [""] * (end - first)
                skipped.append(f"cell {cell}: syntax error at line {exc.lineno or 1}: {exc.msg}")
            except (ValueError, RecursionError, MemoryError) as exc:
                lines[first:end] = [""] * (end - first)
                skipped.append(f"cell {cell}: cannot parse: {exc or type(exc).__name__}")
        source = "".join(line + "\n" for line in lines)
        return replace(self, source=source.encode("utf-8"), skipped=tuple(skipped))

    def locate(self, line: int) -> tuple[int, int]:
        """(cell number, line within the cell) of a virtual line."""
        i = max(bisect.bisect_right(self.starts, line) - 1, 0)
        return self.cells[i], line - self.starts[i] + 1

    def where(self, line: int) -> str:
        cell, in_cell = self.locate(line)
        return f"cell {cell}, line {in_cell}"

    def relocate(self, finding: Finding) -> Finding:
        """``finding`` with its position (and its fix's edits) given within its cell."""
        loc = finding.location
        cell, line = self.locate(loc.line)
        shift = loc.line - line
        location = replace(loc, cell=cell, line=line, end_line=loc.end_line - shift)
        return replace(finding, location=location, fix=self._relocate_fix(finding.fix, loc.line))

    def _relocate_fix(self, fix: Fix | None, line: int) -> Fix | None:
        if fix is None:
            return None
        i = max(bisect.bisect_right(self.starts, line) - 1, 0)
        first = self.starts[i]
        last = self.starts[i + 1] - 1 if i + 1 < len(self.starts) else None
        edits: list[Edit] = []
        for e in fix.edits:
            if e.start_line < first or (last is not None and e.end_line > last):
                return None  # an edit in another cell cannot be stated per cell
            edits.append(
                replace(e, start_line=e.start_line - first + 1, end_line=e.end_line - first + 1)
            )
        return replace(fix, edits=tuple(edits))


# Magics that bind names the cell's text does not show: ``%run script.py`` (the script's
# globals), ``%store -r`` (stored variables), ``%load_ext``/``%load`` aside.
_BINDING_MAGIC = re.compile(r"^\s*%(?:run|store)\b")
# A magic or shell assignment: ``files = !ls``, ``t = %timeit -o f()``.
_MAGIC_ASSIGNMENT = re.compile(r"^\s*([\w.]+(?:\s*,\s*[\w.]+)*)\s*=\s*[%!]")


def _standing_in_for(line: str) -> str:
    """The Python a line of IPython syntax becomes: ``pass``, but a magic or shell assignment
    keeps its names bound (``files = None``), and a magic that binds names the text does not
    show becomes ``globals()``, which readers take as names bound out of sight."""
    if _BINDING_MAGIC.match(line):
        return "globals()"
    assigned = _MAGIC_ASSIGNMENT.match(line)
    if assigned:
        return f"{assigned.group(1)} = None"
    return "pass"


def _python_lines(lines: list[str]) -> list[str]:
    """The cell's lines with IPython syntax made blank-equivalent, one output line per input."""
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    if first.startswith("%%"):
        magic = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
        if magic not in _PYTHON_CELL_MAGICS:
            return ["" for _ in lines]
    if not any(_MAGIC.match(line) or line.lstrip().startswith("%%") for line in lines):
        return lines  # plain Python: no need to find where logical lines begin
    out: list[str] = []
    continues = False  # the previous line was IPython syntax ending with a backslash
    for line, starts in zip(lines, _logical_starts(lines), strict=True):
        if continues:
            out.append("")
        elif starts and (_MAGIC.match(line) or line.lstrip().startswith("%%")):
            out.append(line[: len(line) - len(line.lstrip())] + _standing_in_for(line))
        else:
            out.append(line)
            continue
        continues = line.rstrip().endswith("\\")
    return out


# A Databricks notebook exported as a .py file: its first line, and the line between cells.
DATABRICKS_HEADER = b"# Databricks notebook source"
_DATABRICKS_CELL = re.compile(r"^# COMMAND -+\s*$")


def databricks_python(text: str) -> str:
    """A Databricks notebook's source (``# Databricks notebook source``, cells between ``#
    COMMAND ----------`` lines) with each cell's IPython syntax made Python as in a ``.ipynb``
    (Dolly's ``!deepspeed ...`` cell), one output line per input line: positions still point
    at the file's own lines."""
    lines = text.split("\n")
    out: list[str] = []
    cell: list[str] = []
    for line in lines:
        if _DATABRICKS_CELL.match(line):
            out += [*_python_lines(cell), line]
            cell = []
        else:
            cell.append(line)
    out += _python_lines(cell)
    return "\n".join(out)


def _logical_starts(lines: list[str]) -> list[bool]:
    """Whether each line begins a logical line: not inside brackets or a triple-quoted string
    opened above, nor after a backslash (``print("%d"\\n      % (a,))``: the second line is
    the first's ``%`` operator, not a magic; issue 32: three d2l cells were skipped so)."""
    starts = []
    depth, quote, joined = 0, "", False
    for line in lines:
        starts.append(depth == 0 and not quote and not joined)
        i = 0
        while i < len(line):
            ch = line[i]
            if quote:
                if ch == "\\":
                    i += 2
                    continue
                if line.startswith(quote, i):
                    i += len(quote)
                    quote = ""
                    continue
            elif ch == "#":
                break
            elif line.startswith(('"""', "'''"), i):
                quote = line[i : i + 3]
                i += 3
                continue
            elif ch in "\"'":
                quote = ch
            elif ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth = max(0, depth - 1)
            i += 1
        if len(quote) == 1:
            quote = ""  # a one-line string ends with its line (or is an error Python reports)
        joined = line.rstrip().endswith("\\") and not quote
    return starts


def _source_text(cell: dict[str, Any], number: int) -> str:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise ValueError(
        f'not a notebook: cell {number} has no valid "source" (a string or a list of strings)'
    )


def _is_python(doc: dict[str, Any]) -> bool:
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        return True
    info, kernel = meta.get("language_info"), meta.get("kernelspec")
    language = (info.get("name") if isinstance(info, dict) else None) or (
        kernel.get("language") if isinstance(kernel, dict) else None
    )
    return not isinstance(language, str) or language.lower() == "python"


def read_notebook(data: bytes) -> Notebook:
    """The virtual source of a notebook's JSON; raise ValueError saying what is wrong with it."""
    if not data.strip():
        raise ValueError("not a notebook: the file is empty (a notebook is JSON)")
    try:
        doc = json.loads(data)
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"invalid notebook JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise ValueError("invalid notebook JSON: nested too deeply") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise ValueError('not a notebook: no "cells" list at the top level (nbformat 4)')
    lines: list[str] = []
    cells: list[int] = []
    starts: list[int] = []
    python = _is_python(doc)
    for number, cell in enumerate(doc["cells"], start=1):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise ValueError(f'not a notebook: cell {number} is not an object with a "cell_type"')
        text = _source_text(cell, number)
        if cell["cell_type"] != "code" or not python:
            continue
        cells.append(number)
        starts.append(len(lines) + 1)
        cell_lines = _NEWLINE.split(text)
        if cell_lines[-1] == "":
            cell_lines.pop()  # the newline ending the last line does not start another
        lines += _python_lines(cell_lines)
    source = "".join(line + "\n" for line in lines)
    return Notebook(source.encode("utf-8"), tuple(cells), tuple(starts))


# ------------------------------------------------------------------ lines of the notebook file

_SPACE = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")


class _At(str):
    """A JSON string that remembers the offset of its opening quote in the file."""

    offset: int


def _value(text: str, i: int) -> tuple[Any, int]:
    """The JSON value at ``text[i:]`` (strings as :class:`_At`) and the offset after it."""
    i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
    c = text[i]
    if c == '"':
        value, end = scanstring(text, i + 1)
        at = _At(value)
        at.offset = i
        return at, end
    if c in "[{":
        items: list[Any] = []
        close = "]" if c == "[" else "}"
        i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
        while text[i] != close:
            item, i = _value(text, i)
            if c == "{":
                i = _SPACE.match(text, i).end() + 1  # type: ignore[union-attr]  # the colon
                value, i = _value(text, i)
                item = (item, value)
            items.append(item)
            i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
            if text[i] == ",":
                i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
        return (dict(items) if c == "{" else items), i + 1
    match = _SCALAR.match(text, i)
    if match is None:
        raise ValueError(f"invalid JSON at offset {i}")
    return match.group(), match.end()


def file_lines(data: bytes) -> dict[int, list[int]]:
    """For each cell number (1-based, all cells), the line of the ``.ipynb`` file that holds
    each of its source lines, for tools that point into the file itself (SARIF, GitHub).

    A JSON string holds no raw newline, so a source line lies on one line of the file: the
    line of the list item that holds it (nbformat writes one item per source line), or of the
    single string when ``source`` is one string. Empty for a file that is not such JSON."""
    text = data.decode("utf-8", errors="replace")
    try:
        doc, _ = _value(text, 0)
    except (ValueError, IndexError, RecursionError):
        return {}
    cells = doc.get("cells") if isinstance(doc, dict) else None
    if not isinstance(cells, list):
        return {}
    out: dict[int, list[int]] = {}
    seen, line = 0, 1  # offsets only grow: count newlines once
    for number, cell in enumerate(cells, start=1):
        source = cell.get("source") if isinstance(cell, dict) else None
        parts = [source] if isinstance(source, _At) else source
        if not isinstance(parts, list) or not all(isinstance(p, _At) for p in parts):
            continue
        rows: list[int] = []
        for part in parts:
            line += text.count("\n", seen, part.offset)
            seen = part.offset
            rows += [line] * max(1, len(_NEWLINE.split(part.removesuffix("\n"))))
        out[number] = rows
    return out
