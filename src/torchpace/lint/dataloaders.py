"""DataLoaders as the TP1xx rules see them: which ones feed training, and what they are given.

A loader *feeds training* unless the code shows otherwise, which the real-world corpus
(``benchmarks/realworld/``) showed in four ways, each a false finding before:

- it is named for evaluation (``val_loader``, ``eval_dataloader``), or built in a function so
  named (Lightning's ``val_dataloader()``, ``test_dataloader()``, ``predict_dataloader()``);
- every loop over it is an evaluation loop (:mod:`torchpace.lint.loops`); or, never looped
  over here, it is only handed to evaluation (a call with autograd off, in or of a function
  named for evaluation: PyG's ``model.inference(x, subgraph_loader)`` in ``test()``; a function
  of this file decorated ``@torch.no_grad()``, or whose every loop over it, also through a
  progress bar, evaluates: FastSpeech 2's ``synthesize(model, ..., batchs, ...)``);
- it is read once, ``next(iter(DataLoader(...)))`` (also through an iterator that only
  ``next()`` reads, outside any loop) or with ``batch_size=len(dataset)``, to preload a dataset
  or show a sample; it is built with autograd off (in a ``@torch.no_grad()`` function); every
  loop over it calls nothing, or only shows what it reads, or moves each batch and drops the
  copy (an input-pipeline demo, a dataset module's self-test); or, bound
  in a notebook or in a function, it is never read after it is built (a data-preparation
  notebook's "does it load" cell);
- for workers and pinning: its dataset, a class of the same file, returns tensors already on
  the device (``__getitem__`` calls ``.cuda()``), or its ``collate_fn`` puts the batch there:
  worker processes cannot create CUDA tensors and pinning them raises; for pinning: a PyG
  sampler of subgraphs whose graph the file moves to the device, whose batches PyG gathers on
  the device (:func:`graph_on_device`).

Arguments passed through ``**kwargs`` are read when the dict is built in the same file from
literals (``kwargs = {"num_workers": 1}``, ``kwargs.update({...})``, ``dict(...)``), as
pytorch/examples do; anything else stays unknown, and rules stay silent. A key that the
dict's assignments give different values (BasicSR's ``num_workers`` from the configuration for
training, ``0`` in the validation branch) is unknown too. A loader's reads end at the next
assignment of its name, not one under an ``if`` the loader is not under (``if mode ==
"batch": batchs = DataLoader(...)``, then ``if mode == "single": batchs = [...]``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator

from torchpace.lint.device import moves_to_a_device
from torchpace.lint.engine import is_notebook
from torchpace.lint.loops import (
    DATALOADERS,
    EVAL_NAME,
    ITER_WRAPPERS,
    SUBGRAPH_LOADERS,
    Function,
    assigned_in,
    assignments,
    bound_in,
    disables_grad,
    dotted,
    iterated,
    moves_itself,
    returned,
    returned_loaders,
    scope_stores,
    walk,
)
from torchpace.lint.rule import (
    FileContext,
    argument,
    assigned_once,
    parameter_names,
    passed_for,
    per_file,
)
from torchpace.lint.tree import subtree
from torchpace.lint.values import int_value


class Unknown:
    """A setting that ``*args`` or a ``**kwargs`` dict this file does not spell out may carry."""


UNKNOWN = Unknown()

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, ...)
COLLATE_FN_POSITION = 6


def _dict_sources(
    ctx: FileContext, name: str, scope: ast.AST
) -> tuple[list[ast.expr], list[ast.expr]]:
    """Every value assigned to ``name``, and every argument of ``name.update(...)`` and key
    set on it (``kwargs["pin_memory"] = True``; a key that is not a string literal leaves the
    dict unknown). A plain name is the one ``scope`` reads, as Python scopes it: its own, or the
    module's where the function binds no such name; none where it is the function's parameter
    (``def get_loader(dataset, **kwargs)``). An attribute (``self.loader_kwargs``) is read
    anywhere in the file."""
    scoped = "." not in name
    if scoped and _binds_parameter(scope, name):
        return [], []
    # (the scope it runs in, the value bound to the name or None, the update or None)
    found: list[tuple[ast.AST, ast.expr | None, ast.expr | None]] = []
    binders: set[int] = set()  # the scopes that bind the name (``kwargs: dict`` too)
    for node in ctx.of_type(ast.Assign, ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        binds = any(dotted(t) == name for t in targets)
        keyed = [t for t in targets if isinstance(t, ast.Subscript) and dotted(t.value) == name]
        if not binds and not keyed:
            continue  # most assignments: another name
        where = ctx.enclosing_scope(node) if scoped else ctx.tree
        if binds:
            binders.add(id(where))
        if node.value is None:
            continue
        if binds:
            found.append((where, node.value, None))
        for target in keyed:
            key = target.slice
            known = isinstance(key, ast.Constant) and isinstance(key.value, str)
            update = ast.Dict([key], [node.value]) if known else ast.Constant(None)
            found.append((where, None, update))
    for call, _ in ctx.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "update" and dotted(func.value) == name:
            where = ctx.enclosing_scope(call) if scoped else ctx.tree
            found += [(where, None, a) for a in call.args]
            found += [
                (where, None, ast.Dict([ast.Constant(k.arg)], [k.value]))
                for k in call.keywords
                if k.arg
            ]
    if scoped:  # the function's own binding, else the module's
        home = scope if id(scope) in binders else ctx.tree
        found = [f for f in found if f[0] is home]
    return [v for _, v, _ in found if v is not None], [u for _, _, u in found if u is not None]


def _binds_parameter(scope: ast.AST, name: str) -> bool:
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return False
    args = scope.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return any(a is not None and a.arg == name for a in every)


def _dict_entries(
    ctx: FileContext, node: ast.expr, scope: ast.AST, depth: int = 0
) -> dict[str, ast.expr] | None:
    """The literal keys of a dict built from ``node``, read in ``scope``; None when any key
    cannot be known."""
    if depth > 4:
        return None
    if isinstance(node, ast.Dict):
        entries: dict[str, ast.expr] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:  # {**other}
                inner = _dict_entries(ctx, value, scope, depth + 1)
                if inner is None:
                    return None
                entries.update(inner)
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                entries[key.value] = value
            else:
                return None
        return entries
    if isinstance(node, ast.Call) and dotted(node.func) == "dict" and not node.args:
        if any(k.arg is None for k in node.keywords):
            return None
        return {k.arg: k.value for k in node.keywords if k.arg}
    name = dotted(node)
    if name is None:
        return None
    assigned, updates = _dict_sources(ctx, name, scope)
    if not assigned:
        return None  # a function's ``**kwargs``, or a dict built where this file does not say
    alternatives = [_dict_entries(ctx, source, scope, depth + 1) for source in assigned]
    merged: dict[str, ast.expr] = {}
    keys = dict.fromkeys(k for found in alternatives if found is not None for k in found)
    for entry in keys:
        values = [found.get(entry) if found is not None else None for found in alternatives]
        if len({ast.dump(v) if v is not None else "" for v in values}) > 1:
            # BasicSR's ``num_workers=num_workers`` for training, ``num_workers=0`` in the
            # ``elif phase in ['val', 'test']:`` branch: which one a call sees, the file does
            # not say
            merged[entry] = UNKNOWN  # type: ignore[assignment]
        else:
            merged[entry] = values[0]  # type: ignore[assignment]
    if any(found is None for found in alternatives):
        return None
    for source in updates:
        found = _dict_entries(ctx, source, scope, depth + 1)
        if found is None:
            return None
        merged.update(found)
    return merged


def loader_argument(
    ctx: FileContext, call: ast.Call, name: str, position: int
) -> ast.expr | Unknown | None:
    """What ``call`` passes for ``name``: an expression, None when not passed, or
    :data:`UNKNOWN` when ``*args`` or a ``**kwargs`` dict this file does not spell out may."""
    if ctx.names.qualname(call.func) in SUBGRAPH_LOADERS:
        position = len(call.args)  # their positional parameters are their own: keywords only
    value = argument(call, name, position)
    if value is not None:
        return value
    if any(isinstance(a, ast.Starred) for a in call.args):
        return UNKNOWN
    for kw in call.keywords:
        if kw.arg is None:
            entries = _dict_entries(ctx, kw.value, ctx.enclosing_scope(call))
            if entries is None:
                return UNKNOWN
            if name in entries:
                return entries[name]
    return None


def _bound_name(ctx: FileContext, call: ast.Call) -> str | None:
    """The name the loader is bound to, through wrappers (``val = cycle(DataLoader(...))``)."""
    node: ast.AST = call
    parent = ctx.parents.get(id(node))
    while isinstance(parent, ast.Call) and node in parent.args:
        node, parent = parent, ctx.parents.get(id(parent))
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        return dotted(parent.targets[0])
    if isinstance(parent, ast.AnnAssign):
        return dotted(parent.target)
    return None


_FRAMEWORK_PREPARE = frozenset({"prepare", "prepare_data_loader", "setup_dataloaders"})
_FRAMEWORK_OWNER = re.compile(r"accelerator|fabric", re.IGNORECASE)


def prepared_by_framework(ctx: FileContext, call: ast.Call) -> bool:
    """The loader ``call`` builds is handed to ``accelerator.prepare(...)`` (Hugging Face
    Accelerate) or ``fabric.setup_dataloaders(...)`` (Lightning Fabric): the framework moves
    each batch to the run's device, so the run is a GPU run known only through the framework,
    and the loop's own ``.to(device)`` on a batch is a no-op (issue 32)."""
    name = _bound_name(ctx, call)
    if name is None:
        return False
    for other, _ in ctx.calls:
        func = other.func
        if not (isinstance(func, ast.Attribute) and func.attr in _FRAMEWORK_PREPARE):
            continue
        owner = (dotted(func.value) or "").rsplit(".", 1)[-1]
        if _FRAMEWORK_OWNER.search(owner) and any(dotted(a) == name for a in other.args):
            return True
    return False


