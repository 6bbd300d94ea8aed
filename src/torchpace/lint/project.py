"""Project-level facts: helpers in one linted file that another calls on every step, and model
classes defined in another file.

A training loop often calls helpers kept in another file of the same project: DINO's
``utils.clip_gradients(model, clip)`` reads every parameter's norm with ``.item()``, MAE's
``misc.all_reduce_mean(loss)`` builds a tensor on the host and moves it, once per step. Per file,
the loop's file sees a call it cannot follow and the helper's file sees no loop, so both stayed
silent (issue 16, benchmarks/realworld/).

Linting records, per file whose loops were analysed and that may use an accelerator, the calls
its hot code makes to functions imported from another module (``import utils`` +
``utils.f()``, ``from util.misc import f`` + ``f()``; :func:`torchpace.lint.engine.calls_out`).
:func:`step_callees` resolves each module to a linted file beside the caller or in a directory
above it (up to :data:`MAX_LEVELS`), and the command lints those files once more with the
functions as hot entry points (:func:`torchpace.lint.loops.analyse`), on the device their caller
uses. Only module-level functions are followed. No file is parsed twice unless another file's
loop calls into it.
"""

from __future__ import annotations

import ast
import functools
import os
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

from torchpace.lint.engine import MAX_PYTHON_BYTES, parse
from torchpace.lint.results import FileResult
from torchpace.lint.rule import FileContext
from torchpace.lint.tree import subtree

# How far above the calling file a module is looked for: scripts import siblings (``import
# utils``) or packages rooted one or two directories up (``from util.misc import f``).
MAX_LEVELS = 3


def _key(path: str | Path) -> str:
    return os.path.normcase(os.path.abspath(path))


def _candidates(module: str, caller: Path, level: int = 0) -> Iterator[Path]:
    """The files ``import module`` from ``caller`` may mean, nearest first: beside it or up to
    :data:`MAX_LEVELS` directories above (``level`` > 0: a relative import, from the caller's
    package)."""
    parts = [p for p in module.split(".") if p]
    bases = [caller.parent, *caller.parent.parents]
    for base in bases[level - 1 : level] if level else bases[: MAX_LEVELS + 1]:
        yield base.joinpath(*parts).with_suffix(".py") if parts else base / "__init__.py"
        yield base.joinpath(*parts, "__init__.py")


def _module_file(module: str, caller: Path, linted: dict[str, str]) -> str | None:
    """The linted file that ``import module`` from ``caller`` most likely means."""
    return next((k for c in _candidates(module, caller) if (k := _key(c)) in linted), None)


def step_callees(results: Sequence[FileResult]) -> dict[str, frozenset[str]]:
    """For each linted file, the names of its module-level functions that another linted file
    calls on every training step (module doc), from the first pass's ``calls_out``."""
    linted = {_key(r.path): r.path for r in results if not r.notebook}
    found: dict[str, set[str]] = defaultdict(set)
    for r in results:
        for module, function in r.calls_out:
            target = _module_file(module, Path(r.path), linted)
            if target is not None and target != _key(r.path):
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
    """The file ``import module`` means from ``caller`` (see :func:`_candidates`)."""
    return next((c for c in _candidates(module, caller, level) if c.is_file()), None)


# Files parsed for their classes or functions, each once per process (a project's models.py
# is imported by every script beside it).
@functools.lru_cache(maxsize=64)
def _parsed(path: Path) -> FileContext | None:
    try:
        if path.stat().st_size > MAX_PYTHON_BYTES:
            return None
        ctx = parse(str(path), path.read_bytes())
    except OSError:
        return None
    return ctx if isinstance(ctx, FileContext) else None


@functools.lru_cache(maxsize=512)
def conv_classes(path: Path) -> frozenset[str]:
    """The classes of the file at ``path`` that build conv layers, directly or through other
    classes of the same file (a ResNet built from its Bottleneck blocks)."""
    ctx = _parsed(path)
    if ctx is None:
        return frozenset()
    classes = {c.name: c for c in ctx.of_type(ast.ClassDef)}
    made = {
        name: {n for n in subtree(cls) if isinstance(n, ast.Call)} for name, cls in classes.items()
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


# --------------------------------------------------------------------------- device helpers


@functools.lru_cache(maxsize=512)
def _cuda_functions(path: Path) -> frozenset[str]:
    """Module-level functions of the file at ``path`` that return a CUDA device in some
    branch (``return torch.device("cuda" if torch.cuda.is_available() else "cpu")``)."""
    from torchpace.lint.device import is_cuda_device

    ctx = _parsed(path)
    if ctx is None:
        return frozenset()
    return frozenset(
        f.name
        for f in ctx.tree.body
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any(
            isinstance(n, ast.Return) and is_cuda_device(n.value, ctx.names) for n in subtree(f)
        )
    )


def device_helper_gives_cuda(ctx: FileContext, call: ast.Call) -> bool:
    """``device = get_device()`` with ``get_device`` imported from a project file that returns
    a CUDA device (``from utils import get_device``, ``import utils`` + ``utils.get_device()``)."""
    target = ctx.names.dotted(call.func)
    if target is None or "." not in target:
        return False
    module, function = target.rsplit(".", 1)
    path = find_module(module, Path(ctx.path))
    return path is not None and function in _cuda_functions(path)
