"""Convolutional networks: the cuDNN auto-tuner (TP303), conv biases a BatchNorm cancels (TP401)."""

from __future__ import annotations

import ast
import builtins
import dataclasses
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torchpace.findings import Fix
from torchpace.lint.dataloaders import (
    COLLATE_FN_POSITION,
    built_loaders,
    framework_gpu,
    iterated_loader_calls,
    iterated_values,
)
from torchpace.lint.device import uses_cuda
from torchpace.lint.engine import parse
from torchpace.lint.loops import (
    DATALOADERS,
    assigned_in,
    bound_in,
    constructor,
    dotted,
    is_optimizer_class,
    parameter_defaults,
    returned,
    strip_moves,
)
from torchpace.lint.project import (
    builds_conv_net,
    definition,
    definition_of,
    module_file,
    project_key,
    training_helpers,
)
from torchpace.lint.results import FileResult, LintError
from torchpace.lint.rule import (
    FileContext,
    Report,
    Rule,
    argument,
    end_of,
    has_star_args,
    insert_after,
    is_const,
    keyword,
    replace,
    start_of,
)
from torchpace.lint.scale import SMALL_MODELS_DOC, SMALL_STEPS_DOC, TINY_WEIGHTS, model_weights
from torchpace.lint.tree import children, subtree

_CONVS = {f"torch.nn.Conv{d}" for d in ("1d", "2d", "3d")}
_CONV_MODULES = _CONVS | {f"torch.nn.ConvTranspose{d}" for d in ("1d", "2d", "3d")}
# Norms that subtract a per-channel mean over the positions a conv bias is constant on: the
# batch's (BatchNorm, in training) or each sample's (InstanceNorm). GroupNorm and LayerNorm
# subtract a mean over several channels, which leaves a per-channel bias partly in place.
_NORMS = {f"torch.nn.{n}{d}" for n in ("BatchNorm", "InstanceNorm") for d in ("1d", "2d", "3d")}
_FUNCTIONAL_CONVS = {f"torch.nn.functional.conv{d}" for d in ("1d", "2d", "3d")}
_FUNCTIONAL_BATCH_NORM = "torch.nn.functional.batch_norm"
# Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, ...)
_BIAS_POSITION = 7
# F.conv2d(input, weight, bias, ...); F.batch_norm(input, running_mean, running_var, weight,
# bias, training, ...)
_FUNCTIONAL_BIAS_POSITION = 2
_TRAINING_POSITION = 5

# ---------------------------------------------------------------------------------------- TP303

# Settings that show the author chose how cuDNN runs, so the auto-tuner is not our call: any
# assignment to `benchmark` (True is the advice; False or an expression is a decision, e.g. for
# input shapes that change every step), and the others unless they keep their default.
_LEFT_AT_DEFAULT_BY: dict[str, object] = {
    "torch.backends.cudnn.deterministic": False,  # True: reproducibility wanted
    "torch.backends.cudnn.enabled": True,  # False: cuDNN is off
}
_BENCHMARK = "torch.backends.cudnn.benchmark"
_CHOOSING_CALLS = {"torch.backends.cudnn.flags", "torch.backends.cudnn.set_flags"}


# Tests that every CUDA run passes: a setting under them is the setting of every CUDA run.
_CUDA_CHECKS = frozenset({"torch.cuda.is_available", "torch.backends.cudnn.is_available"})


def _only_in_a_branch(ctx: FileContext, node: ast.AST) -> bool:
    """The statement sits in an ``if`` (``if args.seed is not None: cudnn.benchmark = False``):
    a choice for that case, not for the default run. ``if torch.cuda.is_available():`` (or
    ``if use_cuda:``, :func:`_cuda_test`) is no such choice: every run this rule is about takes
    it (issue 32: tutorial notebooks that ask for determinism there)."""
    return any(isinstance(a, ast.If) and not _cuda_test(ctx, a.test) for a in ctx.ancestors(node))