def _read_once(ctx: FileContext, call: ast.AST) -> bool:
    """``next(iter(DataLoader(...)))``: one batch, to preload a dataset; also through an
    iterator only ``next()`` reads (a tutorial's ``dataiter = iter(loader)``, then ``images,
    labels = next(dataiter)`` to show a sample)."""
    parent = ctx.parents.get(id(call))
    grand = ctx.parents.get(id(parent)) if parent is not None else None
    if not (isinstance(parent, ast.Call) and dotted(parent.func) == "iter"):
        return False
    if isinstance(grand, ast.Call) and dotted(grand.func) == "next":
        return True
    if not (
        isinstance(grand, ast.Assign)
        and len(grand.targets) == 1
        and isinstance(grand.targets[0], ast.Name)
    ):
        return False
    iterator = grand.targets[0].id
    names = [n for n in ctx.of_type(ast.Name) if n.id == iterator]
    # up to the name's next binding (a notebook's next demo; ``data_iter = iter(loader)`` again
    # at each epoch's end is read by ``next()`` in the loop, which is no single read)
    until = min(
        (n.lineno for n in names if isinstance(n.ctx, ast.Store) and n.lineno > grand.lineno),
        default=float("inf"),
    )
    reads = [n for n in names if isinstance(n.ctx, ast.Load) and grand.lineno <= n.lineno < until]
    return all(
        isinstance(p := ctx.parents.get(id(n)), ast.Call)
        and dotted(p.func) == "next"
        and p.args[:1] == [n]
        and not _in_a_loop(ctx, p)
        for n in reads
    )


