"""Project-level facts: the functions of one linted file that another calls on every step.

A training loop often calls helpers kept in another file of the same project: DINO's
``utils.clip_gradients(model, clip)`` reads every parameter's norm with ``.item()``, MAE's
``misc.all_reduce_mean(loss)`` builds a tensor on the host and moves it, once per step. Per file,
the loop's file sees a call it cannot follow and the helper's file sees no loop, so both stayed
silent (issue 16, benchmarks/realworld/).

Before linting, :func:`step_callees` reads the linted files that train (their bytes show
``.backward(`` or ``.step(``), finds the calls their hot code makes to functions imported from
another linted file (``import utils`` + ``utils.f()``, ``from util.misc import f`` + ``f()``),
and resolves each module to a file beside the caller or in a directory above it (up to
:data:`MAX_LEVELS`). The helper's file is then linted with those functions as hot entry points
(:func:`torchpace.lint.loops.analyse`), on the device its caller uses. Only module-level
functions are followed, and only from files that train and may use an accelerator: the cost is
one more parse of those files.
"""

from __future__ import annotations

import ast
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from torchpace.lint.device import may_use_accelerator
from torchpace.lint.engine import MAX_PYTHON_BYTES, parse
from torchpace.lint.rule import FileContext

# A file trains only if its text calls one of these (the loop analysis needs a training step).
_TRAINS = re.compile(rb"\.backward\(|\.step\(")
# How far above the calling file a module is looked for: scripts import siblings (``import
# utils``) or packages rooted one or two directories up (``from util.misc import f``).
MAX_LEVELS = 3


def _key(path: str | Path) -> str:
    return os.path.normcase(os.path.abspath(path))


def _module_file(module: str, caller: Path, linted: dict[str, str]) -> str | None:
    """The linted file that ``import module`` from ``caller`` most likely means."""
    parts = module.split(".")
    for base in [caller.parent, *caller.parent.parents][: MAX_LEVELS + 1]:
        for candidate in (
            base.joinpath(*parts).with_suffix(".py"),
            base.joinpath(*parts, "__init__.py"),
        ):
            key = _key(candidate)
            if key in linted:
                return key
    return None


def _calls_out(ctx: FileContext) -> list[tuple[str, str]]:
    """(module, function) for each call from hot code to an imported module-level name."""
    out = []
    for node, _ in ctx.loops.hot.values():
        if not isinstance(node, ast.Call):
            continue
        target = ctx.names.dotted(node.func)
        if target is not None and "." in target:
            module, function = target.rsplit(".", 1)
            out.append((module, function))
    return out


def step_callees(paths: Sequence[str]) -> dict[str, frozenset[str]]:
    """For each linted file, the names of its module-level functions that another linted file
    calls on every training step (module doc). Files that cannot be read are skipped here: the
    lint itself reports them."""
    linted = {_key(p): p for p in paths if p.endswith(".py")}
    found: dict[str, set[str]] = defaultdict(set)
    for key, path in linted.items():
        try:
            if os.stat(path).st_size > MAX_PYTHON_BYTES:
                continue
            data = Path(path).read_bytes()
        except OSError:
            continue
        if not _TRAINS.search(data):
            continue
        ctx = parse(path, data)
        if not isinstance(ctx, FileContext) or not may_use_accelerator(ctx):
            continue  # on the CPU alone, a helper's reads wait for no device either
        for module, function in _calls_out(ctx):
            target = _module_file(module, Path(path), linted)
            if target is not None and target != key:
                found[target].add(function)
    return {linted[k]: frozenset(v) for k, v in found.items()}