def _cuda_test(ctx: FileContext, test: ast.expr) -> bool:
    """A test that a run on CUDA passes: ``torch.cuda.is_available()``, or a test of nothing but
    names for CUDA or a GPU (``if use_cuda:``, ``if args.cuda and not args.no_gpu:``, ``if
    device.type == "cuda":``), which every CUDA run of the file takes; not ``if not use_cuda:``."""
    if isinstance(test, ast.Call):
        return ctx.names.qualname(test.func) in _CUDA_CHECKS
    if isinstance(test, ast.BoolOp):
        return all(_cuda_test(ctx, v) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return "no_" in (dotted(test.operand) or "").lower()  # ``not args.no_cuda``
    if isinstance(test, ast.Compare):
        sides = [test.left, *test.comparators]
        named = [x for x in sides if not isinstance(x, ast.Constant)]
        return bool(named) and all(_cuda_test(ctx, x) for x in named)
    name = (dotted(test) or "").lower()
    return bool(name) and any(word in name for word in ("cuda", "gpu"))


def chooses_cudnn_setup(ctx: FileContext) -> bool:
    """True when the file sets the auto-tuner, determinism or cuDNN itself, other than turning
    the auto-tuner off or determinism on inside an ``if`` (pytorch/examples imagenet does that
    only for seeded runs, and never turns the auto-tuner on)."""
    return _chooses_in(ctx, ctx.of_type(ast.Assign, ast.AnnAssign, ast.AugAssign), ctx.calls)


def _settings(
    node: ast.Assign | ast.AnnAssign | ast.AugAssign,
) -> Iterator[tuple[ast.expr, ast.expr | None]]:
    """Each target the assignment sets, with the value a plain ``=`` gives it (None where it is
    not known): ``cudnn.benchmark, cudnn.deterministic = False, True`` (YOLOv7's
    init_torch_seeds) sets two."""
    plain = isinstance(node, ast.Assign)
    value = node.value if plain else None
    for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
        if not isinstance(target, (ast.Tuple, ast.List)):
            yield target, value
            continue
        values: list[ast.expr] | list[None] = [None] * len(target.elts)
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            values = value.elts
        yield from zip(target.elts, values, strict=True)


def _chooses_in(
    ctx: FileContext,
    assignments: Iterable[ast.AST],
    calls: Iterable[tuple[ast.Call, str | None]],
) -> bool:
    """:func:`chooses_cudnn_setup` over these assignments and calls of ``ctx``."""
    for node in assignments:
        if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            continue
        for target, value in _settings(node):
            name = ctx.names.qualname(target)
            if (
                name in {_BENCHMARK, "torch.backends.cudnn.deterministic"}
                and value is not None
                and is_const(value, name != _BENCHMARK)
                and _only_in_a_branch(ctx, node)
            ):
                continue
            if name == _BENCHMARK:
                return True
            if name in _LEFT_AT_DEFAULT_BY and not (
                value is not None and is_const(value, _LEFT_AT_DEFAULT_BY[name])
            ):
                return True
    for call, name in calls:
        if name in _CHOOSING_CALLS:
            return True
        if any(k.arg == "deterministic" and is_const(k.value, True) for k in call.keywords):
            return True  # a seeding helper asked for determinism: YOLOv5's init_seeds(...)
        if name == "torch.use_deterministic_algorithms" and not is_const(
            argument(call, "mode", 0), False
        ):
            return True
    return False


def _helper_chooses_cudnn_setup(ctx: FileContext, depth: int = 2) -> bool:
    """A function of another project file that this file calls sets cuDNN up, followed
    ``depth`` calls deep (YOLOv7's train.py calls ``init_seeds``, whose ``init_torch_seeds``, in
    a third file, turns the auto-tuner on for every seed but 0), or a method of a class of
    another project file that this file builds does. A call under an ``if`` is a choice for that
    case, not for the default run."""
    seen: set[int] = set()
    todo = [(ctx, [call for call, _ in ctx.calls], depth)]
    while todo:
        where, calls, left = todo.pop()
        for call in calls:
            if _only_in_a_branch(where, call):
                continue  # PyTorch-YOLOv3's provide_determinism(seed), under `if args.seed != -1`
            found = definition_of(where, call, ast.FunctionDef)
            if found is None:
                # a class of another project file built here (PyTorch Step-by-Step's
                # ``StepByStep(model, loss_fn, optimizer)``, whose ``train`` seeds and sets cuDNN
                # up in ``set_seed``): its methods are what this file runs
                built = definition_of(where, call, ast.ClassDef)
                if built is not None and built[0] is not where and id(built[1]) not in seen:
                    seen.add(id(built[1]))
                    nodes = _methods_run(where, call, built[1])
                    named = [
                        (c, built[0].names.qualname(c.func))
                        for c in nodes
                        if isinstance(c, ast.Call)
                    ]
                    if _chooses_in(built[0], nodes, named):
                        return True
                continue
            if id(found[1]) in seen:
                continue
            helper, function = found
            seen.add(id(function))
            nodes = list(subtree(function))
            inner = [n for n in nodes if isinstance(n, ast.Call)]
            named = [(c, helper.names.qualname(c.func)) for c in inner]
            if _chooses_in(helper, nodes, named):
                return True
            if left > 1:
                todo.append((helper, inner, left - 1))
    return False


def _methods_run(ctx: FileContext, call: ast.Call, cls: ast.ClassDef) -> list[ast.AST]:
    """The nodes of the methods of ``cls`` that the file runs on the instance ``call`` builds:
    ``__init__``, the methods it calls on the name bound to it outside an ``if``
    (``sbs.train(...)``), and those they call on ``self`` (``self.set_seed(seed)``)."""
    methods = {
        m.name: m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    parent = ctx.parents.get(id(call))
    names = (
        {dotted(t) for t in parent.targets} - {None} if isinstance(parent, ast.Assign) else set()
    )
    todo = ["__init__"] + [
        c.func.attr
        for c, _ in ctx.calls
        if isinstance(c.func, ast.Attribute)
        and dotted(c.func.value) in names
        and not _only_in_a_branch(ctx, c)
    ]
    run: set[str] = set()
    while todo:
        name = todo.pop()
        if name in run or name not in methods:
            continue
        run.add(name)
        todo += [
            n.func.attr
            for n in subtree(methods[name])
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and dotted(n.func.value) == "self"
        ]
    return [n for name in run for n in subtree(methods[name])]


# ``from solver import Solver``, ``import trainer``, ``from .engine import train`` at any indent.
_IMPORT_LINE = re.compile(rb"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import|import[ \t]+([\w.]+))", re.M)


def settled_by_importers(
    results: Sequence[FileResult | LintError],
) -> list[FileResult | LintError]:
    """``results`` without TP303's findings in files that a linted script imports and sets
    cuDNN up in (StarGAN's ``main.py`` sets ``cudnn.benchmark = True`` and then builds the
    ``Solver`` of ``solver.py``, whose loop trains the conv nets): the setting is the run's."""
    files = [r for r in results if isinstance(r, FileResult) and not r.notebook]
    flagged = {project_key(r.path) for r in files if any(f.code == "TP303" for f in r.findings)}
    if not flagged:
        return list(results)
    linted = {project_key(r.path): r.path for r in files}
    settled: set[str] = set()
    for r in files:
        if b"cudnn" not in r.source and b"deterministic" not in r.source:
            continue
        imported = set()
        for match in _IMPORT_LINE.finditer(r.source):
            module = (match.group(1) or match.group(2)).decode()
            target = module_file(module, Path(r.path), linted)
            if target in flagged and target != project_key(r.path):
                imported.add(target)
        if imported:
            ctx = parse(r.path, r.source)
            if isinstance(ctx, FileContext) and chooses_cudnn_setup(ctx):
                settled |= imported
    return [
        dataclasses.replace(r, findings=tuple(f for f in r.findings if f.code != "TP303"))
        if isinstance(r, FileResult) and project_key(r.path) in settled
        else r
        for r in results
    ]


def _builds_conv_net_here(ctx: FileContext) -> list[ast.Call]:
    """In a file with no convs of its own: the first construction of a conv net defined
    elsewhere (a torchvision model, a class another project file builds from convs, or what a
    function of such a file returns: ``model = load_model(cfg)``)."""
    assigned = {id(strip_moves(node.value)) for node in ctx.of_type(ast.Assign)}
    # A class constructed first, then a function whose value is kept: StyleGAN 2's
    # ``fake_img, _ = augment(fake_img, p)`` convolves with a filter, where ``Generator(...)``,
    # later in the file, is the conv net.
    kept: list[tuple[ast.Call, str | None]] = []
    for call, name in ctx.calls:
        func = call.func
        last = (dotted(func) or "").rsplit(".", 1)[-1]
        if (
            (name or "").startswith("torchvision.models.")
            or isinstance(func, ast.Subscript)
            or (not (name or "").startswith("torch.") and last[:1].isupper())
        ):
            if builds_conv_net(ctx, call, name):
                return [call]
        elif not (name or "").startswith("torch.") and id(call) in assigned:
            kept.append((call, name))
    return next(([call] for call, name in kept if builds_conv_net(ctx, call, name)), [])


def _hands_a_small_model(ctx: FileContext, call: ast.Call) -> bool:
    """The model ``call`` hands on (its first argument, or ``model=``/``net=``) is one this file
    spells out as small (lint.scale)."""
    given = call.args[0] if call.args else None
    given = next((k.value for k in call.keywords if k.arg in ("model", "net")), given)
    target = dotted(given) if given is not None else None
    weights = None if target is None else model_weights(ctx, target)
    return weights is not None and 0 < weights <= TINY_WEIGHTS


def _trains_small_models_only(ctx: FileContext) -> bool:
    training = ctx.loops.training_loops()
    return bool(training) and all(
        id(loop) in ctx.launch_bound or id(loop) in ctx.small_steps for loop in training
    )


def _shapes_change_every_step(ctx: FileContext) -> bool:
    """Every loader the training loops iterate pads each batch to its own longest item: its
    ``collate_fn`` is a function or a class (its ``__call__``) of this file or of a project file
    that calls ``pad_sequence`` or takes the ``max`` of the items' lengths or shapes
    (glow-tts's ``TextMelCollate``, StyleTTS2's ``Collater``), also where a project function
    builds the loader (``build_dataloader(...)``). Text and audio lengths change from batch to
    batch, so the auto-tuner would benchmark every convolution again for most steps."""
    loaders: list[tuple[FileContext, ast.Call]] = []
    for loop in ctx.loops.training_loops():
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            return False
        found = [(ctx, c) for c in iterated_loader_calls(ctx, loop)] or _built_elsewhere(ctx, loop)
        if not found:
            return False
        loaders += found
    return bool(loaders) and all(_pads_to_longest(where, call) for where, call in loaders)


def _built_elsewhere(
    ctx: FileContext, loop: ast.For | ast.AsyncFor
) -> list[tuple[FileContext, ast.Call]]:
    """The DataLoader calls of a project function whose result the loop iterates
    (``train_dataloader = build_dataloader(...)``, then ``for batch in train_dataloader:``)."""
    out: list[tuple[FileContext, ast.Call]] = []
    for value in iterated_values(ctx, loop):
        found = definition_of(ctx, value, ast.FunctionDef) if isinstance(value, ast.Call) else None
        if found is None:
            return []
        where, function = found
        built = built_loaders(where, function)
        if not built:
            return []
        out += [(where, c) for c in built]
    return out


def _pads_to_longest(ctx: FileContext, loader: ast.Call) -> bool:
    """The loader's ``collate_fn`` pads each batch to its own longest item: a class of this
    file or the project (its ``__call__``), or a function of this file or of a project module
    (``collate_fn=utils.collate_fn``, ``from utils import collate_fn``), with the functions of
    its file that it calls, two calls deep (a detection collate that hands the images to a
    batching helper, which takes the largest of their shapes in another)."""
    collate = argument(loader, "collate_fn", COLLATE_FN_POSITION)
    if isinstance(collate, ast.Name):
        scope = ctx.enclosing_scope(loader)
        collate = next(
            (v for v in assigned_in(ctx, collate.id, scope) if isinstance(v, ast.Call)), collate
        )
    if collate is None:
        return False
    if isinstance(collate, ast.Call):
        found = definition_of(ctx, collate, ast.ClassDef)
        if found is None:
            return False
        where, cls = found
        body: list[ast.AST] = [
            m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__call__"
        ]
    elif isinstance(collate, (ast.Name, ast.Attribute)):
        # the function itself, found as a call of it would be
        function = definition_of(ctx, ast.Call(func=collate, args=[], keywords=[]), ast.FunctionDef)
        if function is None:
            return False
        where, body = function[0], [function[1]]
    else:
        return False
    return bool(body) and _pads_in(where, [n for b in body for n in subtree(b)], _COLLATE_DEPTH)


# How many calls deep a collate function's own helpers are read for its padding.
_COLLATE_DEPTH = 2


def _pads_in(
    ctx: FileContext, nodes: list[ast.AST], depth: int, seen: set[int] | None = None
) -> bool:
    """``nodes`` pad (:func:`_pads`), or call a function of this file that does, or that takes
    the largest of the items' sizes it is handed (``_max_by_axis([list(img.shape) for img in
    images])``, :func:`_max_of_given`): up to ``depth`` calls deep, each function read once."""
    if any(_pads(ctx, n) for n in nodes):
        return True
    if depth == 0:
        return False
    seen = set() if seen is None else seen
    for call in (n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
        found = definition_of(ctx, call, ast.FunctionDef)
        if found is None or found[0] is not ctx or id(found[1]) in seen:
            continue
        function = found[1]
        seen.add(id(function))
        if _max_of_given(function, call) or _pads_in(ctx, list(subtree(function)), depth - 1, seen):
            return True
    return False


def _max_of_given(function: ast.FunctionDef, call: ast.Call) -> bool:
    """``call`` hands ``function`` the items' sizes (``[list(img.shape) for img in images]``),
    and the function returns the ``max`` of them: a name it binds from that parameter, or
    from what it binds or iterates from it, goes into a ``max(...)`` and out in a ``return``
    (DETR's ``_max_by_axis``). Not a helper that clips boxes to one image's shape."""
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    given = {
        name
        for i, name in enumerate(params)
        if (value := argument(call, name, i)) is not None and _reads_sizes([value])
    }
    if not given:
        return False

    def mentions(node: ast.AST | None) -> bool:
        return node is not None and any(
            isinstance(n, ast.Name) and n.id in given for n in subtree(node)
        )

    nodes = list(subtree(function))
    for _ in range(3):  # what the parameter's values flow into, a few steps on
        for node in nodes:
            if isinstance(node, ast.Assign) and mentions(node.value):
                targets = node.targets
            elif isinstance(node, (ast.For, ast.comprehension)) and mentions(node.iter):
                targets = [node.target]
            else:
                continue
            given |= {n.id for t in targets for n in subtree(t) if isinstance(n, ast.Name)}
    takes_max = any(
        isinstance(n, ast.Call) and _is_max(n) and any(mentions(a) for a in n.args) for n in nodes
    )
    return takes_max and any(isinstance(n, ast.Return) and mentions(n.value) for n in nodes)


def _is_max(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "max"
        and bool(node.args)
    )


def _reads_sizes(args: Sequence[ast.AST]) -> bool:
    """Some of ``args`` read lengths or shapes: ``x.shape``, ``len(x)``, ``x.size(...)``."""
    return any(
        (isinstance(n, ast.Attribute) and n.attr == "shape")
        or (isinstance(n, ast.Call) and dotted(n.func) in {"len"})
        or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "size")
        for a in args
        for n in subtree(a)
    )


_ITEMS = (ast.ListComp, ast.GeneratorExp, ast.SetComp)


def _pads(ctx: FileContext, node: ast.AST) -> bool:
    """``pad_sequence(...)``, or the ``max`` of the items' lengths or shapes, taken over them
    (``max([b[1].shape[1] for b in batch])``, ``max(len(x) for x in batch)``); not one item's
    largest side (``max(img.shape[-2:])``, a resize to a fixed size)."""
    if not isinstance(node, ast.Call):
        return False
    if (ctx.names.qualname(node.func) or "").endswith("pad_sequence"):
        return True
    return (
        _is_max(node)
        and len(node.args) == 1
        and isinstance(node.args[0], _ITEMS)
        and _reads_sizes(node.args)
    )


def _hands_padded_loaders_only(
    ctx: FileContext, helpers: list[tuple[ast.Call, FileContext]]
) -> bool:
    """Every loader that another file's training function iterates in its training loops,
    as this file hands it (``train_one_epoch(model, criterion, data_loader, ...)``, the
    argument for the parameter the loop iterates, bound in the caller's scope to
    ``DataLoader(...)`` calls only), pads each batch to its own longest item
    (:func:`_pads_to_longest`): that loop meets a new input shape at most steps, as the
    in-file reading (:func:`_shapes_change_every_step`) says of a loop over such loaders.
    Undecided (False) where any of it cannot be read."""
    loaders: list[ast.Call] = []
    for call, helper in helpers:
        handed = _iterated_arguments(call, helper)
        if not handed:
            return False
        scope = ctx.enclosing_scope(call)
        for value in handed:
            name = dotted(value)
            bound = assigned_in(ctx, name, scope) if name is not None else []
            if not bound or not all(
                isinstance(v, ast.Call) and ctx.names.qualname(v.func) in DATALOADERS for v in bound
            ):
                return False
            loaders += [v for v in bound if isinstance(v, ast.Call)]
    return bool(loaders) and all(_pads_to_longest(ctx, c) for c in loaders)


def _iterated_arguments(call: ast.Call, helper: FileContext) -> list[ast.expr]:
    """What ``call`` passes for the parameters the called function's training loops iterate
    (in ``helper``, the file that defines it); empty where a loop iterates anything else."""
    name = (dotted(call.func) or "").rsplit(".", 1)[-1]
    function = next(
        (f for f in helper.tree.body if isinstance(f, ast.FunctionDef) and f.name == name), None
    )
    if function is None:
        return []
    facts = helper.loops
    loops = [loop for loop in facts.training_loops() if facts.scope_of.get(id(loop)) is function]
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    out: list[ast.expr] = []
    for loop in loops:
        source = loop.iter if isinstance(loop, (ast.For, ast.AsyncFor)) else None
        while isinstance(source, ast.Call) and source.args:
            source = source.args[0]  # ``enumerate(loader)``, ``logger.log_every(loader, n)``
        if not isinstance(source, ast.Name) or source.id not in params:
            return []
        passed = argument(call, source.id, params.index(source.id))
        if passed is None:
            return []
        out.append(passed)
    return out


# What a call's name says of training: ``train(net, ...)``, ``train_one_epoch``, ``fit``.
_TRAINS = re.compile(r"(^|_)(train\w*|fit)$", re.I)


def _may_hand_to_training(ctx: FileContext, call: ast.Call, name: str | None) -> bool:
    """The cheap test before a file without convs is read for a conv net it hands to another
    file's training function: it builds an optimizer, or calls an imported function named for
    training and hands it something (``d2l.train(net, ...)``; not ``model.train()``)."""
    if is_optimizer_class(name):
        return True
    last = (dotted(call.func) or "").rsplit(".", 1)[-1]
    return (
        len(call.args) > 1
        and _TRAINS.search(last) is not None
        and ctx.names.import_path(call.func) is not None
    )


def _check_cudnn_benchmark(ctx: FileContext) -> Iterator[Report]:
    convs = [call for call, name in ctx.calls if name in _CONV_MODULES]
    if not ctx.loops.step_loops and not ctx.loops.step_functions:
        # No training here: a model library's convs are trained by a script, which is where the
        # autotuner is set (YOLOv5's common.py, vit-pytorch's __main__ smoke test: issue 16).
        # Unless this file builds the convs and hands them to another project file's training
        # function (a course notebook calling ``d2l.train_ch5(net, ...)``), which sets nothing.
        if not convs and not any(_may_hand_to_training(ctx, c, name) for c, name in ctx.calls):
            return  # no convs, nothing built or called to train with: a library file
        if chooses_cudnn_setup(ctx) or not uses_cuda(ctx):
            return
        helpers = training_helpers(ctx)
        if not helpers or any(chooses_cudnn_setup(h) for _, h in helpers):
            return
        # or builds a conv net defined elsewhere and hands it on (a script's train.py building
        # its model.py's EfficientNet for utils.py's train_one_epoch)
        convs = convs or _builds_conv_net_here(ctx)
        if not convs:
            return
        if all(_hands_a_small_model(ctx, call) for call, _ in helpers):
            return  # LeNet handed to the course's trainer: nothing worth autotuning
        if _hands_padded_loaders_only(ctx, helpers):
            return  # batches padded to their own largest item: a new shape at most steps
        if not _helper_chooses_cudnn_setup(ctx):
            yield Report(min(convs, key=start_of))
        return
    if chooses_cudnn_setup(ctx) or not (uses_cuda(ctx) or framework_gpu(ctx)):
        return  # not a CUDA run; an Accelerate or Fabric trainer's device is the GPU (TP102)
    if _trains_small_models_only(ctx):
        return  # every training loop runs a small model (lint.scale): nothing worth autotuning
    if _shapes_change_every_step(ctx):
        return  # batches padded to their own longest item: a new shape to tune at every step
    convs = convs or _builds_conv_net_here(ctx)
    if convs and not _helper_chooses_cudnn_setup(ctx):
        yield Report(min(convs, key=start_of))


CUDNN_BENCHMARK_NOT_ENABLED = Rule(
    code="TP303",
    name="cudnn-benchmark-not-enabled",
    message="Convolutions run on CUDA without the cuDNN auto-tuner "
    "(`torch.backends.cudnn.benchmark = True`)",
    technique="cudnn-benchmark",
    doc=f"""\
## What it does
Flags the first convolution layer (`nn.Conv1d/2d/3d`, `nn.ConvTranspose1d/2d/3d`) of a file that
trains (it has a training loop) on a CUDA device (`.cuda()`, `.to("cuda")`, `device="cuda"`, a
device such as `"cuda" if torch.cuda.is_available() else "cpu"` that is used, not only printed,
or a training loader that Accelerate or Fabric prepares, as for TP102, unless the file puts the
framework on the CPU) and never sets `torch.backends.cudnn.benchmark`. A model library that
trains nothing is left to the scripts that train its models. A file that builds convolutions, or
a conv net defined elsewhere (as below), and hands the model to another project file's training
function (a course notebook calling `d2l.train_ch5(net, ...)` with the course's `try_gpu()`
device; a script's `main()` handing its `model.py` net to `utils.train_one_epoch`) trains them
too, unless that
file sets the auto-tuner itself or the model handed over is a small one (below).

Nor a file that a linted script imports after setting cuDNN up itself (StarGAN's `main.py`
sets `cudnn.benchmark = True`, then builds the `Solver` of `solver.py`, whose loop trains): the
script's setting is the run's.

Nor a file whose training loops all iterate loaders that pad each batch to its own longest
item (a `collate_fn` of the file or project that calls `pad_sequence` or takes the `max` of the
items' lengths or shapes, itself or in the functions of its file it calls, two calls deep; also
where a project function such as `build_dataloader(...)` builds the loader): text and audio
lengths change from batch to batch, so the auto-tuner would benchmark every convolution again
at most steps (glow-tts, StyleTTS2). The same holds for a file that builds a conv net and hands
it to another file's training function whose training loops iterate, as this file hands them,
only such loaders (a detection script whose collate pads the images to the batch's largest). A
`max` counts as padding where it is taken over the items (a comprehension), or where a helper
is handed the items' sizes and returns their maximum; not one image's largest side.

The file is not flagged when it sets `benchmark` at all (`False` or an expression is a
decision, for instance for inputs whose shape changes every step; but `benchmark = False` or
`deterministic = True` inside an `if`, such as a seeded-run branch, decides only that case;
an `if torch.cuda.is_available():`, or a test of names for CUDA alone such as `if use_cuda:`,
is taken by every CUDA run, so it decides them all), asks
for reproducibility
(`torch.backends.cudnn.deterministic = True`, `torch.use_deterministic_algorithms(True)`),
turns cuDNN off, uses `torch.backends.cudnn.flags(...)`, or calls anything with
`deterministic=True` (a seeding helper such as YOLOv5's `init_seeds`); a tuple assignment
(`cudnn.benchmark, cudnn.deterministic = True, False`) sets both. Nor where a function of
another project file that it calls, not under an `if`, does so, up to two calls deep (YOLOv7's
`init_seeds`, whose `init_torch_seeds` in a third file turns the auto-tuner on), or a method of
a class of another project file that it builds (PyTorch Step-by-Step's `StepByStep`, whose
`set_seed` turns the auto-tuner off for reproducible lessons).
A file without convs of its own is flagged at the construction of a conv net it trains: a
torchvision model; a conv net of a model library, known by what it is (diffusers' UNets, VAEs and
ControlNet, segmentation_models_pytorch's nets, `EfficientNet`, built by the class or one of its
loaders such as `from_pretrained`), or a timm model of a convolutional family (ResNet, EfficientNet,
ConvNeXt, RegNet... not a vision transformer) named in `timm.create_model` by a literal or an
option's default; or a class that another file of the project (beside it or up to three directories
above, imported by name, through its module, relatively or with `*`) builds from conv layers,
directly or through a function of that file, or what a function of that file returns after building
one (`model = load_model(cfg)`); also from blocks it imports from a third file, and re-exported by a
package's `__init__.py` (`from unet import UNet`), or built through a project module the function's
file imports whole (`from . import models`, then `models.UNet(...)`: k-diffusion's `make_model`), up
to three files deep. A module that keeps its own weight and convolves what its forward is handed
with it (`F.conv2d(input, self.weight)`, also through a project wrapper of `F.conv2d`: StyleGAN 2's
modulated convolutions) is built from conv layers too; not a dataset (an STFT's convolutions
computing mel spectrograms), nor a product of the module's own weights (LoRA's
`F.conv1d(self.lora_A..., self.lora_B...)`). A class constructed is preferred to a function whose
value is kept (an augmentation that filters with a convolution). A convolution built only when an
option asks for it (`nn.Conv2d(h, h, 1) if talking_heads else None`, an `if flag:` without one in
its `else`) does not make a conv net; one chosen by a configuration's layer type (`if kind ==
"convolutional":`) does.

{SMALL_MODELS_DOC} {SMALL_STEPS_DOC}

## Why is this slow
cuDNN has several algorithms for each convolution; by default PyTorch picks one by heuristics.
With the auto-tuner on, the first call for each input shape times the candidates and caches the
fastest for this GPU, so every later step runs the best kernel.

## Example
```python
device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU()).to(device)
```

## Use instead
```python
torch.backends.cudnn.benchmark = True  # once, before the training loop
device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU()).to(device)
```

## Fix safety
No fix: each new input shape pays a round of benchmarking, so with highly variable input sizes
the auto-tuner can cost more than it saves; the chosen algorithm may differ between runs, so
results are not bit-reproducible; and trial algorithms can raise peak memory.

## References
PyTorch Performance Tuning Guide, "Enable cuDNN auto-tuner"; "PyTorch | Tricks for Faster
Training", tip 6 ("Turn on cudNN benchmarking"); "Techniques to make PyTorch code run faster on
GPUs", 1 ("Utilize CUDNN Benchmarking").
""",
    check=_check_cudnn_benchmark,
)

# ---------------------------------------------------------------------------------------- TP401


def _conv_bias_fix(call: ast.Call) -> tuple[bool, Fix | None]:
    """Whether the conv has a bias, and the fix that removes it when exact."""
    if has_star_args(call):
        return False, None  # **kwargs may set bias=False: cannot tell
    bias = argument(call, "bias", _BIAS_POSITION)
    if bias is None:
        if not call.args and not call.keywords:
            return False, None
        last = max([*call.args, *call.keywords], key=end_of)
        return True, Fix("Pass `bias=False`", "unsafe", (insert_after(last, ", bias=False"),))
    if is_const(bias, True):
        return True, Fix("Pass `bias=False`", "unsafe", (replace(bias, "False"),))
    return False, None  # False, or an expression whose value we cannot tell


_BUILTINS = frozenset(dir(builtins))
_INNER = "_tp_conv"  # on a wrapper's call: the conv it builds, as this call builds it
# On a conv whose norm only an option adds (``if batch_norm:``, ``if not first_block:``): the
# same line builds convs with no norm after them, so ``bias=False`` is no fix for those.
_OPTIONAL = "_tp_optional_norm"


def _optional(conv: ast.Call) -> ast.Call:
    conv.__dict__[_OPTIONAL] = True
    return conv


def _wrapped_convs(ctx: FileContext, names: dict[int, str | None]) -> None:
    """Name the calls that build a conv through a class or function of this file or of an
    imported project file (issue 32) as the conv they build: a subclass of ``nn.ConvNd`` that
    keeps its signature (``StdConv2d(cin, cout, 3)``), or a function returning one conv call
    (``conv3x3(cin, cout)``), whose call keeps that conv, with the function's parameters
    replaced by what the call passes, on the node (:data:`_INNER`)."""
    known: dict[str, tuple[FileContext, ast.stmt] | None] = {}  # callee text → definition
    for call, name in ctx.calls:
        text = dotted(call.func)
        if text is None or name in _CONVS or (name or "").startswith("torch."):
            continue
        if "." not in text and text in _BUILTINS:
            continue
        if text not in known:
            known[text] = definition(ctx, call)
        found = known[text]
        if found is None:
            continue
        home, node = found
        if isinstance(node, ast.ClassDef):
            base = next((q for b in node.bases if (q := home.names.qualname(b)) in _CONVS), None)
            if base is not None and _keeps_conv_signature(node):
                names[id(call)] = base
                continue
            wrapped = None if has_star_args(call) else _runs_one_conv(home, node)
            if wrapped is not None:  # ``Conv(64, 128, 3, **cfg)`` may pass ``bias=False``
                init, conv = wrapped
                names[id(call)] = home.names.qualname(conv.func)
                call.__dict__[_INNER] = _as_called(conv, init, call, bound=True)
        elif isinstance(node, ast.FunctionDef):
            built = returned(node)
            if len(built) == 1 and isinstance(built[0], ast.Call):
                kind = home.names.qualname(built[0].func)
                if kind in _CONVS:
                    names[id(call)] = kind
                    call.__dict__[_INNER] = _as_called(built[0], node, call)


def _runs_one_conv(home: FileContext, cls: ast.ClassDef) -> tuple[ast.FunctionDef, ast.Call] | None:
    """A module that wraps one conv: its ``__init__`` builds one conv into an attribute
    (``self.conv = nn.Conv2d(in_channels, out_channels, ..., bias=bias)``) and its ``forward``
    returns that conv's output, also after padding the input (``x = F.pad(x, ...); x =
    self.conv(x); return x``). Its ``__init__`` and the conv call."""
    init = constructor(cls)
    forward = next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None
    )
    if init is None or forward is None or len(init.args.args) < 1:
        return None
    convs = [
        (node.targets[0].attr, node.value)
        for node in subtree(init)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Attribute)
        and isinstance(node.targets[0].value, ast.Name)
        and node.targets[0].value.id == init.args.args[0].arg
        and isinstance(node.value, ast.Call)
        and home.names.qualname(node.value.func) in _CONVS
    ]
    if len(convs) != 1:
        return None
    attr, conv = convs[0]
    return (init, conv) if _returns_attr_call(forward, attr) else None