def _in_a_loop(ctx: FileContext, node: ast.AST) -> bool:
    """``node`` runs inside a loop of its own scope (or a comprehension)."""
    parent = ctx.parents.get(id(node))
    while parent is not None and not isinstance(
        parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)
    ):
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.While, ast.comprehension)):
            return True
        parent = ctx.parents.get(id(parent))
    return False


def _next_assignment(ctx: FileContext, name: str, call: ast.Call) -> float:
    """The line of the next assignment of another value to ``name`` after the loader
    ``call``'s, in its scope (``loader = fabric.setup_dataloaders(loader)`` keeps it); not one
    under an ``if`` that does not hold the loader too (FastSpeech 2's ``if args.mode ==
    "batch": batchs = DataLoader(...)`` and then ``if args.mode == "single": batchs = [...]``:
    a read after both may be the loader's)."""
    scope = ctx.enclosing_scope(call)
    later = [
        n.lineno
        for n in ctx.of_type(ast.Assign)
        if n.lineno > call.lineno
        and any(dotted(t) == name for t in n.targets)
        and ctx.enclosing_scope(n) is scope
        and not any(dotted(v) == name for v in subtree(n.value) if isinstance(v, ast.expr))
        and not _in_other_branch(ctx, n, call)
    ]
    return min(later, default=float("inf"))


def _in_other_branch(ctx: FileContext, node: ast.AST, call: ast.AST) -> bool:
    """``node`` runs under an ``if`` test that ``call`` is not under."""
    return any(
        isinstance(a, ast.If) and not (a.lineno <= call.lineno <= a.end_lineno)  # type: ignore[attr-defined]
        for a in ctx.ancestors(node)
    )


def _only_peeked(
    ctx: FileContext, name: str, mine: Callable[[ast.AST], bool] = lambda n: True
) -> bool:
    """Every read of the plain name ``name`` in the file (those ``mine`` keeps; not a
    function's own parameter of that name) is ``next(iter(name))``: a loader built to show one
    batch (a tutorial's sample image), never looped over or handed on (issue 32)."""
    uses = _reads(ctx, name, mine)
    peeks = [n for n in uses if _read_once(ctx, n)]
    return bool(peeks) and all(n in peeks or _inspected(ctx, n) for n in uses)


def _only_evaluated(
    ctx: FileContext, name: str, mine: Callable[[ast.AST], bool] = lambda n: True
) -> bool:
    """Every read of the plain name ``name`` (those ``mine`` keeps; not a function's own
    parameter of that name) hands it to evaluation: a call with autograd off, in a function
    named for evaluation, or of one (PyG's layer-wise ``model.inference(x, subgraph_loader)``
    in a ``@torch.no_grad() def test():``). Reads of its attributes (``del loader.data.x``,
    ``loader.data.num_nodes = n``) configure it; they iterate nothing."""
    uses = [
        n for n in _reads(ctx, name, mine) if not isinstance(ctx.parents.get(id(n)), ast.Attribute)
    ]
    return bool(uses) and all(_given_to_evaluation(ctx, n) for n in uses)


def _reads(ctx: FileContext, name: str, mine: Callable[[ast.AST], bool]) -> list[ast.Name]:
    """The reads of the plain name ``name`` that ``mine`` keeps, but a function's own parameter
    of that name."""
    return [
        n
        for n in ctx.of_type(ast.Name)
        if n.id == name and isinstance(n.ctx, ast.Load) and mine(n) and not _shadowed(ctx, n, name)
    ]


def _given_to_evaluation(ctx: FileContext, node: ast.AST) -> bool:
    call = ctx.parents.get(id(node))
    if not isinstance(call, ast.Call) or node is call.func:
        return False
    scope = ctx.enclosing_scope(call)
    callee = (dotted(call.func) or "").rsplit(".", 1)[-1]
    return (
        id(call) in ctx.loops.no_grad
        or bool(EVAL_NAME.search(callee))
        or (not isinstance(scope, ast.Module) and bool(EVAL_NAME.search(scope.name)))
        or _evaluated_in(ctx, call, node, scope)
    )


def _evaluated_in(ctx: FileContext, call: ast.Call, node: ast.AST, scope: ast.AST) -> bool:
    """``call`` hands the loader to functions of this file that run with autograd off
    (``@torch.no_grad() def extract_features(loader, inception, device)``), or that loop over
    it, also through a progress bar, and every such loop evaluates (FastSpeech 2's
    ``synthesize(model, ..., batchs, ...)``, whose ``for batch in batchs:`` moves each batch
    and runs the model under ``torch.no_grad()``)."""
    functions = ctx.loops.callees(call, scope)  # type: ignore[arg-type]
    if not functions:
        return False
    for function in functions:
        if any(disables_grad(ctx.names, d) for d in function.decorator_list):
            continue
        params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        if params[:1] == ["self"] and isinstance(call.func, ast.Attribute):
            params = params[1:]  # ``self.run(loader)``: the instance is not passed
        given = next((k.arg for k in call.keywords if k.value is node), None)
        if given is None and node in call.args:
            position = call.args.index(node)  # type: ignore[arg-type]
            given = params[position] if position < len(params) else None
        if given is None:
            return False
        nodes = list(walk(function.body))
        names = {given} | {  # ``pbar = tqdm(loader)``
            n.targets[0].id
            for n in nodes
            if isinstance(n, ast.Assign)
            and isinstance(n.targets[0], ast.Name)
            and dotted(iterated(n.value)) == given
        }
        loops = [
            loop
            for loop in nodes
            if isinstance(loop, (ast.For, ast.AsyncFor)) and dotted(iterated(loop.iter)) in names
        ]
        if not loops or not all(ctx.loops.evaluates(loop, function) for loop in loops):
            return False
    return True


