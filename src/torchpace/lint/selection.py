"""Which rules run on which file: ``select``, ``extend-select``, ``ignore``, per-file ignores.

An entry is a rule code (``TP201``) or a prefix of codes (``TP2``, ``TP``). Rules that are off
by default (``Rule.default`` is False) run only when a ``select`` or ``extend-select`` entry
names their *full* code: a prefix never turns them on, so new opt-in rules do not appear in a
project that selected ``TP``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from torchpace.lint.rule import Rule


def parse_codes(entries: Iterable[str], rules: Sequence[Rule], *, where: str = "") -> list[str]:
    """Upper-cased, stripped entries; raise ValueError naming one that matches no rule."""
    codes = [e.strip().upper() for e in entries if e.strip()]
    for code in codes:
        if not any(r.code.startswith(code) for r in rules):
            raise ValueError(f"unknown rule code or prefix {code!r}{where}")
    return codes


def split_codes(text: str | None) -> list[str]:
    """The entries of a comma-separated command-line list."""
    return [c for c in (text or "").split(",") if c.strip()]


def _enables(entry: str, rule: Rule) -> bool:
    return entry == rule.code or (rule.default and rule.code.startswith(entry))


def _drops(entries: Iterable[str], rule: Rule) -> bool:
    return any(rule.code.startswith(e) for e in entries)


def choose(
    rules: Sequence[Rule],
    *,
    select: Sequence[str] | None = None,
    extend_select: Sequence[str] = (),
    ignore: Sequence[str] = (),
) -> tuple[Rule, ...]:
    """The rules to run: ``select`` (or every default rule when None) plus ``extend_select``,
    less ``ignore``. Entries must already be checked with :func:`parse_codes`."""
    return tuple(
        r
        for r in rules
        if (
            (r.default if select is None else any(_enables(e, r) for e in select))
            or any(_enables(e, r) for e in extend_select)
        )
        and not _drops(ignore, r)
    )


def select(rules: Sequence[Rule], select: str | None, ignore: str | None) -> list[Rule]:
    """The rules chosen by comma-separated ``select`` and ``ignore`` lists (None: defaults).

    Raises ValueError naming an entry that matches no rule.
    """
    chosen = parse_codes(split_codes(select), rules) if select else None
    return list(choose(rules, select=chosen, ignore=parse_codes(split_codes(ignore), rules)))


@dataclass(frozen=True)
class Selection:
    """The rules to run, and the per-file ignores of a config file (globs relative to ``root``)."""

    rules: tuple[Rule, ...]
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    root: Path = Path()

    def codes_for(self, path: str) -> tuple[str, ...]:
        """The codes of the rules to run on ``path``."""
        dropped = [codes for glob, codes in self.per_file_ignores if self._matches(glob, path)]
        return tuple(r.code for r in self.rules if not any(_drops(d, r) for d in dropped))

    def _matches(self, glob: str, path: str) -> bool:
        """Ruff's rule: the glob matches the path relative to the config's directory, or the
        file name alone (``"__init__.py"``); ``*`` also matches ``/``."""
        absolute = Path(path).resolve()
        if fnmatch.fnmatchcase(absolute.name, glob):
            return True
        try:
            relative = absolute.relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return False
        return fnmatch.fnmatchcase(relative, glob.removeprefix("./"))