def _returns_attr_call(method: ast.FunctionDef, attr: str) -> bool:
    """``method`` ends ``return self.<attr>(...)``, or ``y = self.<attr>(...)``, ``return y``,
    and returns nothing else anywhere (``if self.relu is not None: return
    self.relu(self.conv(x))`` hands on an activated output, whose bias a norm does not
    cancel)."""
    body = method.body
    last = body[-1] if body else None
    if not isinstance(last, ast.Return) or last.value is None:
        return False
    if any(isinstance(n, ast.Return) and n is not last for n in subtree(method)):
        return False

    def runs(value: ast.expr | None) -> bool:
        return (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == attr
            and isinstance(value.func.value, ast.Name)
            and value.func.value.id == (method.args.args[0].arg if method.args.args else "")
        )

    if runs(last.value):
        return True
    before = body[-2] if len(body) > 1 else None
    return (
        isinstance(last.value, ast.Name)
        and isinstance(before, ast.Assign)
        and [dotted(t) for t in before.targets] == [last.value.id]
        and runs(before.value)
    )


def _keeps_conv_signature(cls: ast.ClassDef) -> bool:
    """No ``__init__`` of its own, or one that takes ``bias`` (default True) or ``**kwargs``."""
    init = constructor(cls)
    if init is None:
        return True
    return init.args.kwarg is not None or is_const(parameter_defaults(init).get("bias"), True)