_INSPECT = frozenset({"print", "len", "type", "repr", "str"})


def _inspected(ctx: FileContext, node: ast.AST) -> bool:
    """``loader`` shown, not consumed: a notebook cell's last expression (alone or in a
    tuple), or ``print(loader)``, ``len(loader)``."""
    parent = ctx.parents.get(id(node))
    if isinstance(parent, ast.Tuple):
        parent = ctx.parents.get(id(parent))
    if isinstance(parent, ast.Expr):
        return True
    return isinstance(parent, ast.Call) and dotted(parent.func) in _INSPECT


def _handed_on(ctx: FileContext, name: str) -> bool:
    """``name`` is given to a call other than an iteration wrapper: ``trainer.fit(model,
    loader)``, ``train(model, loader)`` may train from it in code this file does not show."""
    for call, _ in ctx.calls:
        given = [*call.args, *(k.value for k in call.keywords)]
        if any(dotted(a) == name for a in given) and _may_train_from(call):
            return True
    return False


def _may_train_from(call: ast.Call) -> bool:
    """A call handed a loader that may train from it: not an iteration wrapper, an inspection
    or ``next``."""
    callee = dotted(call.func)
    return callee not in ITER_WRAPPERS and callee not in _INSPECT and callee != "next"


def an_epoch_loop(loop: ast.AST) -> bool:
    """``for epoch in range(...)``, ``for i in range(args.epochs)``: a loop over ``range`` whose
    target or bounds are named for epochs."""
    if not (
        isinstance(loop, (ast.For, ast.AsyncFor))
        and isinstance(loop.iter, ast.Call)
        and dotted(loop.iter.func) == "range"
    ):
        return False
    names = [loop.target, *(n for a in loop.iter.args for n in ast.walk(a))]
    return any(
        "epoch" in (n.id if isinstance(n, ast.Name) else n.attr).lower()
        for n in names
        if isinstance(n, (ast.Name, ast.Attribute))
    )


@per_file
def handed_each_epoch(ctx: FileContext) -> list[tuple[ast.For | ast.AsyncFor, ast.expr]]:
    """(epoch loop, value) for each value a name is bound to (``train_loader = ...``,
    ``self.train_loader = ...``, anywhere in the file but inside the loop) that an epoch loop
    (:func:`an_epoch_loop`) hands to a function of another project file that is not an
    evaluation: ``train_one_epoch(model, optimizer, train_loader)`` goes through the loader once
    per call, so once per epoch. A name bound inside the loop is a loader built anew each epoch,
    with no workers to keep. TP104 reads the DataLoaders among the values; ``lint.engine`` the
    calls of project factories, whose file it reads again."""
    from torchpace.lint.project import imported_from

    loops = [loop for loop in ctx.of_type(ast.For, ast.AsyncFor) if an_epoch_loop(loop)]
    if not loops:
        return []
    bound: dict[str, list[ast.expr]] = {}
    for target, value in assignments(ctx.of_type(ast.Assign)):
        bound.setdefault(target, []).append(value)
    out: list[tuple[ast.For | ast.AsyncFor, ast.expr]] = []
    for loop in loops:
        nodes = list(walk(loop.body))
        inside = {id(n) for n in nodes}
        for call in (n for n in nodes if isinstance(n, ast.Call)):
            callee = ctx.names.import_path(call.func)
            if callee is None or EVAL_NAME.search(callee.rsplit(".", 1)[-1]):
                continue  # a library's, this file's (its loops are read here), an evaluation
            if not any(imported_from(ctx, call)):
                continue
            for arg in (*call.args, *(k.value for k in call.keywords)):
                name = dotted(arg) if isinstance(arg, (ast.Name, ast.Attribute)) else None
                values = bound.get(name, []) if name is not None else []
                if any(id(v) in inside for v in values):
                    continue  # built anew each epoch
                out += [(loop, v) for v in values]
    return out


def _loops_over(ctx: FileContext, name: str) -> Iterator[ast.For | ast.AsyncFor]:
    """The loops over ``name``, not those of a function whose own parameter of that name
    shadows it (a course's ``def train(model, train_dataloader)``, called with another one)."""
    for loop in ctx.of_type(ast.For, ast.AsyncFor):
        assert isinstance(loop, (ast.For, ast.AsyncFor))
        if dotted(iterated(loop.iter)) == name and not _shadowed(ctx, loop, name):
            yield loop


def _returned_loaders(ctx: FileContext, name: str) -> list[ast.Call]:
    """The DataLoader calls that the functions of this file bound to ``name`` return:
    ``loader = get_loader(ds, 32)`` with ``def get_loader(...): return DataLoader(...)``."""
    if EVAL_NAME.search(name.rsplit(".", 1)[-1]):
        return []
    return _loaders_by_name(ctx).get(name, [])


def built_loaders(
    ctx: FileContext, function: Function, position: int | None = None
) -> list[ast.Call]:
    """The DataLoader calls ``function`` returns: ``return DataLoader(...)``, or ``return
    loader`` where the function binds ``loader`` only to DataLoader calls (SlowFast's
    ``construct_loader``, one call per kind of dataset); at ``position``, the loader that element
    of a returned tuple is (``return data_set, data_loader``: Time-Series-Library's
    ``data_provider``, position 1)."""
    returns = returned(function)
    if position is None:
        found = returned_loaders(function, ctx.names)
        elements = [r for r in returns if not isinstance(r, ast.Tuple)]
    else:  # ``return data_set, data_loader``: the element at that position
        elements = [
            r.elts[position] for r in returns if isinstance(r, ast.Tuple) and position < len(r.elts)
        ]
        found = [
            e
            for e in elements
            if isinstance(e, ast.Call) and ctx.names.qualname(e.func) in DATALOADERS
        ]
    for value in elements:
        if isinstance(value, ast.Name):
            bound = bound_in(ctx, value.id, function) or []
            if bound and all(
                isinstance(v, ast.Call) and ctx.names.qualname(v.func) in DATALOADERS for v in bound
            ):
                found += [v for v in bound if isinstance(v, ast.Call)]
    return found


