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
import functools
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from torchpace.lint.device import may_use_accelerator
from torchpace.lint.engine import MAX_PYTHON_BYTES, parse
from torchpace.lint.rule import FileContext

# A file trains only if its text shows a step or a loader (the loop analysis needs one).
_TRAINS = re.compile(rb"\.backward\(|\.step\(|loader")
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


# --------------------------------------------------------------------------- model classes

# Conv layers, as TP303 counts them (convs._CONV_MODULES; repeated here to keep this module
# free of rule imports).
_CONV_LAYERS = frozenset(
    f"torch.nn.{kind}{d}" for kind in ("Conv", "ConvTranspose") for d in ("1d", "2d", "3d")
)
# torchvision.models functions that are not model constructors.
_NOT_MODELS = frozenset({"get_model", "get_model_weights", "get_weight", "list_models"})


def find_module(module: str, caller: Path, level: int = 0) -> Path | None:
    """The file ``import module`` means from ``caller``: beside it or up to :data:`MAX_LEVELS`
    directories above (``level`` > 0: a relative import, from the caller's package)."""
    parts = [p for p in module.split(".") if p]
    bases = [caller.parent, *caller.parent.parents]
    bases = bases[level - 1 : level] if level else bases[: MAX_LEVELS + 1]
    for base in bases:
        for candidate in (
            base.joinpath(*parts).with_suffix(".py") if parts else base / "__init__.py",
            base.joinpath(*parts, "__init__.py"),
        ):
            if candidate.is_file():
                return candidate
    return None


@functools.lru_cache(maxsize=512)
def conv_classes(path: Path) -> frozenset[str]:
    """The classes of the file at ``path`` that build conv layers, directly or through other
    classes of the same file (a ResNet built from its Bottleneck blocks)."""
    try:
        if path.stat().st_size > MAX_PYTHON_BYTES:
            return frozenset()
        ctx = parse(str(path), path.read_bytes())
    except OSError:
        return frozenset()
    if not isinstance(ctx, FileContext):
        return frozenset()
    classes = {c.name: c for c in ctx.of_type(ast.ClassDef)}
    made = {
        name: {n for n in ast.walk(cls) if isinstance(n, ast.Call)} for name, cls in classes.items()
    }
    found = {
        name
        for name, calls in made.items()
        if any(ctx.names.qualname(c.func) in _CONV_LAYERS for c in calls)
    }
    changed = True
    while changed:
        changed = False
        for name, calls in made.items():
            if name not in found and any(
                isinstance(c.func, ast.Name) and c.func.id in found for c in calls
            ):
                found.add(name)
                changed = True
    return frozenset(found)


def builds_conv_net(ctx: FileContext, call: ast.Call, name: str | None) -> bool:
    """``call`` constructs a conv net defined elsewhere: a torchvision model, or a class that a
    project file builds from conv layers, imported by name, through its module, relatively or
    with ``from models import *`` (PyTorch-GAN, pytorch/examples' fast_neural_style)."""
    if name is not None and name.startswith("torchvision.models."):
        last = name.rsplit(".", 1)[-1]
        return last[:1].islower() and last not in _NOT_MODELS
    func = call.func
    if isinstance(func, ast.Subscript) and ctx.names.qualname(func.value) == (
        "torchvision.models.__dict__"
    ):
        return True  # ``models.__dict__[args.arch]()`` (pytorch/examples imagenet)
    caller = Path(ctx.path)
    target = ctx.names.dotted(call.func)
    if target is not None and "." in target:
        module, cls = target.rsplit(".", 1)
        path = find_module(module, caller)
        return path is not None and cls in conv_classes(path)
    if not isinstance(call.func, ast.Name) or call.func.id in ctx.loops.classes:
        return False
    wanted = call.func.id
    for node in ctx.of_type(ast.ImportFrom):
        names = {a.asname or a.name: a.name for a in node.names}
        if "*" not in names and wanted not in names:
            continue
        path = find_module(node.module or "", caller, node.level)
        if path is not None and names.get(wanted, wanted) in conv_classes(path):
            return True
    return False