def _as_called(
    conv: ast.Call, function: ast.FunctionDef, call: ast.Call, *, bound: bool = False
) -> ast.Call:
    """``conv`` (in ``function``'s body) with ``function``'s parameters replaced by what
    ``call`` passes for them, or their defaults; ``bound``: ``function`` is the ``__init__``
    the call runs, whose first parameter the call does not pass."""
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)][int(bound) :]
    defaults = parameter_defaults(function)
    given: dict[str, ast.expr] = {}
    for i, name in enumerate(params):
        passed = argument(call, name, i)
        if passed is not None:
            given[name] = passed
        elif name in defaults:
            given[name] = defaults[name]
    for param, default in zip(function.args.kwonlyargs, function.args.kw_defaults, strict=True):
        kw = keyword(call, param.arg)  # ``def __init__(self, c, *, bias=True)``
        value = kw.value if kw is not None else default
        if value is not None:
            given[param.arg] = value

    def as_called(node: ast.expr) -> ast.expr:
        return given.get(node.id, node) if isinstance(node, ast.Name) else node

    # where the wrapper builds its conv, for positions (the fix is not offered through it)
    return ast.copy_location(
        ast.Call(
            func=conv.func,
            args=[as_called(a) for a in conv.args],
            keywords=[
                ast.copy_location(ast.keyword(arg=k.arg, value=as_called(k.value)), k)
                for k in conv.keywords
            ],
        ),
        conv,
    )