def iterated_values(ctx: FileContext, loop: ast.For | ast.AsyncFor) -> list[ast.expr]:
    """What the loader ``loop`` iterates may be bound to: the values the name its header
    iterates is assigned in its scope, and those of the names each call of its function in this
    file passes for it (``train_epoch(train_loader, ...)`` after ``train_loader = build(...)``;
    a rebinding elsewhere, ``(model, train_loader) = build_trainer(cfg)``, adds nothing)."""
    return [v for name, scope in _iterated_names(ctx, loop) for v in assigned_in(ctx, name, scope)]


def _iterated_names(ctx: FileContext, loop: ast.For | ast.AsyncFor) -> list[tuple[str, ast.AST]]:
    """The name ``loop``'s header iterates, in the loop's scope, and where that name is a
    parameter of the loop's function, each name a call of the function in this file passes for
    it, in the caller's scope; where the function neither takes nor binds it, the module's
    global of that name (pytorch-cifar100's ``def train(epoch):`` over the loader the
    ``__main__`` block binds)."""
    name = dotted(iterated(loop.iter))
    if name is None:
        return []
    scope = ctx.enclosing_scope(loop)
    names: list[tuple[str, ast.AST]] = [(name, scope)]
    if (
        isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef))
        and "." not in name
        and name not in parameter_names(scope)
        and name not in scope_stores(ctx, scope)
    ):
        names.append((name, ctx.tree))
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and name in parameter_names(
        scope
    ):
        for given in passed_for(ctx, scope, name) or ():
            outer = dotted(given) if given is not None else None
            if given is not None and outer is not None:
                names.append((outer, ctx.enclosing_scope(given)))
    return names


@per_file
def _loaders_by_name(ctx: FileContext) -> dict[str, list[ast.Call]]:
    """Each name bound to the result of a function of this file that returns DataLoaders."""
    facts = ctx.loops
    built: dict[str, list[ast.Call]] = {}  # function name → the DataLoader calls it returns
    found: dict[str, list[ast.Call]] = {}
    for target, value in assignments(ctx.of_type(ast.Assign, ast.AnnAssign)):
        if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Name):
            continue
        callee = value.func.id
        if callee not in built:
            built[callee] = [
                r for f in facts.functions.get(callee, ()) for r in built_loaders(ctx, f)
            ]
        if built[callee]:
            found.setdefault(target, []).extend(built[callee])
    return found


def iterated_loader_calls(ctx: FileContext, loop: ast.For | ast.AsyncFor) -> list[ast.Call]:
    """The DataLoader calls of this file whose loaders ``loop`` iterates: the one bound to the
    name its header iterates (directly, or returned by a function of this file), and, where
    that name is a parameter of the loop's function, those bound to what each call of the
    function in this file passes for it (``train_one_epoch(model, train_loader, opt)``)."""
    iterated_names = _iterated_names(ctx, loop)
    if not iterated_names:
        return []
    (name, scope), passed = iterated_names[0], iterated_names[1:]
    names = [name]
    if name not in ctx.loops.loader_calls:
        wrapped = _wrapped_by(ctx, name, scope)
        if wrapped is not None:  # ``pbar = tqdm(dataloader)``, then ``for x, _ in pbar:``
            names.append(wrapped)
    names += [n for n, _ in passed]
    calls: list[ast.Call] = []
    for n in dict.fromkeys(names):
        found = ctx.loops.loader_calls.get(n, []) or _returned_loaders(ctx, n)
        if n == name and not isinstance(scope, ast.Module):
            # a function's own loader of that name is the one it iterates, not another
            # function's (a notebook's train_exact and train_vae each build ``batcher``)
            found = [c for c in found if ctx.enclosing_scope(c) is scope] or found
        calls += found
    return calls


def _wrapped_by(ctx: FileContext, name: str, scope: ast.AST) -> str | None:
    """What ``name`` wraps, where ``scope`` binds it only to an iteration wrapper of one name
    (``pbar = tqdm(dataloader)``): that name."""

    def wrapper(value: ast.expr) -> bool:
        return (
            isinstance(value, ast.Call) and dotted(value.func) in ITER_WRAPPERS and bool(value.args)
        )

    bound = bound_in(ctx, name, scope) or []
    inner = {dotted(iterated(v)) for v in bound}
    return inner.pop() if bound and all(wrapper(v) for v in bound) and len(inner) == 1 else None


def _shadowed(ctx: FileContext, node: ast.AST, name: str) -> bool:
    return name in parameter_names(ctx.enclosing_scope(node))


def _whole_dataset(call: ast.Call) -> bool:
    """``batch_size=len(dataset)``: one batch holds everything, loaded once (hlb-CIFAR10)."""
    size = argument(call, "batch_size", 1)
    return isinstance(size, ast.Call) and dotted(size.func) == "len"


