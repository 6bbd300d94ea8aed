"""``[tool.torchpace.lint]`` in pyproject.toml, and how it combines with the command line.

::

    [tool.torchpace.lint]
    select = ["TP1", "TP3"]      # codes or prefixes; default: every rule on by default
    extend-select = ["TP405"]    # added to select (off-by-default rules need the full code)
    ignore = ["TP302"]
    per-file-ignores = { "tests/**" = ["TP1"], "__init__.py" = ["TP"] }
    exclude = ["tests/"]         # gitignore patterns a directory walk skips; default: tests,
                                 # test_*.py, conftest.py, bug-report templates
    extend-exclude = ["scratch/"]  # added to exclude

The config is the nearest pyproject.toml at or above the current directory, or ``--config``.
``--select`` and ``--ignore`` replace the config's lists; ``--extend-select`` adds to its list.
Per-file-ignore globs are relative to the config file's directory; a glob also matches a bare
file name. Any mistake (bad TOML, an unknown key or code, a wrong type) is a :class:`ConfigError`
naming the file.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchpace.lint.rule import Rule
from torchpace.lint.selection import Selection, choose, parse_codes, split_codes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with the tomllib backport
    import tomli as tomllib

KEYS = ("select", "extend-select", "ignore", "per-file-ignores", "exclude", "extend-exclude")
TABLE = "[tool.torchpace.lint]"


class ConfigError(ValueError):
    """A config file that cannot be used; ``str()`` is the one line to print."""

    def __init__(self, path: Path, cause: str) -> None:
        super().__init__(f"{path}: error: {cause}")


@dataclass(frozen=True)
class LintConfig:
    """The settings of one config file (all empty when there is none)."""

    path: Path | None = None
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] | None = None  # None: discovery.NOT_TRAINING_CODE
    extend_exclude: list[str] = field(default_factory=list)

    @property
    def root(self) -> Path:
        return Path.cwd() if self.path is None else self.path.resolve().parent


def find_config(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start``."""
    start = start.resolve()
    return next(
        (d / "pyproject.toml" for d in (start, *start.parents) if (d / "pyproject.toml").is_file()),
        None,
    )


def _strings(path: Path, key: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(path, f"{TABLE} {key} must be a list of strings, not {value!r}")
    return list(value)


def _table(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(path, exc.strerror or str(exc)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, f"invalid TOML: {exc}") from None
    table: object = doc.get("tool", {})
    for name in ("torchpace", "lint"):
        table = table.get(name, {}) if isinstance(table, dict) else table
    if not isinstance(table, dict):
        raise ConfigError(path, f"{TABLE} must be a table, not {table!r}")
    return table


def load_config(path: Path | None) -> LintConfig:
    """Read and check ``path`` (None: no config); codes are checked by :func:`selection`."""
    if path is None:
        return LintConfig()
    table = _table(path)
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(
            path, f"unknown key {unknown[0]!r} in {TABLE}; known keys: {', '.join(KEYS)}"
        )
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(path, f"{TABLE} per-file-ignores must be a table, not {per_file!r}")
    return LintConfig(
        path=path,
        select=_strings(path, "select", table["select"]) if "select" in table else None,
        extend_select=_strings(path, "extend-select", table.get("extend-select", [])),
        ignore=_strings(path, "ignore", table.get("ignore", [])),
        per_file_ignores={
            glob: _strings(path, f"per-file-ignores {glob!r}", codes)
            for glob, codes in per_file.items()
        },
        exclude=_strings(path, "exclude", table["exclude"]) if "exclude" in table else None,
        extend_exclude=_strings(path, "extend-exclude", table.get("extend-exclude", [])),
    )


def _checked(
    config: LintConfig, key: str, entries: Sequence[str], rules: Sequence[Rule]
) -> list[str]:
    """The config's entries for ``key``, each checked against the rule codes."""
    if config.path is None:
        return []
    try:
        return parse_codes(entries, rules, where=f" in {TABLE} {key}")
    except ValueError as exc:
        raise ConfigError(config.path, str(exc)) from None


def selection(
    config: LintConfig,
    rules: Sequence[Rule],
    *,
    select: str | None = None,
    extend_select: str | None = None,
    ignore: str | None = None,
) -> Selection:
    """The rules to run: the command line's comma lists over the config's settings.

    Raises ConfigError for a bad code in the config, ValueError for one on the command line.
    """
    chosen = None if config.select is None else _checked(config, "select", config.select, rules)
    extra = _checked(config, "extend-select", config.extend_select, rules)
    dropped = _checked(config, "ignore", config.ignore, rules)
    per_file = tuple(
        (glob, tuple(_checked(config, f"per-file-ignores {glob!r}", codes, rules)))
        for glob, codes in config.per_file_ignores.items()
    )
    if select is not None:  # the command line replaces the config's select and ignore
        chosen = parse_codes(split_codes(select), rules, where=" in --select")
    if ignore is not None:
        dropped = parse_codes(split_codes(ignore), rules, where=" in --ignore")
    extra += parse_codes(split_codes(extend_select), rules, where=" in --extend-select")
    ran = choose(rules, select=chosen, extend_select=extra, ignore=dropped)
    return Selection(ran, per_file, config.root)