def _same_channels(conv: ast.Call, norm: ast.Call) -> bool:
    conv = conv.__dict__.get(_INNER, conv)
    out = argument(conv, "out_channels", 1)
    features = argument(norm, "num_features", 0)
    return out is not None and features is not None and ast.dump(out) == ast.dump(features)


def _reads_bias_indirectly(ctx: FileContext) -> bool:
    """True when the file reads ``m.bias`` of a module it reached another way (``for m in
    model.modules()``): after ``bias=False`` that is None, so the fix could break such code."""
    return any(
        isinstance(node, ast.Attribute)
        and node.attr == "bias"
        and isinstance(node.ctx, ast.Load)
        # `self.conv.bias` is a named layer's (see _scan_method); `self.bias` a module's own
        and not isinstance(node.value, ast.Attribute)
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
        for node in ctx.of_type(ast.Attribute)
    )


def _pairs_in(items: list[ast.expr], names: dict[int, str | None]) -> Iterator[ast.Call]:
    for conv, norm in itertools.pairwise(items):
        if (
            isinstance(conv, ast.Call)
            and isinstance(norm, ast.Call)
            and names.get(id(conv)) in _CONV_MODULES
            and names.get(id(norm)) in _NORMS
            and _same_channels(conv, norm)
        ):
            yield conv