def feeds_training(ctx: FileContext, call: ast.Call) -> bool:
    """Whether the loader ``call`` builds may feed training steps (module doc)."""
    if ctx.loops.inference_only:
        return False  # a script with no sign of training anywhere: extraction, inference
    if _read_once(ctx, call) or _whole_dataset(call) or id(call) in ctx.loops.no_grad:
        return False
    scope = ctx.enclosing_scope(call)
    if not isinstance(scope, ast.Module) and EVAL_NAME.search(scope.name):
        return False
    name = _bound_name(ctx, call)
    if name is None:
        return True
    if EVAL_NAME.search(name.rsplit(".", 1)[-1]):
        return False
    # Reads up to the name's next assignment are this loader's (a notebook's demo loader, then
    # a training loader under the same name cells later).
    until = _next_assignment(ctx, name, call)
    if (
        not ctx.loops.step_loops
        and any(True for _ in _loops_over(ctx, name))
        and not _handed_on(ctx, name)
    ):
        return False  # iterated here, in a file with no training loop: captioning, caching

    def mine(node: ast.AST) -> bool:
        """A read of this loader: before the name's next assignment, and not before the loader
        in its own scope (a notebook's earlier demo loader of the same name)."""
        return node.lineno < until and (  # type: ignore[attr-defined]
            node.lineno >= call.lineno or ctx.enclosing_scope(node) is not scope  # type: ignore[attr-defined]
        )

    loops = [loop for loop in _loops_over(ctx, name) if mine(loop)]
    if not loops and (_only_peeked(ctx, name, mine) or _only_evaluated(ctx, name, mine)):
        return False
    # Built and never read after (an ``if``/``else`` binding it twice reads it once, after
    # both): a data-preparation notebook's "does it load" cell.
    if (
        not loops
        and "." not in name
        and _unseen_elsewhere(ctx, scope)
        and not _reads(ctx, name, lambda n: n.lineno > call.lineno)  # type: ignore[attr-defined]
    ):
        return False
    evaluation = {id(loop) for loop in ctx.loops.eval_loops}
    # a pass under ``torch.no_grad()`` trains nothing, model call or not (a notebook's count of
    # dead neurons runs each layer of the net by hand over the training set)
    evaluation |= {id(loop) for loop in loops if id(loop) in ctx.loops.no_grad}
    idle = {id(loop) for loop in loops if _idle(loop)}
    if not loops or not all(id(loop) in evaluation | idle for loop in loops):
        return True
    # Looped over here only to peek or evaluate, and also handed to a function that may train
    # from it (a notebook's first-batch cell, then ``training_loop(model, dataloader, ...)``).
    return any(_handed_to_training(ctx, n, scope) for n in _reads(ctx, name, mine))


def _handed_to_training(ctx: FileContext, node: ast.Name, loader_scope: ast.AST) -> bool:
    """``node`` is an argument of a call that may train from it (:func:`_may_train_from`), not
    a hand-off to evaluation, and is the loader's name: not a function's own name of that
    spelling (a parameter or a local it binds), unless it is the loader's own function."""
    call = ctx.parents.get(id(node))
    if not isinstance(call, ast.Call) or node is call.func or not _may_train_from(call):
        return False
    scope = ctx.enclosing_scope(node)
    own = (
        scope is not loader_scope
        and isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (node.id in parameter_names(scope) or node.id in scope_stores(ctx, scope))
    )  # ``def fit(): loader = build(); run_epoch(model, loader)``: fit's own loader
    return not own and not _given_to_evaluation(ctx, node)


@per_file
def training_loaders(ctx: FileContext) -> list[ast.Call]:
    """The DataLoader calls that may feed training steps (:func:`feeds_training`)."""
    return [call for call, name in ctx.calls if name in DATALOADERS and feeds_training(ctx, call)]


def framework_gpu(ctx: FileContext) -> bool:
    """A training loader is prepared by Accelerate or Fabric, and the file does not put the
    framework on the CPU: the run's device is the framework's, a GPU where there is one."""
    from torchpace.lint.device import framework_on_cpu

    return not framework_on_cpu(ctx) and any(
        prepared_by_framework(ctx, call) for call in training_loaders(ctx)
    )


def _unseen_elsewhere(ctx: FileContext, scope: ast.AST) -> bool:
    """A name bound in ``scope`` that no other file can read: a function's local, or anything
    a notebook binds (a module's global may be imported by the script that trains)."""
    return not isinstance(scope, ast.Module) or is_notebook(ctx.path)


def _idle(loop: ast.For | ast.AsyncFor) -> bool:
    """A loop over batches that computes nothing: it calls nothing, or only shows what it
    reads (``print(inputs.shape)``, a tutorial's "dummy training loop"), or moves a batch and
    drops the copy (a dataset module's self-test: ``for batch in batchs: to_device(batch,
    device); n_batch += 1``)."""
    dropped = {
        id(n.value)
        for n in walk(loop.body)
        if isinstance(n, ast.Expr)
        and isinstance(n.value, ast.Call)
        and n.value.args
        and isinstance(n.value.args[0], ast.Name)
        and moves_itself(n.value, n.value.args[0].id)
    }
    return all(
        dotted(n.func) in _INSPECT or id(n) in dropped
        for n in walk(loop.body)
        if isinstance(n, ast.Call)
    )


def _dataset_class(ctx: FileContext, call: ast.Call) -> ast.ClassDef | None:
    dataset = argument(call, "dataset", 0)
    facts = ctx.loops
    if isinstance(dataset, ast.Call) and isinstance(dataset.func, ast.Name):
        return facts.classes.get(dataset.func.id)
    owner = facts.instances.get(dotted(dataset) or "") if dataset is not None else None
    return facts.classes.get(owner or "")


