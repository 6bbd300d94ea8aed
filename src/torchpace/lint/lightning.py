"""Lightning's ``Trainer`` as the rules read it: which calls build one, whether it runs on a GPU,
and the loaders it iterates once per epoch (those its ``fit`` is handed, and those a
``train_dataloader()`` hook returns)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.lint.engine import is_notebook
from torchpace.lint.loops import (
    DATALOADERS,
    binding_before,
    bound_in,
    dotted,
    method_calls,
    parameter_defaults,
    returned_loaders,
    scope_stores,
)
from torchpace.lint.rule import (
    FileContext,
    argument,
    has_star_args,
    keyword,
    parameter_names,
    passed_for,
)

LIGHTNING_TRAINERS = frozenset(
    {"lightning.Trainer", "lightning.pytorch.Trainer", "pytorch_lightning.Trainer"}
)
_GPU = frozenset({"gpu", "cuda"})


def lightning_gpu(given: dict[str | None, ast.expr], ctx: FileContext | None = None) -> bool:
    """The Trainer's keywords put it on a GPU: ``accelerator="gpu"``, ``gpus=1`` (Lightning
    1.x), or either chosen where a GPU is available; with ``ctx``, also through a name the
    module binds only to such constants (BYOL's ``NUM_GPUS = 2``, then ``gpus=NUM_GPUS``)."""

    def gpu_accelerator(value: ast.expr) -> bool:
        return isinstance(value, ast.Constant) and value.value in _GPU

    def some_gpus(value: ast.expr) -> bool:
        return isinstance(value, ast.Constant) and value.value not in (None, 0, False, "", "0")

    for key, test in (("accelerator", gpu_accelerator), ("gpus", some_gpus)):
        value = given.get(key)
        if isinstance(value, ast.IfExp):
            taken = _where_available(value.test)
            value = None if taken is None else value.body if taken else value.orelse
        if isinstance(value, ast.Name) and ctx is not None:
            bound = bound_in(ctx, value.id, ctx.tree)
            if bound and all(test(v) for v in bound):
                return True
        if value is not None and test(value):
            return True
    return False


def _where_available(test: ast.expr) -> bool | None:
    """True where ``test`` holds on a machine with a GPU, False where it fails there, None for
    any other test. It asks torch (``torch.cuda.is_available()``, ``torch.cuda.device_count() >
    0``), or a device the code chose itself, a plain name (``str(device).startswith("cuda")``,
    ``device.type == "cuda"``); ``not`` turns it round. An option (``args.cuda``, ``args.device
    == "cuda"``) is one a run may leave off: None."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _where_available(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right = test.left, test.comparators[0]
        if isinstance(test.ops[0], (ast.Gt, ast.GtE, ast.NotEq)) and _asks_torch(left):
            return True  # ``torch.cuda.device_count() > 0``
        if isinstance(test.ops[0], ast.Eq) and _cuda_text(right) and _chosen_device(left):
            return True  # ``device.type == "cuda"``
        return None
    if isinstance(test, ast.Call):
        func = test.func
        if _asks_torch(test):
            return True
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "startswith"
            and len(test.args) == 1
            and _cuda_text(test.args[0])
            and _chosen_device(func.value)
        ):
            return True  # ``str(device).startswith("cuda")``
    return None


def _asks_torch(node: ast.expr) -> bool:
    name = dotted(node.func) if isinstance(node, ast.Call) else None
    return name is not None and name.endswith(("cuda.is_available", "cuda.device_count"))


def _cuda_text(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value in ("cuda", "gpu")


def _chosen_device(node: ast.expr) -> bool:
    """A device the code holds in a plain name: ``device``, ``str(device)``, ``device.type``."""
    if isinstance(node, ast.Call) and dotted(node.func) == "str" and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, ast.Attribute) and node.attr == "type":
        node = node.value
    return isinstance(node, ast.Name)


def hook_loaders(ctx: FileContext) -> Iterator[ast.Call]:
    """The DataLoaders a Lightning ``train_dataloader()`` hook returns: the Trainer iterates
    the training loader once per epoch (and warns that its workers restart each time)."""
    if b"lightning" not in ctx.source:
        return
    epochs = [(k.value, c) for c, _ in ctx.calls for k in c.keywords if k.arg == "max_epochs"]
    if epochs and all(at_most_once(ctx, value, call) for value, call in epochs):
        # every Trainer runs one epoch (``max_epochs=1``, or a name bound only to 1): the
        # workers start once; not where another Trainer of the file trains for longer
        return
    for function in ctx.loops.functions.get("train_dataloader", ()):
        yield from returned_loaders(function, ctx.names)


def fitted_loaders(ctx: FileContext) -> Iterator[ast.Call]:
    """The DataLoaders a Lightning Trainer's ``fit`` is handed to train on
    (``trainer.fit(model, train_loader, val_loader)``, ``train_dataloaders=``): the Trainer
    iterates them once per epoch. Not where the trainer runs one epoch (``max_epochs=1``);
    without ``max_epochs`` Lightning runs up to 1,000."""
    if b"lightning" not in ctx.source:
        return
    for trainer, name in ctx.calls:
        epochs = keyword(trainer, "max_epochs")
        if name not in LIGHTNING_TRAINERS or (
            epochs is not None and at_most_once(ctx, epochs.value, trainer)
        ):
            continue
        for fit in method_calls(ctx, trainer, "fit"):
            given = argument(fit, "train_dataloaders", 1) or argument(fit, "train_dataloader", 1)
            if isinstance(given, ast.Call) and ctx.names.qualname(given.func) in DATALOADERS:
                yield given  # ``trainer.fit(model, DataLoader(...))``
                continue
            loader = dotted(given) if given is not None else None
            if loader is None:
                continue
            calls = ctx.loops.loader_calls.get(loader, [])
            if isinstance(given, ast.Name):
                # the loader of that name the fit's own scope binds (another function's
                # ``loader`` is not this one), else the module's
                bound = binding_before(ctx, given, fit)
                if bound is not None:
                    calls = [c for c in calls if c is bound]
                else:
                    calls = [c for c in calls if ctx.enclosing_scope(c) is ctx.tree]
            yield from calls


def at_most_once(ctx: FileContext, count: ast.expr, at: ast.AST) -> bool:
    """``count`` is a literal of at most 1, or a name its scope binds only to such literals
    (``num_epoch = 1``); not an option's default, which a run may change (``--num_train_epochs``,
    also recomputed from ``--max_train_steps`` in Diffusers' scripts)."""
    if isinstance(count, ast.Constant):
        return _one_at_most(count)
    if not isinstance(count, ast.Name):
        return False
    scope = ctx.enclosing_scope(at)
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and count.id in parameter_names(
        scope
    ):
        # what the callers pass: every call of the file passes at most 1 (a notebook's
        # ``train_exact(model, loader, num_epochs=1)``), or leaves a default of at most 1
        if not is_notebook(ctx.path):
            return False  # another file may import the function and pass more
        if count.id in scope_stores(ctx, scope) or any(
            has_star_args(c)
            for c, _ in ctx.calls
            if isinstance(c.func, ast.Name) and c.func.id == scope.name
        ):
            return False  # rebound in the body, or a call whose ``**config`` may pass it
        given = passed_for(ctx, scope, count.id)
        default = parameter_defaults(scope).get(count.id)
        return bool(given) and all(_one_at_most(default if g is None else g) for g in given or ())
    bound = bound_in(ctx, count.id, scope)
    if bound is None and not isinstance(scope, ast.Module):
        bound = bound_in(ctx, count.id, ctx.tree)
    return bool(bound) and all(_one_at_most(v) for v in bound or ())


def _one_at_most(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Constant) and type(value.value) is int and value.value <= 1