def _appended(stmt: ast.stmt, *, last: bool = False) -> tuple[str, list[ast.expr]] | None:
    """What a statement adds to the end of a list: ``layers.append(x)`` → ("layers", [x]),
    ``layers += [a, b]`` and ``layers.extend([a, b])`` → ("layers", [a, b]); and an ``if``
    with no ``else`` whose body adds to a list (``if batch_norm: layers +=
    [nn.BatchNorm2d(c)]``, pytorch-cifar100's VGG), what its first statement adds when the
    option is on (or its ``last``, for what comes after the ``if``)."""
    if isinstance(stmt, ast.If) and not stmt.orelse and stmt.body:
        return _appended(stmt.body[-1] if last else stmt.body[0], last=last)
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add):
        owner = _name_of(stmt.target)
        if owner is not None and isinstance(stmt.value, ast.List) and stmt.value.elts:
            return owner, list(stmt.value.elts)
        return None
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return None
    owner = _name_of(call.func.value)
    if owner is None or len(call.args) != 1:
        return None
    if call.func.attr == "append":
        return owner, [call.args[0]]
    if call.func.attr == "extend" and isinstance(call.args[0], ast.List) and call.args[0].elts:
        return owner, list(call.args[0].elts)
    return None


def _name_of(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _built_in_eval_mode(ctx: FileContext, call: ast.Call) -> bool:
    """``nn.Sequential(...).eval()``: a model built to be run, not trained (a steerable-CNN
    notebook's conventional model, compared on one image and never fitted)."""
    node: ast.AST = call
    while True:
        parent = ctx.parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.attr == "eval":
            return True
        # ``.to(device).eval()``, ``.cuda().eval()``, ``.requires_grad_(False).eval()``; an
        # inner block of a Sequential built so
        if isinstance(parent, ast.Attribute) and parent.attr in _MOVES:
            moved = ctx.parents.get(id(parent))
            if not isinstance(moved, ast.Call):
                return False
            node = moved
        elif isinstance(parent, ast.Call) and ctx.names.qualname(parent.func) == _SEQUENTIAL:
            node = parent
        else:
            return False


_MOVES = frozenset({"to", "cuda", "requires_grad_", "float", "half"})
_SEQUENTIAL = "torch.nn.Sequential"


def _sequential_pairs(ctx: FileContext, names: dict[int, str | None]) -> Iterator[ast.Call]:
    """Convs followed by a norm over the same channels in an ``nn.Sequential(...)``, or, in a
    function that builds ``nn.Sequential(*layers)``, in a list literal (``layers += [conv, bn,
    relu]``, also with the conv bound to a name, torchvision's VGG) or in consecutive statements
    that add to the list (``layers.append(conv)``, ``layers.append(bn)``; ``+=``, ``extend``, a
    norm added under an ``if``: kuangliu's VGG, PyTorch-GAN's ESRGAN, pytorch-cifar100's VGG).
    A conv found through a name or an ``if`` is marked :data:`_OPTIONAL`: no fix."""
    for call, name in ctx.calls:
        if name != _SEQUENTIAL or _built_in_eval_mode(ctx, call):
            continue
        yield from _pairs_in(_layers_given(ctx, call), names)
        if not any(isinstance(a, ast.Starred) for a in call.args):
            continue
        scope = ctx.enclosing_scope(call)
        for node in subtree(scope):
            if isinstance(node, ast.List):
                yield from _pairs_in(node.elts, names)
                # ``conv2d = nn.Conv2d(...)``, then ``layers += [conv2d, nn.BatchNorm2d(v),
                # ...]`` (torchvision's VGG ``make_layers``): the name is the call it is bound
                # to, no fix (see _OPTIONAL: an ``else`` may add the same conv without a norm)
                named = [_bound_call(ctx, e) for e in node.elts]
                for built in _pairs_in(named, names):
                    if built not in node.elts:
                        yield _optional(built)
            for field_name in ("body", "orelse"):
                block = getattr(node, field_name, None)
                if not isinstance(block, list):
                    continue
                # what each statement adds last (an ``if`` before the norm: its body's last
                # statement), and what the next adds first (an ``if`` after the conv: its first)
                ends = [_appended(stmt, last=True) for stmt in block]
                starts = [_appended(stmt) for stmt in block]
                for i in range(len(block) - 1):
                    first, second = ends[i], starts[i + 1]
                    if not (first and second and first[0] == second[0]):
                        continue
                    added, norm = first[1][-1], second[1][0]
                    pair = [_bound_call(ctx, added), _bound_call(ctx, norm)]
                    for found in _pairs_in(pair, names):
                        optional = found is not added or isinstance(block[i + 1], ast.If)
                        yield _optional(found) if optional else found


def _layers_given(ctx: FileContext, sequential: ast.Call) -> list[ast.expr]:
    """The layers an ``nn.Sequential(...)`` call is given, in order: its arguments, or the
    values of the ``(name, layer)`` pairs of one ``OrderedDict([...])`` it is given."""
    args = sequential.args
    if (
        len(args) == 1
        and isinstance(args[0], ast.Call)
        and ctx.names.qualname(args[0].func) == "collections.OrderedDict"
        and len(args[0].args) == 1
        and isinstance(args[0].args[0], (ast.List, ast.Tuple))
    ):
        pairs = args[0].args[0].elts
        if all(isinstance(p, ast.Tuple) and len(p.elts) == 2 for p in pairs):
            return [p.elts[1] for p in pairs]  # type: ignore[attr-defined]
    return list(args)


def _bound_call(ctx: FileContext, node: ast.expr) -> ast.expr:
    """The call a name is bound to, where one plain assignment of its own scope binds it and
    nothing else does (not a loop's target, nor a parameter); else the node itself."""
    if not isinstance(node, ast.Name):
        return node
    values = bound_in(ctx, node.id, ctx.enclosing_scope(node))
    return values[0] if values and len(values) == 1 and isinstance(values[0], ast.Call) else node


@dataclass
class _Layer:
    """A ``self.<attr> = <layer>(...)`` of one class, and how the class uses the attribute."""

    call: ast.Call | None  # None: assigned more than once, or not from a call
    paired_with: set[str] = field(default_factory=set)  # norm attributes its output goes into
    escapes: bool = False  # used some other way: its bias may matter


_Method = ast.FunctionDef | ast.AsyncFunctionDef


def _self_attr(node: ast.AST, self_name: str) -> str | None:
    """``self.<attr>`` → attr."""
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == self_name
    ):
        return node.attr
    return None