def graph_on_device(ctx: FileContext, call: ast.Call) -> bool:
    """A PyG sampler of subgraphs (:data:`SUBGRAPH_LOADERS`) whose graph the file moves to a
    device, whole or in part (``data = data.to(device)``, ``data.to(device, "x", "y")``,
    ``data.x = data.x.to(device)``): PyG then gathers each batch's features in the main
    process, from the device (its ``filter_per_worker`` is inferred False), so the loader's
    workers and its pinning see only the sampled indices."""
    if ctx.names.qualname(call.func) not in SUBGRAPH_LOADERS:
        return False
    graph = argument(call, "data", 0)
    if isinstance(graph, ast.Call) and (dotted(graph.func) or "").endswith("copy") and graph.args:
        graph = graph.args[0]  # ``copy.copy(data)``: the same tensors
    name = dotted(graph) if graph is not None else None
    if name is None:
        return False
    scope = ctx.enclosing_scope(call)
    root = name.split(".")[0]
    if not isinstance(scope, ast.Module) and not (
        root in parameter_names(scope)
        or any(
            isinstance(n, ast.Name) and n.id == root and isinstance(n.ctx, ast.Store)
            for n in subtree(scope)
        )
    ):
        scope = ctx.tree  # a function building its loader from the module's graph
    for node, _ in ctx.calls:
        if not moves_to_a_device(node, ctx.names) or ctx.enclosing_scope(node) is not scope:
            continue  # a function's own ``data`` (``for data in loader: data.to(device)``)
        parent = ctx.parents.get(id(node))
        if isinstance(parent, ast.Assign) and any(dotted(t) == name for t in parent.targets):
            return True  # ``data = dataset[0].to(device, "x", "y")``
        moved = node.func.value  # type: ignore[attr-defined]
        while isinstance(moved, (ast.Attribute, ast.Subscript)) and dotted(moved) != name:
            moved = moved.value
        if dotted(moved) == name:
            return True
    return False


def yields_device_tensors(ctx: FileContext, call: ast.Call) -> bool:
    """The loader's dataset holds tensors already on a device (``TensorDataset(x, y)`` of
    tensors made with ``device=device`` or moved with ``.to(device)``), is a class of this file
    whose items are put on a device, or its ``collate_fn`` is a function of this file that puts
    the batch there, also through ``functools.partial`` (rasbt's ``partial(custom_collate_fn,
    device=device)``)."""

    def moves(function: ast.AST) -> bool:
        return any(moves_to_a_device(n, ctx.names) for n in subtree(function))

    if _holds_device_tensors(ctx, argument(call, "dataset", 0), call):
        return True
    cls = _dataset_class(ctx, call)
    if cls is not None and any(
        isinstance(method, ast.FunctionDef)
        and method.name in {"__getitem__", "__iter__"}
        and moves(method)
        for method in cls.body
    ):
        return True
    collate = _collate_functions(ctx, argument(call, "collate_fn", COLLATE_FN_POSITION))
    return bool(collate) and all(moves(f) for f in collate)


# Datasets of the tensors they are given: an item is a slice of them.
TENSOR_DATASETS = frozenset(
    {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}
)


def _holds_device_tensors(ctx: FileContext, data: ast.expr | None, at: ast.AST) -> bool:
    """``data``, read at ``at``, is a ``TensorDataset`` of which a tensor is on a device: a
    worker process could not even index it (CUDA does not survive a fork), and a batch is
    already where the step needs it (a course's ``x = torch.tensor(x, device=device)``)."""
    data = _binding_before(ctx, data, at)
    if not (isinstance(data, ast.Call) and ctx.names.qualname(data.func) in TENSOR_DATASETS):
        return False
    return any(_device_tensor(ctx, arg, data) for arg in data.args)


def _device_tensor(ctx: FileContext, node: ast.expr | None, at: ast.AST, depth: int = 0) -> bool:
    """``node`` is a tensor made on a device or moved to one (as far as the file shows): a
    factory given ``device=`` other than "cpu", ``.to(device)``, ``.cuda()``, a slice of such a
    tensor, or a name last bound to one before ``at``, also by unpacking what a function of
    this file returns (``x_train, x_test = load_data(device)``), one call deep."""
    while isinstance(node, ast.Subscript):
        node = node.value  # ``x[train_idx]``: a slice of the tensor is where the tensor is
    if isinstance(node, ast.Call):
        device = next((k.value for k in node.keywords if k.arg == "device"), None)
        if device is not None:
            return not (isinstance(device, ast.Constant) and device.value == "cpu")
        return moves_to_a_device(node, ctx.names)
    if not isinstance(node, ast.Name) or depth > 1:
        return False
    bound = _assignment_before(ctx, node.id, at)
    if bound is None:
        return False
    target, value = bound
    if isinstance(target, ast.Name):
        return _device_tensor(ctx, value, value, depth + 1)
    # ``a, b = f(...)``: the element of what ``f`` returns at ``a``'s place.
    place = next(
        i for i, e in enumerate(target.elts) if isinstance(e, ast.Name) and e.id == node.id
    )
    if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts):
        return _device_tensor(ctx, value.elts[place], value, depth + 1)
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return False
    functions = ctx.loops.functions.get(value.func.id, [])
    results = [r for f in functions for r in returned(f)]
    return bool(results) and all(
        isinstance(r, ast.Tuple)
        and len(r.elts) == len(target.elts)
        and _device_tensor(ctx, r.elts[place], r, depth + 1)
        for r in results
    )


def _binding_before(ctx: FileContext, node: ast.expr | None, at: ast.AST) -> ast.expr | None:
    """What a name was last bound to by a plain assignment before ``at``; else ``node``."""
    if not isinstance(node, ast.Name):
        return node
    bound = _assignment_before(ctx, node.id, at)
    return bound[1] if bound is not None and isinstance(bound[0], ast.Name) else None