def _single_call(node: ast.AST | None, self_name: str) -> tuple[str, ast.expr] | None:
    """``self.<attr>(<one argument>)`` → (attr, argument)."""
    if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords):
        return None
    attr = _self_attr(node.func, self_name)
    if attr is None or isinstance(node.args[0], ast.Starred):
        return None
    return attr, node.args[0]


def _norm_of_variable(
    method: _Method, stmt: ast.stmt, following: ast.stmt | None, self_name: str
) -> str | None:
    """For ``v = self.conv(x)`` directly followed by ``v = self.bn(v)`` / ``return self.bn(v)``
    (or ``w = self.bn(v)`` with ``v`` read nowhere else), the norm's attribute."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(following, (ast.Assign, ast.Return))
    ):
        return None
    var = stmt.targets[0].id
    norm = _single_call(following.value, self_name)
    if norm is None or not (isinstance(norm[1], ast.Name) and norm[1].id == var):
        return None
    if isinstance(following, ast.Assign):
        if len(following.targets) != 1 or not isinstance(following.targets[0], ast.Name):
            return None
        if following.targets[0].id != var:
            reads = sum(
                isinstance(n, ast.Name) and n.id == var and isinstance(n.ctx, ast.Load)
                for n in subtree(method)
            )
            if reads != 1:
                return None  # the conv's output is used elsewhere too
    return norm[0]


def _scan_method(method: _Method, layers: dict[str, _Layer]) -> None:
    """Record how ``method`` uses each layer attribute of ``layers``."""
    params = [*method.args.posonlyargs, *method.args.args]
    if not params:
        return
    self_name = params[0].arg
    parents = {id(c): n for n in subtree(method) for c in children(n)}
    for node in subtree(method):
        if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            continue
        layer = layers.get(_self_attr(node, self_name) or "")
        if layer is None:
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.attr == "weight":
            continue  # initialising the weight does not involve the bias
        call = parent if isinstance(parent, ast.Call) and parent.func is node else None
        if call is None or _single_call(call, self_name) is None:
            layer.escapes = True
            continue
        outer = parents.get(id(call))
        nested = _single_call(outer, self_name)
        if nested is not None and nested[1] is call:
            layer.paired_with.add(nested[0])  # self.bn(self.conv(x))
            continue
        norm = None
        if isinstance(outer, ast.Assign) and outer.value is call:
            body = parents.get(id(outer))
            for name in ("body", "orelse", "finalbody"):
                block = getattr(body, name, None)
                if isinstance(block, list) and outer in block:
                    i = block.index(outer)
                    following = block[i + 1] if i + 1 < len(block) else None
                    norm = _norm_of_variable(method, outer, following, self_name)
        if norm is None:
            layer.escapes = True
        else:
            layer.paired_with.add(norm)


def _class_pairs(cls: ast.ClassDef, names: dict[int, str | None]) -> Iterator[ast.Call]:
    """Convs assigned in ``__init__`` whose output only ever goes into a BatchNorm attribute."""
    methods = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    layers: dict[str, _Layer] = {}
    for method in methods:
        params = [*method.args.posonlyargs, *method.args.args]
        if not params:
            continue
        for node in subtree(method):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, (ast.AnnAssign, ast.AugAssign))
                else []
            )
            for target in targets:
                attr = _self_attr(target, params[0].arg)
                if attr is None:
                    continue
                value = getattr(node, "value", None)
                first = attr not in layers and method.name == "__init__"
                ok = first and isinstance(node, ast.Assign) and isinstance(value, ast.Call)
                layers[attr] = _Layer(value if ok else None)
    layers = {
        attr: layer
        for attr, layer in layers.items()
        if layer.call is not None and names.get(id(layer.call)) in _CONV_MODULES | _NORMS
    }
    for method in methods:
        _scan_method(method, layers)
    for layer in layers.values():
        conv = layer.call
        if conv is None or names.get(id(conv)) not in _CONV_MODULES:
            continue
        if layer.escapes or not layer.paired_with:
            continue
        norms = [layers.get(attr) for attr in layer.paired_with]
        if all(
            norm is not None
            and norm.call is not None
            and names.get(id(norm.call)) in _NORMS
            and _same_channels(conv, norm.call)
            for norm in norms
        ):
            yield conv


def _functional_pairs(ctx: FileContext, names: dict[int, str | None]) -> Iterator[ast.expr]:
    """The bias of ``F.convNd(x, w, b)`` passed straight to a training-mode ``F.batch_norm``."""
    for call, name in ctx.calls:
        if name != _FUNCTIONAL_BATCH_NORM or has_star_args(call):
            continue
        training = argument(call, "training", _TRAINING_POSITION)
        if training is None or is_const(training, False):
            continue  # evaluation mode: running statistics, which need not cancel the bias
        conv = argument(call, "input", 0)
        if not isinstance(conv, ast.Call) or names.get(id(conv)) not in _FUNCTIONAL_CONVS:
            continue
        if has_star_args(conv):
            continue
        bias = argument(conv, "bias", _FUNCTIONAL_BIAS_POSITION)
        if bias is not None and not is_const(bias, None):
            yield bias


def _check_conv_bias_before_bn(ctx: FileContext) -> Iterator[Report]:
    names = {id(call): name for call, name in ctx.calls}
    present = set(names.values())
    if present & _NORMS:
        _wrapped_convs(ctx, names)
        present = set(names.values())
    convs: list[ast.Call] = []
    if present & _CONV_MODULES and present & _NORMS:  # most files build neither: skip the scans
        convs += _sequential_pairs(ctx, names)
        for node in ctx.of_type(ast.ClassDef):
            convs.extend(_class_pairs(node, names))
    keep_fix = not _reads_bias_indirectly(ctx)
    for conv in convs:
        inner = conv.__dict__.get(_INNER)
        has_bias, fix = _conv_bias_fix(conv if inner is None else inner)
        if has_bias:  # a wrapper's conv is changed where the wrapper builds it: no fix here
            exact = keep_fix and inner is None and not conv.__dict__.get(_OPTIONAL)
            yield Report(conv, fix if exact else None)
    if _FUNCTIONAL_BATCH_NORM in present:
        for bias in _functional_pairs(ctx, names):
            yield Report(bias)


CONV_BIAS_BEFORE_BATCHNORM = Rule(
    code="TP401",
    name="conv-bias-before-batchnorm",
    message="Convolution has a bias that the BatchNorm right after it cancels",
    technique="conv-bias-before-bn",
    doc="""\
## What it does
Flags a convolution (`nn.Conv1d/2d/3d`, also a transposed one, `nn.ConvTranspose2d`, a DCGAN
generator's) with a bias whose output goes straight into a BatchNorm (or an InstanceNorm, which
cancels it per sample) over the same channels:

- in an `nn.Sequential(...)` literal (also one given an `OrderedDict([("conv1", conv), ("bn1",
  bn), ...])`; not one put in eval mode as it is built, `nn.Sequential(...).eval()`, also after
  `.to(device)`, nor its inner blocks: a model built to be run), a conv directly followed by the
  norm; in a function that builds `nn.Sequential(*layers)`, the same in a list literal (`layers
  += [conv, bn, relu]`) or in consecutive statements that add to the list
  (`layers.append(conv)`, `layers += [conv]`, `layers.extend([...])`); also a conv bound once to
  a name and added so (`conv2d = nn.Conv2d(...)`, then `layers += [conv2d, nn.BatchNorm2d(v),
  ...]`, torchvision's VGG), and a norm added under an option right after the conv (`if
  batch_norm: layers += [nn.BatchNorm2d(c)]`). No fix for those two: the name may also be added
  without a norm (an `else`), and the line under an option also builds the convs with no norm
  after them; `bias=not batch_norm` is the change;
- in a module class, `self.conv = nn.Conv2d(...)` and `self.bn = nn.BatchNorm2d(...)` in
  `__init__`, where every use of `self.conv` is `self.bn(self.conv(x))`, or `y = self.conv(x)`
  directly followed by `y = self.bn(y)` / `return self.bn(y)` (other than reading
  `self.conv.weight`). Attributes assigned more than once are left alone;
- functionally, `F.batch_norm(F.conv2d(x, w, b), ..., training=...)` with a bias `b` that is not
  `None` and `training` not `False`.

A conv is also one built through a wrapper of this file or of an imported project file: a
subclass of `nn.Conv2d` that keeps its signature (`StdConv2d(c, c, 3)`, fixed at the call), a
function that returns one conv call (`conv3x3(cin, cout)`), or a module whose `__init__` builds one
conv into an attribute and whose `forward` returns that conv's output, also after padding the
input (a "same"-padding `Conv2dStaticSamePadding(cin, cout, 1)`, a `PointwiseConv1d(cin, cout)`).
The last two are read with what the call passes, and get no fix: the bias is set where the
wrapper builds the conv.

## Why is this slow
BatchNorm subtracts the per-channel mean, which removes any constant added per channel, so the
bias is computed, stored and updated for nothing: its gradient is zero.

## Example
```python
block = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU())
```

## Use instead
```python
block = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
```

## Fix safety
Unsafe, so `--fix` leaves it and `--fix --unsafe-fixes` applies it: the model computes the same
function, but every checkpoint saved before the fix holds the conv's `bias` and no longer loads
with `load_state_dict(..., strict=True)` (the default): load those with `strict=False`, or
retrain. Convs whose
`bias` is an expression, or that take `**kwargs`, are not reported. No fix when the file reads
`.bias` of a module it reached indirectly (`for m in model.modules(): init.zeros_(m.bias)`),
since that bias becomes None.

The functional form gets no fix: the bias is a tensor the caller owns. In training mode the
batch statistics cancel it exactly. In evaluation mode the running mean, accumulated by the same
call, contains the constant bias too and cancels it, unless those statistics come from
elsewhere; pass `bias=None` where that holds.

## References
PyTorch Performance Tuning Guide, "Disable bias for convolutions directly followed by a batch
norm".
""",
    check=_check_conv_bias_before_bn,
)

RULES = (CUDNN_BENCHMARK_NOT_ENABLED, CONV_BIAS_BEFORE_BATCHNORM)