def _assignment_before(
    ctx: FileContext, name: str, at: ast.AST
) -> tuple[ast.Name | ast.Tuple, ast.expr] | None:
    """The last assignment to ``name`` in ``at``'s scope before ``at``'s line, as (the target
    that binds it, the value): ``name = v`` or ``a, name = v``; None where there is none or the
    name is bound otherwise there (a loop, ``with``, an augmented assignment) in between."""
    scope = ctx.enclosing_scope(at)
    line = at.lineno  # type: ignore[attr-defined]
    best: tuple[int, ast.Name | ast.Tuple, ast.expr] | None = None
    other = 0
    for node in walk(scope.body):
        if not isinstance(node, ast.Name) or node.id != name or not isinstance(node.ctx, ast.Store):
            continue
        if node.lineno >= line:
            continue
        assign = ctx.parents.get(id(node))
        target: ast.AST = node
        if isinstance(assign, ast.Tuple):
            target, assign = assign, ctx.parents.get(id(assign))
        if isinstance(assign, ast.Assign) and target in assign.targets:
            if best is None or node.lineno > best[0]:
                best = (node.lineno, target, assign.value)  # type: ignore[assignment]
        else:
            other = max(other, node.lineno)
    if best is None or other >= best[0]:
        return None
    return best[1], best[2]


def _collate_functions(ctx: FileContext, node: ast.expr | None, depth: int = 0) -> list[Function]:
    """The functions of this file ``node`` may name: ``f``, ``partial(f, ...)``, or a name
    bound only to those (in each branch of an ``if``); empty where any is something else."""
    if isinstance(node, ast.Call) and ctx.names.qualname(node.func) == "functools.partial":
        return _collate_functions(ctx, node.args[0] if node.args else None, depth)
    if not isinstance(node, ast.Name) or depth > 1:
        return []
    functions = ctx.loops.functions.get(node.id, [])
    if len(functions) == 1:
        return functions
    bound = [v for t, v in assignments(ctx.of_type(ast.Assign)) if t == node.id]
    found = [_collate_functions(ctx, v, depth + 1) for v in bound]
    return [f for fs in found for f in fs] if found and all(found) else []


def streams_without_sharding(ctx: FileContext, call: ast.Call) -> bool:
    """The dataset is an ``IterableDataset`` of this file that never asks which worker it runs
    in (``get_worker_info``): with workers, each one would yield the whole stream."""
    cls = _dataset_class(ctx, call)
    if cls is None:
        return False
    iterable = any((dotted(b) or "").endswith("IterableDataset") for b in cls.bases)
    shards = any(
        isinstance(n, (ast.Name, ast.Attribute)) and (dotted(n) or "").endswith("get_worker_info")
        for n in subtree(cls)
    )
    return iterable and not shards


# torchvision's datasets of 28x28 grey images, and the side up to which a transform may resize
# them and leave them small: a conv or a matmul on such a batch is microseconds on a GPU.
SMALL_IMAGE_DATASETS = frozenset(
    f"torchvision.datasets.{name}"
    for name in (
        "MNIST",
        "FashionMNIST",
        "KMNIST",
        "EMNIST",
        "QMNIST",
        "CIFAR10",
        "CIFAR100",
        "SVHN",
    )
)
SMALL_IMAGE_SIDE = 32
_RESIZES = frozenset({"Resize", "RandomResizedCrop", "CenterCrop", "RandomCrop"})


def yields_small_images(ctx: FileContext, call: ast.Call) -> bool:
    """The loader ``call`` builds is over a dataset of images of at most 32x32 pixels (MNIST,
    Fashion-MNIST, KMNIST, EMNIST, QMNIST, CIFAR-10, CIFAR-100, SVHN from torchvision), that
    its transform resizes or crops, if at all, to
    at most :data:`SMALL_IMAGE_SIDE` pixels (a size the file gives: a literal or an option
    default). A size it cannot read makes the images not small."""
    data = split_from(ctx, assigned_once(ctx, argument(call, "dataset", 0)))
    if not isinstance(data, ast.Call) or ctx.names.qualname(data.func) not in SMALL_IMAGE_DATASETS:
        return False
    given = argument(data, "transform", 2)
    transform = assigned_once(ctx, given)
    if given is not None and transform is None:
        return False  # a name bound more than once: its transforms cannot be read
    for node in subtree(transform) if transform is not None else ():
        if not isinstance(node, ast.Call):
            continue
        name = (ctx.names.qualname(node.func) or dotted(node.func) or "").rsplit(".", 1)[-1]
        if name not in _RESIZES:
            continue
        size = argument(node, "size", 0)
        sides = size.elts if isinstance(size, (ast.Tuple, ast.List)) else [size]
        values = [int_value(ctx, side) for side in sides]
        if not values or any(v is None or v > SMALL_IMAGE_SIDE for v in values):
            return False
    return True


def split_from(ctx: FileContext, node: ast.expr | None) -> ast.expr | None:
    """The dataset a split of it is: ``self.train, self.val = random_split(mnist_all, [55000,
    5000])`` (a Lightning data module's ``setup``), where the file splits into that name once;
    else ``node``."""
    name = dotted(node) if node is not None else None
    if name is None:
        return node
    splits = [
        n.value
        for n in ctx.of_type(ast.Assign)
        if any(
            isinstance(t, ast.Tuple) and any(dotted(e) == name for e in t.elts) for t in n.targets
        )
    ]
    if len(splits) != 1 or not isinstance(splits[0], ast.Call) or not splits[0].args:
        return node
    if not (ctx.names.qualname(splits[0].func) or "").endswith("random_split"):
        return node
    return assigned_once(ctx, splits[0].args[0])


def batch_size(ctx: FileContext, call: ast.Call) -> int | None:
    """The batch size the loader ``call`` builds, where the file gives it (a literal, an option
    default, also in a ``**kwargs`` dict the file spells out); 1, torch's default, when not
    passed; None when unknown."""
    size = loader_argument(ctx, call, "batch_size", 1)
    if size is None:
        return 1
    return None if isinstance(size, Unknown) else int_value(ctx, size)
