"""Find the training loops of a file, and the code that runs on every step.

A *step loop* is a ``for`` or ``while`` loop that, on each iteration, calls ``backward()`` or an
optimizer's ``step()``, or iterates a DataLoader; calls to functions of the same file count
(``train_step(batch)`` whose body calls ``loss.backward()``). A loop whose body only holds step
loops (``for epoch in range(n): for batch in loader: ...``) is an *epoch loop*, not a step loop.

The *hot* code is what runs on every step: the bodies of step loops, nested loops included, and
the whole bodies of the same-file functions they call, transitively; and the functions a
framework calls once per batch with no loop of the file around them (a Lightning module's
``training_step``; the function handed to a PyTorch-Ignite engine, ``Engine(train_step)``, which
also counts as a training loop of its own). Left out: the body of an ``if`` gated by a logging
cadence (``if step % 100 == 0:``, also inside an ``and``, or an ``or`` with a last-step test or a
flag), unless that body itself trains (the optimizer step of gradient accumulation runs on a
cadence and is training); an exception handler that does not train (``except
torch.cuda.OutOfMemoryError: torch.cuda.empty_cache()``: it runs when a step fails); and
anything after the loop.

A loop over a DataLoader that does not train is an *evaluation* loop, not a step loop, when it
shows it: it runs under ``torch.no_grad()``/``inference_mode()`` (a ``with`` or a decorator;
also after a statement that only moves the batch, ``batch = to_device(batch, device)``), a
module was switched to ``eval()`` before it in the same function, its function is named for
evaluation (``validate``, ``test_epoch``, ``predict``...), or its loader is (``val_loader``;
also the loader a loop of another kind draws from, ``next(iter(valid_dataloader))``),
or nothing in it could train: every call is torch's, NumPy's or a builtin, a tensor's or a
list's method, or a model's forward (feature extraction before a classifier is trained on
the features). The analysis is static and flow-insensitive; where it cannot tell, it leaves
the code out, so rules built on it stay quiet rather than guess.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchpace.lint.imports import Resolver
from torchpace.lint.tree import children, subtree

if TYPE_CHECKING:
    from torchpace.lint.rule import FileContext

Function = ast.FunctionDef | ast.AsyncFunctionDef
Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef
Loop = ast.For | ast.AsyncFor | ast.While
# What runs once per training step: a step loop's body, or a step function a framework calls
Step = Loop | Function
LOOPS = (ast.For, ast.AsyncFor, ast.While)
# Definitions whose bodies run in a scope of their own, not where they are written.
NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

DATALOADER = "torch.utils.data.DataLoader"
# DataLoader subclasses of graph libraries that hand num_workers, pin_memory and
# persistent_workers to torch's (PyG's mini-batches of graphs and its samplers of subgraphs,
# DGL's): read as torch's own loader.
# PyG's samplers of subgraphs, in 2.x (``loader``) and before (``data``): they take a graph
# first, and their other positional parameters are their own, so only keywords are read there.
SUBGRAPH_LOADERS = frozenset(
    f"torch_geometric.{where}.{name}"
    for where in ("loader", "data")
    for name in (
        "NeighborLoader",
        "NeighborSampler",
        "LinkNeighborLoader",
        "HGTLoader",
        "ClusterLoader",
        "GraphSAINTSampler",
        "GraphSAINTNodeSampler",
        "GraphSAINTEdgeSampler",
        "GraphSAINTRandomWalkSampler",
        "ShaDowKHopSampler",
        "RandomNodeLoader",
        "RandomNodeSampler",
    )
)
DATALOADERS = frozenset(
    {
        DATALOADER,
        "torch_geometric.loader.DataLoader",
        "torch_geometric.loader.dataloader.DataLoader",
        "torch_geometric.data.DataLoader",  # before PyG 2.0
        "torch_geometric.loader.DataListLoader",
        "torch_geometric.loader.DenseDataLoader",
        "dgl.dataloading.GraphDataLoader",
        *SUBGRAPH_LOADERS,
        # Library functions and classes that build a torch DataLoader from the keywords they
        # are given: PyTorch-Ignite's ``idist.auto_dataloader`` (which pins on CUDA itself:
        # :data:`PINS_ON_CUDA`) and webdataset's ``WebLoader``.
        "ignite.distributed.auto_dataloader",
        "ignite.distributed.auto.auto_dataloader",
        "webdataset.WebLoader",
        # torchdata's resumable subclass of the torch DataLoader, same arguments (torchtune's
        # recipes build every loader with it).
        "torchdata.stateful_dataloader.StatefulDataLoader",
        "torchdata.stateful_dataloader.stateful_dataloader.StatefulDataLoader",
    }
)
# Loaders that set ``pin_memory`` themselves when the run is on CUDA and it is not given.
PINS_ON_CUDA = frozenset(
    {"ignite.distributed.auto_dataloader", "ignite.distributed.auto.auto_dataloader"}
)


def may_build_loader(source: bytes) -> bool:
    """Whether a file's text names a loader class of :data:`DATALOADERS` (a fast test before
    any tree is walked: most files build no loader)."""
    return b"Loader" in source or b"torch_geometric" in source or b"auto_dataloader" in source


# A function named for one training step (``train_step``, ``training_step``, ``step``), not for
# an epoch (``train_one_epoch``): given the optimizer, a call of it is a step.
_STEP_FUNCTION = re.compile(r"(^|_)step$", re.IGNORECASE)
# Names that say "optimizer" in the usual spellings: opt, optim, optimizer, g_optim, optimizer_d.
# Calls given the optimizer that read it rather than step it: ``get_lr(optimizer)``,
# ``log_lr(optimizer)``, ``current_learning_rate(opt)`` (open_clip's ``get_learning_rate``, called
# under a logging cadence whose body then looked like training).
_READS_OPTIMIZER = re.compile(
    r"^(get|read|log|print|show|report|current)(_|$)|(^|_)(lrs?|learning_rates?)$", re.I
)
# Builtins that look at an object and step nothing: an optimizer handed to them is read.
_INSPECTING_BUILTINS = frozenset(
    {"hasattr", "getattr", "isinstance", "type", "id", "len", "print", "repr", "str", "vars"}
)
_OPTIMIZER_NAME = re.compile(r"^(opt|optim\w*|\w*_opt|\w*_optim\w*|\w*optimi[sz]er\w*)$", re.I)


def is_optimizer_class(qualname: str | None) -> bool:
    """``torch.optim.AdamW`` and the like; not ``torch.optim.lr_scheduler``'s classes."""
    return (qualname or "").startswith("torch.optim.") and "lr_scheduler" not in (qualname or "")


def names_optimizer(name: str | None) -> bool:
    """``optimizer``, ``self.opt``, ``g_optim``: a name or attribute that says "optimizer"."""
    return name is not None and bool(_OPTIMIZER_NAME.match(name.rsplit(".", 1)[-1]))


# Names that say "data loader": loader, train_loader, dataloader, val_dl.
_LOADER_NAME = re.compile(r"(loader|^dl$|_dl$|^dl_)", re.I)
# Names of evaluation: validate, evaluate, eval_epoch, test, test_step, predict, inference, sample;
# not a name that starts by training, whatever follows (``train_val_pipeline``, ``train_and_test``:
# benchmarking-gnns' whole run, which hands its loaders to the training epoch).
EVAL_NAME = re.compile(
    r"^(?!_*train)(?:.*?)(^|_)(eval\w*|valid\w*|val|test\w*|predict\w*|infer\w*|sample|samples"
    r"|sampling|generate|generation|visuali[sz]\w*)($|_)",
    re.I,
)
# What a loop over batches may call and still train nothing (LoopFacts._only_forwards): the
# functions of these libraries (but the few that train), Python's builtins that read or build
# values, the methods of tensors and lists that move, convert, shape or collect, and the models
# of torch.nn and of model libraries, run forward.
_INERT_LIBRARIES = ("torch.", "numpy.", "math.", "time.", "os.", "json.", "shutil.", "pickle.")
_TRAINING_CALLS = frozenset({"torch.autograd.backward", "torch.autograd.grad"})
_INERT_BUILTINS = frozenset(
    {
        *("print", "len", "range", "enumerate", "zip", "list", "tuple", "dict", "set", "sorted"),
        *("int", "float", "str", "bool", "isinstance", "min", "max", "sum", "abs", "round"),
    }
)
_INERT_METHODS = frozenset(
    {
        *("to", "cuda", "cpu", "numpy", "detach", "item", "tolist", "float", "double", "half"),
        *("long", "int", "bool", "view", "reshape", "permute", "squeeze", "unsqueeze", "flatten"),
        *("size", "contiguous", "clone", "type", "argmax", "softmax", "sigmoid", "eq", "append"),
        *("extend", "items", "keys", "values", "numel", "dim", "format"),
        # tensor math that makes a new tensor and trains nothing (FID statistics: images
        # repeated to three channels, features summed)
        *("sum", "mean", "max", "min", "repeat", "expand", "transpose", "abs", "pow", "sqrt"),
    }
)
FUNCTION_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
# ``nn.Parameter``, as a qualified name resolves it.
PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def constructor(cls: ast.ClassDef) -> ast.FunctionDef | None:
    """The ``__init__`` a class's body defines, if any."""
    return next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
    )


_MODEL_LIBRARIES = ("torch.nn.", "torchvision.models.", "timm.create_model", "timm.models.")
# A module loaded whole, ready-made (a pickled feature extractor, a TorchScript file): calling it
# runs its forward, which trains nothing; training it would show as a backward in the file.
_DESERIALISED = frozenset({"pickle.load", "torch.load", "torch.jit.load", "dill.load"})
# Context managers and decorators that turn autograd off.
NO_GRAD = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.inference_mode",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.inference_mode",
    }
)
# Wrappers that iterate what they are given, one item per step: enumerate(loader), tqdm(loader).
ITER_WRAPPERS = frozenset({"enumerate", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "zip", "iter"})


def dotted(node: ast.AST) -> str | None:
    """``model`` or ``self.encoder`` for a name or attribute chain; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def walk(nodes: Iterable[ast.AST], *, into_loops: bool = True) -> Iterator[ast.AST]:
    """Every node under ``nodes`` that runs in their scope: nested defs and lambdas are skipped,
    and so are the bodies of nested loops unless ``into_loops``."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, NESTED_SCOPES):
            continue
        if not into_loops and isinstance(node, LOOPS):
            # A loop's header runs where the loop is; its body runs in the loop.
            stack.append(node.test if isinstance(node, ast.While) else node.iter)
            continue
        stack.extend(children(node))


def disables_grad(names: Resolver, expr: ast.expr) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)``."""
    target = expr.func if isinstance(expr, ast.Call) else expr
    qual = names.qualname(target)
    if qual in NO_GRAD:
        return True
    # A project's own wrapper of them: YOLOv5's ``@smart_inference_mode()``, ``@no_grad()``.
    last = (dotted(target) or "").rsplit(".", 1)[-1]
    if last.endswith(("inference_mode", "no_grad")) and qual not in {"torch.enable_grad"}:
        return True
    if qual == "torch.set_grad_enabled" and isinstance(expr, ast.Call):
        return bool(expr.args) and isinstance(expr.args[0], ast.Constant) and not expr.args[0].value
    return False


def is_cadence_gate(test: ast.expr, helpers: frozenset[str] = frozenset()) -> bool:
    """True for ``step % n == 0``-style tests: a comparison against a modulo, alone or in an
    ``and`` (``i % log_every == 0 and rank == 0``), or in an ``or`` whose other operands are
    rare: an equality (``step == last_step``) or a flag (``or args.debug``). ``helpers``: names
    of same-file functions that return such a test (``divisible_by(step, every)``,
    ``self.should_log_this_step()``), ``=name`` for a variable only ever assigned one
    (``log_now = step % every == 0``, then ``if log_now:``), and ``%name`` for a period that
    is 1 by default, so no cadence at all (``iter % self.gather_metric_period == 0`` with
    ``gather_metric_period=1`` in ``__init__``, detectron2)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(is_cadence_gate(v, helpers) for v in test.values)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return any(is_cadence_gate(v, helpers) for v in test.values) and all(
            is_cadence_gate(v, helpers) or _is_rare(v) for v in test.values
        )
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _is_modulo(test.operand, helpers)  # ``if not step % n:``
    if isinstance(test, ast.Compare):
        modulo = any(_is_modulo(side, helpers) for side in (test.left, *test.comparators))
        return modulo or _first_steps(test) or _last_batch(test) or _elapsed(test)
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name):
        return test.func.id in helpers
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute):
        owner = test.func.value
        return isinstance(owner, ast.Name) and owner.id == "self" and test.func.attr in helpers
    if isinstance(test, ast.Name):
        return f"={test.id}" in helpers
    return False


_BAD_VALUES = frozenset({"isnan", "isinf", "isposinf", "isneginf"})


def failure_check(test: ast.expr, negated: bool = False) -> bool:
    """A test that holds only when a value went bad: ``torch.isnan(x).any()``,
    ``not torch.isfinite(x).all()``, ``(~torch.isfinite(x)).any()``, ``math.isnan(v)``, or an
    ``or`` of them. Its body is error recovery (Time-Series-Library's Koopa replaces a failed
    least-squares solution), run on no ordinary step; the test itself runs on every one."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, (ast.Not, ast.Invert)):
        return failure_check(test.operand, not negated)
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.Or) is not negated:  # ``a or b``; ``not (a and b)``
            return all(failure_check(v, negated) for v in test.values)
        return any(failure_check(v, negated) for v in test.values)
    if not isinstance(test, ast.Call):
        return False
    func = test.func
    if isinstance(func, ast.Attribute) and func.attr in ("any", "all") and not test.args:
        return failure_check(func.value, negated)  # ``torch.isnan(x).any()``
    name = (dotted(func) or "").rsplit(".", 1)[-1]
    return name in _BAD_VALUES if not negated else name == "isfinite"


def _opt_in(test: ast.expr, flags: frozenset[str]) -> bool:
    """``args.verbose``, or an ``and`` holding it, where ``verbose`` is one of ``flags``; also a
    level above zero (``if opt.debug > 0:``, ``>= 1``, ``!= 0``: CenterNet's visualisation
    level)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_opt_in(v, flags) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, bound = test.ops[0], test.comparators[0]
        level = isinstance(bound, ast.Constant) and (
            (isinstance(op, (ast.Gt, ast.NotEq)) and bound.value == 0)
            or (isinstance(op, ast.GtE) and bound.value == 1)
        )
        return level and _opt_in(test.left, flags)
    if isinstance(test, ast.Subscript) and isinstance(test.slice, ast.Constant):
        return test.slice.value in flags  # ``config["enable_tensorboard"]`` of ``vars(args)``
    return isinstance(test, ast.Attribute) and test.attr in flags


def _elapsed(test: ast.Compare) -> bool:
    """``global_step - last_save >= args.save_steps`` (also ``>``, and ``step >= last + n``):
    enough steps, or seconds, since the last time, a cadence kept by hand (cloneofsimo's LoRA
    scripts save their embeddings so)."""
    if len(test.ops) != 1 or not isinstance(test.ops[0], (ast.GtE, ast.Gt)):
        return False
    left, right = test.left, test.comparators[0]
    if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Sub):
        return _a_last_time(left.right)
    if isinstance(right, ast.BinOp) and isinstance(right.op, ast.Add):
        return _a_last_time(right.left)
    return False


# The name of when it last happened: ``last_save``, ``self.last_log_time``, ``prev_step``. A
# start (``step - start_step >= warmup``) holds for good once reached: no cadence.
_LAST_TIME = re.compile(r"(^|_)(last|prev|previous)(_|$)", re.I)


def _a_last_time(node: ast.expr) -> bool:
    name = dotted(node)
    return name is not None and _LAST_TIME.search(name.rsplit(".", 1)[-1]) is not None


def _first_steps(test: ast.expr) -> bool:
    """``if ni < 3:``: a body run on the first few steps only (a literal bound)."""
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Lt, ast.LtE))
        and isinstance(test.comparators[0], ast.Constant)
        and type(test.comparators[0].value) is int
        and dotted(test.left) is not None
    )


def _last_batch(test: ast.expr) -> bool:
    """``if i == len(loader) - 1:`` or ``if step == 10:``: one step of the loop, not every one;
    also a step counted from where the run resumed (``if self.step - loaded_step == 1:``,
    torchtitan's timeouts set after the first step)."""
    left = test.left if isinstance(test, ast.Compare) else None
    if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Sub):
        left = left.left if dotted(left.right) is not None else None
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and left is not None
        and dotted(left) is not None
    ):
        return False
    right = test.comparators[0]
    if isinstance(right, ast.Constant):
        return type(right.value) is int
    return any(isinstance(n, ast.Call) and dotted(n.func) == "len" for n in subtree(right))


def _is_rare(test: ast.expr) -> bool:
    """An ``or`` operand beside a cadence that holds on few steps: ``step == last``, a flag."""
    if isinstance(test, ast.Compare):
        return all(isinstance(op, (ast.Eq, ast.Is)) for op in test.ops)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_is_rare(v) for v in test.values)  # ``epoch == last and i == n - 1``
    return dotted(test) is not None


def _ungated_part(test: ast.expr, helpers: frozenset[str]) -> list[ast.expr]:
    """The parts of a gated test that run on every step: ``and`` operands up to the cadence."""
    if not isinstance(test, ast.BoolOp):
        return [test]
    if isinstance(test.op, ast.Or):
        return [v for v in test.values if not is_cadence_gate(v, helpers)]  # run every step
    parts: list[ast.expr] = []
    for value in test.values:
        parts.append(value)
        if is_cadence_gate(value, helpers):
            break
    return parts


def returned(function: Function) -> list[ast.expr]:
    """The values ``function`` returns (``return x``), nested functions and lambdas excluded;
    found once per function (kept on the node: the rules ask for the same ones often)."""
    cached: list[ast.expr] | None = function.__dict__.get("_tp_returned")
    if cached is None:
        cached = function.__dict__["_tp_returned"] = [
            n.value for n in walk(function.body) if isinstance(n, ast.Return) and n.value
        ]
    return cached


def returned_loaders(function: Function, names: Resolver) -> list[ast.Call]:
    """The ``DataLoader(...)`` calls ``function`` returns (``return DataLoader(ds, ...)``)."""
    return [
        r
        for r in returned(function)
        if isinstance(r, ast.Call) and names.qualname(r.func) in DATALOADERS
    ]


def _is_modulo(node: ast.expr, helpers: frozenset[str] = frozenset()) -> bool:
    """``step % n``; not where ``helpers`` says ``n`` is 1 (``%name``: every step)."""
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mod)
        and f"%{dotted(node.right)}" not in helpers
    )


# The count of micro-batches whose gradients one optimizer step adds up.
ACCUMULATION = re.compile(
    r"(^|_)(grad(ient)?_?acc\w*|accum\w*|accumulat\w*|update_freq|iters_to_accumulate)($|_)",
    re.I,
)


def _every_optimizer_step(test: ast.expr) -> bool:
    """``step % args.gradient_accumulation_steps == 0``: the optimizer step's boundary, passed
    on every step of the optimizer (every step at all where the count is 1), not a logging
    cadence."""
    return any(
        isinstance(n, ast.BinOp)
        and isinstance(n.op, ast.Mod)
        and ACCUMULATION.search((dotted(n.right) or "").rsplit(".", 1)[-1]) is not None
        for n in ast.walk(test)
    )


def _scope_bindings(
    ctx: FileContext, scope: ast.AST
) -> tuple[dict[str, list[ast.expr]], dict[str, int]]:
    """The scope's own plain assignments by target text, in walk order, and how many times each
    name is stored to anywhere under the scope: read once per scope and file, as rules ask of
    many names in the same scope (a notebook's module scope is the whole notebook)."""
    index: dict[int, Any] = ctx.__dict__.setdefault("_tp_scope_bindings", {})
    found = index.get(id(scope))
    if found is None:
        assigned: dict[str, list[ast.expr]] = {}
        stores: dict[str, int] = {}
        for n in subtree(scope):
            if isinstance(n, ast.Assign):
                for target, value in assignments((n,)):
                    if ctx.enclosing_scope(value) is scope:
                        assigned.setdefault(target, []).append(value)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                stores[n.id] = stores.get(n.id, 0) + 1
        found = index[id(scope)] = (scope, assigned, stores)  # the scope kept: its id stays its
    return found[1], found[2]


def assigned_in(ctx: FileContext, name: str, scope: ast.AST) -> list[ast.expr]:
    """What the scope's own plain assignments bind ``name`` to (other bindings left out)."""
    return list(_scope_bindings(ctx, scope)[0].get(name, ()))


def binding_before(ctx: FileContext, name: ast.Name, at: ast.AST) -> ast.expr | None:
    """The value last assigned to ``name`` in its scope on a line before ``at``."""
    before = [
        v
        for v in assigned_in(ctx, name.id, ctx.enclosing_scope(at))
        if v.lineno < at.lineno  # type: ignore[attr-defined]
    ]
    return max(before, key=lambda v: (v.lineno, v.col_offset), default=None)


def _bound_names(ctx: FileContext, call: ast.Call) -> set[str]:
    """The names ``call``'s result is assigned to."""
    parent = ctx.parents.get(id(call))
    if isinstance(parent, ast.Assign):
        return {t.id for t in parent.targets if isinstance(t, ast.Name)}
    return set()


def method_calls(ctx: FileContext, obj: ast.Call, method: str) -> list[ast.Call]:
    """The calls of ``method`` on the object ``obj`` builds: on the call itself
    (``Trainer(...).fit(model)``), or on a name whose binding before the call is ``obj`` (a
    notebook that builds a second trainer under the same name calls that one)."""
    names = _bound_names(ctx, obj)
    return [
        call
        for call, _ in ctx.calls
        if isinstance(call.func, ast.Attribute)
        and call.func.attr == method
        and (
            call.func.value is obj
            or (
                isinstance(call.func.value, ast.Name)
                and call.func.value.id in names
                and binding_before(ctx, call.func.value, call) is obj
            )
        )
    ]


def scope_stores(ctx: FileContext, scope: ast.AST) -> Container[str]:
    """The names the scope's own code stores to (assigned, a loop's target, ``with ... as``)."""
    return _scope_bindings(ctx, scope)[1]


def bound_in(ctx: FileContext, name: str, scope: ast.AST) -> list[ast.expr] | None:
    """What the scope's own assignments bind ``name`` to, where they are all that binds it
    (not a loop target, an unpacking of a call, ``with ... as``); else None."""
    assigned, stores = _scope_bindings(ctx, scope)
    bound = list(assigned.get(name, ()))
    return bound if bound and len(bound) == stores.get(name, 0) else None


def assignments(nodes: Iterable[ast.AST]) -> Iterator[tuple[str, ast.expr]]:
    """(target text, value) for each plain assignment ``a = v`` / ``self.a = v``, and for each
    element of a tuple assigned a tuple of the same length."""
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                name = dotted(target)
                if name is not None:
                    yield name, node.value
                elif (  # ``q, q_target = QNet(), QNet()``: element by element
                    isinstance(target, ast.Tuple)
                    and isinstance(node.value, ast.Tuple)
                    and len(target.elts) == len(node.value.elts)
                    and not any(isinstance(e, ast.Starred) for e in target.elts)
                ):
                    for elt, value in zip(target.elts, node.value.elts, strict=True):
                        if (name := dotted(elt)) is not None:
                            yield name, value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            name = dotted(node.target)
            if name is not None:
                yield name, node.value


def strip_moves(value: ast.expr) -> ast.expr:
    """``Net().to(device).train()`` → ``Net()``: calls that return the module they are called on."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in {"to", "cuda", "cpu", "train", "eval", "float", "half", "bfloat16"}
    ):
        value = value.func.value
    return value


def moves_itself(value: ast.expr, name: str) -> bool:
    """``value`` moves what ``name`` holds to a device: ``x.to(device)``, ``x.cuda()``, or a
    helper named for it handed the name first (``move_to_device(batch, device)``,
    ``to_device(batch, device)``)."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda"):
        return root_name(func.value) == name
    callee = (dotted(func) or "").rsplit(".", 1)[-1].lower()
    return "device" in callee and any(root_name(a) == name for a in value.args[:1])


def root_name(node: ast.expr) -> str | None:
    """The name an expression reads its tensor from: ``batch`` for ``(~batch["mask"]).sum()``."""
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.UnaryOp):
            node = node.operand
        else:
            return node.id if isinstance(node, ast.Name) else None


def _rebinds_moved(stmt: ast.stmt) -> bool:
    """``batch = to_device(batch, device)``, ``x = x.to(device)``: a name bound again to itself
    on a device."""
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and moves_itself(stmt.value, stmt.targets[0].id)
    )


# Wrappers that run the module they are given: ``model = DDP(model, ...)`` keeps ``model`` an
# instance of the class it was, whose forward a call of it runs.
MODEL_WRAPPERS = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "apex.parallel.DistributedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
        # FSDP2 and tensor parallelism shard the module they are given and return it
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard.fully_shard",
        "torch.distributed.tensor.parallel.parallelize_module",
        "torch.compile",
    }
)


def wrapped(names: Resolver, value: ast.Call) -> ast.expr | None:
    """The model a wrapper that keeps its forward is given (``DDP(model, ...)``,
    ``parallelize_module(module=model, ...)``), moves stripped; None for any other call."""
    if names.qualname(value.func) not in MODEL_WRAPPERS:
        return None
    module = (k.value for k in value.keywords if k.arg == "module")
    given = value.args[0] if value.args else next(module, None)
    return None if given is None else strip_moves(given)


def rewraps(names: Resolver, target: str, value: ast.Call) -> bool:
    """``model = DDP(model, ...)``: ``target`` wrapped in a wrapper that keeps its forward;
    also in a project's own subclass of DataParallel, named for it (EfficientDet's
    ``model = CustomDataParallel(model, num_gpus)``)."""
    given = wrapped(names, value)
    if given is None and (dotted(value.func) or "").endswith("DataParallel") and value.args:
        given = strip_moves(value.args[0])
    return given is not None and dotted(given) == target


@dataclass
class LoopFacts:
    """What one file's loops are, computed once per file (see :func:`analyse`)."""

    names: Resolver
    functions: dict[str, list[Function]] = field(default_factory=dict)  # by name
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    instances: dict[str, str] = field(default_factory=dict)  # "model" → file class or torch path
    # "self.dp" → the classes of this file it is bound to, where branches bind it to several
    # (``self.dp = A(...) if sdp else B(...)``, or in an if/else)
    alternatives: dict[str, frozenset[str]] = field(default_factory=dict)
    # "log" → the nested functions a function of this file returned to it (``log = make_logger()``)
    made: dict[str, list[Function]] = field(default_factory=dict)
    loaders: set[str] = field(default_factory=set)  # names bound to a DataLoader
    loader_calls: dict[str, list[ast.Call]] = field(default_factory=dict)  # name → DataLoader()
    # name → the wrapper of a loader it is bound to (``pbar = tqdm(enumerate(loader))``)
    loader_wrappers: dict[str, list[ast.Call]] = field(default_factory=dict)
    optimizers: set[str] = field(default_factory=set)  # names bound to a torch.optim optimizer
    scope_of: dict[int, Scope] = field(default_factory=dict)  # id(loop or function) → scope
    step_loops: list[Loop] = field(default_factory=list)
    # a script with no sign of training anywhere (:func:`_inference_script`): no step loops
    inference_only: bool = False
    # functions a framework's engine runs once per batch (Ignite's ``Engine(train_step)``)
    step_functions: list[Function] = field(default_factory=list)
    epoch_loops: list[Loop] = field(default_factory=list)
    hot: dict[int, tuple[ast.AST, Scope]] = field(default_factory=dict)  # id(node) → node, scope
    # id(function) → the hot calls of this file that run it (entries and loops have none)
    callers: dict[int, tuple[Function, list[ast.Call]]] = field(default_factory=dict)
    # id(if) → the one branch of it the hot calls take ("body" or "orelse"): see _decided
    decided: dict[int, str] = field(default_factory=dict)
    _subclasses: dict[str, list[str]] = field(default_factory=dict)  # class → it and subclasses
    tensor_cache: dict[int, Any] = field(default_factory=dict)  # id(scope) → TensorFacts
    # id(node) → the node that contains it: the file's map (FileContext.parents), handed over
    # when the first TensorFacts is made, so their readings of blocks need not build their own
    parents: dict[int, ast.AST] = field(default_factory=dict)
    _steps: dict[int, bool] = field(default_factory=dict)  # id(function) → has a step
    _loops_in: dict[int, bool] = field(default_factory=dict)  # id(function) → has a step loop
    _trains: dict[int, bool] = field(default_factory=dict)  # id(function) → trains
    repeated: set[int] = field(default_factory=set)  # id(loop) of loops run more than once
    no_grad: set[int] = field(default_factory=set)  # id(node) of code run with autograd off
    cadence_helpers: frozenset[str] = frozenset()  # functions returning ``step % n == 0``
    off_flags: frozenset[str] = frozenset()  # options for diagnostics, off by default
    eval_loops: list[Loop] = field(default_factory=list)
    by_type: dict[type, list[Any]] = field(default_factory=dict)  # the file's nodes by class

    # Resolution of calls to code of this file.

    def callees(self, call: ast.Call, scope: Scope) -> list[Function]:
        """The functions of this file that ``call`` runs: ``f()``, ``self.m()``, ``model(x)``,
        ``log(loss)`` where ``log = make_logger()`` returns a function nested in the factory."""
        func = call.func
        if isinstance(func, ast.Name) and func.id in self.functions:
            return self.functions[func.id]
        if isinstance(func, ast.Name) and func.id in self.made:
            return self.made[func.id]  # ``log = make_logger()``: the function it returns
        target = dotted(func)
        if target is None:
            return []
        owner = self.instances.get(target)
        if owner in self.classes:  # calling a module instance runs its forward
            return self._methods(owner, "forward")
        if target in self.alternatives:  # one of several classes: each forward may run
            return [
                f
                for cls in sorted(self.alternatives[target])
                for f in self._methods(cls, "forward")
            ]
        if isinstance(func, ast.Attribute):
            base = dotted(func.value)
            if base in {"self", "cls"}:  # the class's method, or a subclass's override of it
                return [
                    f
                    for c in self._with_subclasses(self._class_of(scope))
                    for f in self._methods(c, func.attr)
                ]
            if base in self.classes:  # ``SimpleTrainer.write_metrics(...)``: a static method
                return self._methods(base, func.attr)
            owner = self.instances.get(base or "")
            if owner in self.classes:
                return self._methods(owner, func.attr)
        return []

    def callees_of_property(self, name: str, scope: Scope) -> list[Function]:
        """The getter ``self.<name>`` runs, where the class of ``scope`` (or a subclass of it)
        defines ``name`` as a ``@property``."""
        if not self.classes:
            return []
        return [
            f
            for c in self._with_subclasses(self._class_of(scope))
            for f in self._methods(c, name)
            if any(dotted(d) == "property" for d in f.decorator_list)
        ]

    def _methods(self, cls: str | None, name: str) -> list[Function]:
        if cls is None or cls not in self.classes:
            return []
        return [
            n
            for n in self.classes[cls].body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
        ]

    def _with_subclasses(self, cls: str | None) -> list[str]:
        """``cls`` and the classes of this file derived from it, at any depth (a trainer base
        whose ``train()`` loop calls ``self.run_step()``, defined by ``SimpleTrainer``)."""
        if cls is None:
            return []
        if cls in self._subclasses:
            return self._subclasses[cls]
        out = self._subclasses[cls] = [cls]
        for name in out:
            out += [
                c.name
                for c in self.classes.values()
                if c.name not in out and any(dotted(b) == name for b in c.bases)
            ]
        return out

    def _class_of(self, scope: Scope) -> str | None:
        for name, cls in self.classes.items():
            if any(n is scope for n in cls.body):
                return name
        return None

    # Training signals.

    def is_backward(self, call: ast.Call) -> bool:
        if isinstance(call.func, ast.Attribute) and call.func.attr == "backward":
            return True
        return self.names.qualname(call.func) == "torch.autograd.backward"

    def is_optimizer_step(self, call: ast.Call) -> bool:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "step"):
            return False
        owner = dotted(func.value)
        if owner is None:
            return False
        if owner in self.optimizers or names_optimizer(owner):
            return True
        # scaler.step(optimizer): a GradScaler steps the optimizer it is given.
        return bool(call.args) and self.instances.get(owner, "").endswith("GradScaler")

    def is_loader(self, node: ast.expr) -> bool:
        """``loader``, ``enumerate(loader)``, ``tqdm(train_loader)``, ``DataLoader(ds)``, and a
        method given a loader first (MAE's ``metric_logger.log_every(data_loader, ...)``)."""
        if isinstance(node, ast.Call):
            name = self.names.qualname(node.func) or dotted(node.func)
            if name in DATALOADERS:
                return True
            if name in ITER_WRAPPERS:
                return any(self.is_loader(a) for a in node.args)
            if isinstance(node.func, ast.Attribute) and node.args:
                first = node.args[0]
                return isinstance(first, (ast.Name, ast.Attribute)) and self.is_loader(first)
            return False
        text = dotted(node)
        if text is None:
            return False
        return (
            text in self.loaders
            or text in self.loader_wrappers
            or bool(_LOADER_NAME.search(text.rsplit(".", 1)[-1]))
        )

    def _is_next_batch(self, call: ast.Call) -> bool:
        """``next(it)`` where ``it = iter(loader)``, or ``next(iter(loader))``."""
        if not (isinstance(call.func, ast.Name) and call.func.id == "next" and call.args):
            return False
        return self.is_loader(call.args[0]) or (
            dotted(call.args[0]) in self.loaders  # it = iter(loader) was recorded as a loader
        )

    def is_step(self, node: ast.AST, scope: Scope) -> bool:
        """True when ``node`` is a call that does a training step's work."""
        if not isinstance(node, ast.Call):
            return False
        if self.is_backward(node) or self.is_optimizer_step(node) or self._is_next_batch(node):
            return True
        name = node.func.attr if isinstance(node.func, ast.Attribute) else dotted(node.func)
        if self.hands_optimizer(node) and _STEP_FUNCTION.search(name or ""):
            # ``kge_model.train_step(kge_model, optimizer, train_iterator, args)`` (ogb's KGE
            # scripts): a function of another file, named for a step, given the optimizer
            return True
        return any(self.function_steps(f) for f in self.callees(node, scope))

    def function_steps(self, function: Function) -> bool:
        """Whether calling ``function`` does a step (outside any loop of its own)."""
        key = id(function)
        if key not in self._steps:
            self._steps[key] = False  # recursion guard
            self._steps[key] = any(
                self.is_step(n, function) for n in walk(function.body, into_loops=False)
            ) and not self._discards_gradients(function)
        return self._steps[key]

    def function_has_step_loop(self, function: Function) -> bool:
        key = id(function)
        if key not in self._loops_in:
            self._loops_in[key] = False
            self._loops_in[key] = any(
                self.is_step_loop(n, function) or self._calls_step_loop(n, function)
                for n in walk(function.body)
                if isinstance(n, (*LOOPS, ast.Call))
            )
        return self._loops_in[key]

    def training_loops(self) -> list[Step]:
        """The step loops that train: they call ``backward()`` or step an optimizer; and the
        step functions a framework runs once per batch (:func:`_engine_steps`), each its own
        scope."""
        loops = [
            loop for loop in self.step_loops if self.trains(loop.body, self.scope_of[id(loop)])
        ]
        return [*loops, *self.step_functions]

    def trains(self, nodes: Iterable[ast.AST], scope: Scope) -> bool:
        """Whether running ``nodes`` calls ``backward()`` or an optimizer step, here or in a
        same-file function they call (nested loops included)."""
        for node in walk(nodes):
            if not isinstance(node, ast.Call):
                continue
            if self.is_backward(node) or self.is_optimizer_step(node) or self.hands_optimizer(node):
                return True
            if any(self.function_trains(f) for f in self.callees(node, scope)):
                return True
        return False

    def hands_optimizer(self, call: ast.Call) -> bool:
        """A call given the optimizer: ``loss_scaler(loss, optimizer, ...)`` (MAE, Swin) steps it
        in another file, as ``scaler.step(optimizer)`` would here."""
        name_of = dotted(call.func) or ""
        if "save" in name_of or "checkpoint" in name_of:
            return False  # ``save_checkpoint(model, optimizer)`` keeps it, does not step it
        if _READS_OPTIMIZER.search(name_of.rsplit(".", 1)[-1]):
            return False  # ``get_learning_rate(optimizer)`` for a log line reads it
        if name_of in _INSPECTING_BUILTINS:
            return False  # ``hasattr(optimizer, "get_ema")`` asks about it (EDM2's snapshot)
        for arg in call.args:  # positional: ``loss_scaler(loss, optimizer)``
            name = dotted(arg)
            if name is not None and (name in self.optimizers or names_optimizer(name)):
                return True
        return False

    def function_trains(self, function: Function) -> bool:
        key = id(function)
        if key not in self._trains:
            self._trains[key] = False  # recursion guard
            self._trains[key] = self.trains(function.body, function) and not (
                self._discards_gradients(function)
            )
        return self._trains[key]

    def _discards_gradients(self, function: Function) -> bool:
        """``function`` runs ``backward()``, reads ``.grad``, then ``zero_grad()``, and steps
        nothing (no ``.step()`` at all): the gradients are read and thrown away (a notebook's
        ``visualize_gradients(net)``, plotting each weight's gradient for one batch), not a
        training step. A helper whose backward its caller steps never zeroes what it computed."""
        body = list(walk(function.body))
        backwards = [n.lineno for n in body if isinstance(n, ast.Call) and self.is_backward(n)]
        if not backwards:
            return False
        zeroed = any(
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "zero_grad"
            and n.lineno > min(backwards)
            for n in body
        )
        reads = any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in body)
        return (
            zeroed
            and reads
            and not any(
                isinstance(n, ast.Call)
                and (
                    # any ``.step()``: an optimizer kept in a dict (``self.optimizer["g"]``)
                    (isinstance(n.func, ast.Attribute) and n.func.attr == "step")
                    or self.is_optimizer_step(n)
                    or self.hands_optimizer(n)
                )
                for n in body
            )
        )

    def _calls_step_loop(self, node: ast.AST, scope: Scope) -> bool:
        return isinstance(node, ast.Call) and any(
            self.function_has_step_loop(f) for f in self.callees(node, scope)
        )

    def is_step_loop(self, loop: ast.AST, scope: Scope) -> bool:
        if not isinstance(loop, LOOPS):
            return False
        if isinstance(loop, (ast.For, ast.AsyncFor)) and self.is_loader(loop.iter):
            return not self.evaluates(loop, scope)
        header: list[ast.AST] = [loop.test] if isinstance(loop, ast.While) else []
        return any(
            self.is_step(n, scope) for n in walk([*header, *loop.body], into_loops=False)
        ) and not self.evaluates(loop, scope)

    def evaluates(self, loop: Loop, scope: Scope) -> bool:
        """A loop that reads batches without training and shows it evaluates (module doc)."""
        if self.trains(loop.body, scope):
            return False
        if id(loop) in self.no_grad or all(self._without_grad(n) for n in loop.body):
            return True
        if any(self._without_grad(n) for n in loop.body) and all(
            self._without_grad(n) or _rebinds_moved(n) or self._inert_statement(n)
            for n in loop.body
        ):
            # the batch moved, then everything under ``torch.no_grad()``, and what is left
            # only saves or prints what it computed (MAR's ``cache_latents``: ``np.savez``)
            return True
        if not isinstance(scope, ast.Module) and EVAL_NAME.search(scope.name):
            return True
        if not isinstance(scope, ast.Module) and self._only_run_without_grad(scope):
            return True
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            if _named_for_evaluation(loop.iter):
                return True
            if self._only_forwards(loop) or _peeks(loop):
                return True
        drawn = [
            n.args[0]
            for n in walk(loop.body, into_loops=False)
            if isinstance(n, ast.Call) and self._is_next_batch(n)
        ]
        over_loader = isinstance(loop, (ast.For, ast.AsyncFor)) and self.is_loader(loop.iter)
        if drawn and not over_loader and all(_named_for_evaluation(d) for d in drawn):
            return True  # ``b = next(iter(valid_dataloader))``: examples drawn from a held-out set
        return bool(in_eval_mode(scope, loop.lineno)) or _sets_eval_mode(loop)

    def _inert_statement(self, stmt: ast.stmt) -> bool:
        """Every call of ``stmt`` is inert (:meth:`_inert_call`: torch's, NumPy's, the file
        system's, a builtin, a tensor's method), and it calls something."""
        calls = [n for n in walk([stmt]) if isinstance(n, ast.Call)]
        return bool(calls) and all(self._inert_call(c) for c in calls)

    def _only_forwards(self, loop: Loop) -> bool:
        """A loop over batches in which nothing could train, that runs a model forward or moves
        nothing to a device: every other call in it is torch's, NumPy's or a builtin, or a
        tensor's or a list's method; the models are of ``torch.nn`` or a model library, loaded
        whole (a pickled detector, EDM's FID script), or classes of this file that train
        nothing. Feature extraction (``for x, y in loader: feats.extend(model.features(
        x.to(device)).cpu().numpy())``) reads batches and trains nothing. A call this file
        cannot see into (``train_step(model, batch)``, ``trainer.fit_batch(batch)``) keeps the
        loop a step loop, and so does a loop that hands its batches on (``yield``) or calls
        nothing."""
        nodes = list(walk(loop.body))
        calls = [n for n in nodes if isinstance(n, ast.Call)]
        if not calls or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in nodes):
            return False
        forwards = [c for c in calls if self._forward_call(c)]
        helpers = [c for c in calls if c not in forwards and self._inert_function(c)]
        if not all(c in forwards or c in helpers or self._inert_call(c) for c in calls):
            return False
        forwards += [c for c in helpers if self._inert_function(c, forwards=True)]
        # Without a model, a loop that moves nothing either: it reads the loader's batches on
        # the host (a plotting helper, the dataset's mean and std).
        return bool(forwards) or not any(
            isinstance(c.func, ast.Attribute) and c.func.attr in {"to", "cuda"} for c in calls
        )

    def _inert_function(self, call: ast.Call, depth: int = 1, *, forwards: bool = False) -> bool:
        """``call`` runs a module-level function of this file (one of the name) in which
        nothing could train: it trains nothing, yields nothing, and every call in it runs a
        model forward, is inert, or runs such a function (``depth`` calls deeper) — an
        inference script's ``run_model(img, model)`` and ``save(seg, path)``. ``forwards``:
        also runs a model forward, itself or in such a function."""
        func = call.func
        found = self.functions.get(func.id, []) if isinstance(func, ast.Name) else []
        if len(found) != 1 or self._class_of(found[0]) is not None:
            return False
        function = found[0]
        if self.function_trains(function):
            return False
        nodes = list(walk(function.body))
        if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in nodes):
            return False
        calls = [n for n in nodes if isinstance(n, ast.Call)]
        inner = [c for c in calls if depth > 0 and self._inert_function(c, depth - 1)]
        if not all(self._forward_call(c) or self._inert_call(c) or c in inner for c in calls):
            return False
        return not forwards or any(
            self._forward_call(c) or self._inert_function(c, depth - 1, forwards=True)
            for c in calls
            if depth > 0 or self._forward_call(c)
        )

    def _inert_call(self, call: ast.Call) -> bool:
        func = call.func
        qual = self.names.qualname(func) or ""
        if qual.startswith(_INERT_LIBRARIES) and qual not in _TRAINING_CALLS:
            return True
        if qual and not call.args and not call.keywords and self.names.import_path(func):
            return True  # an imported module's function handed nothing (``misc.is_main()``)
        if isinstance(func, ast.Name):
            return func.id in _INERT_BUILTINS and func.id not in self.functions
        return isinstance(func, ast.Attribute) and func.attr in _INERT_METHODS

    def _forward_call(self, call: ast.Call) -> bool:
        """``model(x)``, ``model.features(x)``, ``self.encoder(x)``, ``model.forward(x)`` on a
        model of :meth:`_runs_forward`."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value
        root = dotted(func)
        while root:
            if self._runs_forward(root):
                return True
            root = root.rpartition(".")[0]
        return False

    def _runs_forward(self, name: str) -> bool:
        """``name`` is a model whose forward trains nothing: built by ``torch.nn``, by a model
        library, loaded whole (``pickle.load``, ``torch.load``, ``torch.jit.load``), or from a
        class of this file whose methods train nothing."""
        owner = self.instances.get(name, "")
        if owner.startswith(_MODEL_LIBRARIES) or owner in _DESERIALISED:
            return True
        if owner in self.classes:
            cls = self.classes[owner]
            methods = [m for m in cls.body if isinstance(m, FUNCTION_DEFS)]
            derives = bool(cls.bases) and all(
                (self.names.qualname(b) or "").startswith("torch.nn.") for b in cls.bases
            )
            return derives and bool(methods) and not any(self.function_trains(m) for m in methods)
        return False

    def _only_run_without_grad(self, function: Function) -> bool:
        """A module-level function this file only calls with autograd off, and names nowhere
        else (rasbt's ``calc_loss_loader``, called by ``evaluate_model`` under
        ``torch.no_grad()``): what its loops read is an evaluation's."""
        name = function.name
        if self.functions.get(name) != [function] or self._class_of(function) is not None:
            return False
        calls = [
            c
            for c in self.by_type.get(ast.Call, ())
            if isinstance(c.func, ast.Name) and c.func.id == name
        ]
        uses = sum(
            1
            for n in self.by_type.get(ast.Name, ())
            if n.id == name and isinstance(n.ctx, ast.Load)
        )
        return bool(calls) and len(calls) == uses and all(id(c) in self.no_grad for c in calls)

    def _without_grad(self, stmt: ast.stmt) -> bool:
        return id(stmt) in self.no_grad or (
            isinstance(stmt, (ast.With, ast.AsyncWith))
            and any(disables_grad(self.names, i.context_expr) for i in stmt.items)
        )


def _sets_eval_mode(loop: Loop) -> bool:
    """A statement of the loop's own body puts a module in eval mode (``model.eval()``) and
    none puts one back in training mode: each pass runs the model for inference (PyTorch
    Step-by-Step's ``preprocessed_dataset``, features extracted once before training)."""
    modes = [
        stmt.value
        for stmt in loop.body
        if isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and stmt.value.func.attr in {"eval", "train"}
    ]
    return _all_eval(modes)


def _all_eval(modes: list[ast.Call]) -> bool:
    """There are mode switches, and each puts its module in eval mode: ``.eval()`` or
    ``.train(False)``."""
    return bool(modes) and all(
        m.func.attr == "eval"  # type: ignore[attr-defined]
        or (len(m.args) == 1 and _is_false(m.args[0]))
        for m in modes
    )


def in_eval_mode(scope: Scope, before: int) -> set[str]:
    """Modules switched to eval mode in ``scope`` before line ``before`` (and not back): by
    ``model.eval()``, at the end of a chain (``model.to(device).eval()``), or in the value a
    name is bound to (``model = Net().to(device).eval()``)."""
    mode: dict[str, tuple[int, str]] = {}
    bound: dict[int, str] | None = None  # a mode call's id -> the name its value is bound to
    for node in walk(scope.body):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"eval", "train"}
            and node.lineno < before
            and not (node.func.attr == "train" and node.args and _is_false(node.args[0]))
        ):
            target = dotted(strip_moves(node.func.value))
            if target is None:
                if bound is None:
                    bound = _bound_calls(scope)
                target = bound.get(id(node))
            if target is not None and node.lineno >= mode.get(target, (0, ""))[0]:
                mode[target] = (node.lineno, node.func.attr)
    return {t for t, (_, m) in mode.items() if m == "eval"}


def _bound_calls(scope: Scope) -> dict[int, str]:
    """``id`` of each call whose value a plain assignment in ``scope`` binds, to its target."""
    return {id(v): t for t, v in assignments(walk(scope.body)) if isinstance(v, ast.Call)}


def _is_false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


# Methods a framework calls on every training step: Lightning's ``training_step``.
_STEP_METHODS = {"LightningModule": "training_step"}


# Methods a Transformers ``Trainer`` calls on every micro-step, overridden by its subclasses
# (TRL's trainers, a user's custom loss): ``training_step(self, model, inputs, ...)`` and the
# ``compute_loss(self, model, inputs, ...)`` it calls.
_TRAINER_STEP_METHODS = frozenset({"training_step", "compute_loss"})


def _defines_step_methods(by_type: dict[type, list[Any]]) -> bool:
    names = {*_STEP_METHODS.values(), *_TRAINER_STEP_METHODS}
    return any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in names
        for n in by_type.get(ast.FunctionDef, ())
    )


# Engines that run the function they are given once per batch: PyTorch-Ignite's
# ``trainer = Engine(train_step)``, then ``trainer.run(loader, max_epochs=n)``.
STEP_ENGINES = frozenset(
    {
        "ignite.engine.Engine",
        "ignite.engine.engine.Engine",
        "ignite.engine.DeterministicEngine",
        "ignite.engine.deterministic.DeterministicEngine",
    }
)
# What builds an engine that trains, whose ``run(loader, max_epochs=n)`` iterates the loader
# once per epoch: the engines above, and Ignite's ready-made supervised trainer.
TRAINING_ENGINES = STEP_ENGINES | {
    "ignite.engine.create_supervised_trainer",
    "ignite.engine.create_supervised.create_supervised_trainer",
}


def _framework_steps(facts: LoopFacts) -> list[Function]:
    """The step methods of the file's Lightning modules, and the ``training_step`` and
    ``compute_loss`` overrides of the file's Transformers trainers (methods of a class with a
    base, given ``model`` and ``inputs`` as ``Trainer``'s are): no loop of this file calls them,
    the trainer does, once per batch or micro-batch."""
    out: list[Function] = []
    for cls in facts.classes.values():
        for base in cls.bases:
            method = _STEP_METHODS.get((dotted(base) or "").rsplit(".", 1)[-1])
            if method is not None:
                out += facts._methods(cls.name, method)
        if not cls.bases:
            continue
        for node in cls.body:
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name in _TRAINER_STEP_METHODS
                and {"model", "inputs"} <= {a.arg for a in node.args.args}
                and node not in out
            ):
                out.append(node)
    return out


def _engine_steps(facts: LoopFacts, calls: Iterable[ast.Call]) -> list[Function]:
    """The functions of this file handed to an Ignite engine (``Engine(train_step)``: its
    ``run`` calls it once per batch) that train: each is a training step of its own, with no
    loop of this file around it."""
    from torchpace.lint.rule import argument  # rule.py imports this module

    out: list[Function] = []
    if not any(path.split(".")[0] == "ignite" for path in facts.names.bindings.values()):
        return out  # most files: nothing of Ignite's imported
    for call in calls:
        if facts.names.qualname(call.func) not in STEP_ENGINES:
            continue
        given = argument(call, "process_function", 0)
        if isinstance(given, ast.Name):
            out += [f for f in facts.functions.get(given.id, []) if facts.function_trains(f)]
    return out


def _ends_run(body: list[ast.stmt]) -> bool:
    """The block ends the run: its last statement raises or exits."""
    last = body[-1] if body else None
    if isinstance(last, ast.Raise):
        return True
    call = last.value if isinstance(last, ast.Expr) else None
    name = dotted(call.func) if isinstance(call, ast.Call) else None
    return name in {"sys.exit", "exit", "quit", "os._exit"}


def _cadence_helpers(facts: LoopFacts, by_type: dict[type, list[Any]]) -> frozenset[str]:
    """Same-file functions whose every ``return`` is a cadence test, or ``False`` beside one
    (``divisible_by(n, d)``; OLMo's ``should_log_optim_metrics_this_step``: ``return False``
    without W&B, else ``return self.global_step % interval == 0``); then, as ``=name``, the
    variables assigned only such tests (:func:`is_cadence_gate`)."""

    def gates(function: Function) -> bool:
        values = returned(function)
        tests = [v for v in values if not (isinstance(v, ast.Constant) and v.value is False)]
        return bool(tests) and all(
            is_cadence_gate(v) or (isinstance(v, ast.Name) and _narrowed_gate(function, v.id))
            for v in tests
        )

    if not any(isinstance(n.op, ast.Mod) for n in by_type.get(ast.BinOp, ())) and not any(
        is_cadence_gate(n) for n in by_type.get(ast.Compare, ())
    ):
        return _unit_periods(facts, by_type)  # no ``% n`` nor first-steps test: nothing gates
    helpers = frozenset(
        name for name, functions in facts.functions.items() if all(gates(f) for f in functions)
    )
    values: dict[str, list[ast.expr]] = {}
    for node in [*by_type.get(ast.Assign, ()), *by_type.get(ast.AugAssign, ())]:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                values.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            values.setdefault(node.target.id, []).append(ast.Constant(None))  # not a plain gate
    helpers |= _unit_periods(facts, by_type)
    flags = {
        f"={name}"
        for name, assigned in values.items()
        if all(is_cadence_gate(v, helpers) for v in assigned)
    }
    return helpers | flags


def _narrowed_gate(function: Function, name: str) -> bool:
    """``name`` is, in ``function``, assigned a cadence test and otherwise only narrowed by it
    (Meta Lingua's ``every_n_steps``: ``test = step % freq == 0``, then ``test = test and
    (acc_step == k)``, ``return test``)."""
    assigned: list[ast.expr] = []
    for node in walk(function.body):
        if isinstance(node, ast.AugAssign) and dotted(node.target) == name:
            return False
        if isinstance(node, ast.Assign) and any(dotted(t) == name for t in node.targets):
            if len(node.targets) != 1:
                return False
            assigned.append(node.value)
    narrowed = [
        v
        for v in assigned
        if isinstance(v, ast.BoolOp)
        and isinstance(v.op, ast.And)
        and any(isinstance(x, ast.Name) and x.id == name for x in v.values)
    ]
    gates = [v for v in assigned if v not in narrowed]
    return bool(gates) and all(is_cadence_gate(v) for v in gates)


def _unit_periods(facts: LoopFacts, by_type: dict[type, list[Any]]) -> frozenset[str]:
    """``%self.x`` for each attribute set once in the file, in an ``__init__``, from a parameter
    whose default is 1; ``%X`` for a module constant ``X = 1`` (not where a config may rewrite
    it: :func:`rewrites_globals`): a ``% x`` cadence that, as the code stands, fires on every
    step."""
    values: dict[str, list[ast.expr]] = {}
    for node in by_type.get(ast.Assign, ()):
        for target in node.targets:
            name = dotted(target)
            if name is not None:
                values.setdefault(name, []).append(node.value)
    out = set()
    for init in facts.functions.get("__init__", []):
        ones = {p for p, d in parameter_defaults(init).items() if _is_one(d)}
        for node in walk(init.body):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target = dotted(node.targets[0]) or ""
            if (
                target.startswith("self.")
                and isinstance(node.value, ast.Name)
                and node.value.id in ones
                and len(values.get(target, [])) == 1
            ):
                out.add(f"%{target}")
    if not rewrites_globals(by_type):
        for name, assigned in values.items():
            if "." not in name and len(assigned) == 1 and _is_one(assigned[0]):
                out.add(f"%{name}")
    return frozenset(out)


def rewrites_globals(by_type: dict[type, list[Any]]) -> bool:
    """The file runs code into its own globals (``exec(open("configurator.py").read())``,
    nanoGPT; ``globals().update(cfg)``): a module constant there is only a default that a
    config file or the command line may change."""
    return any(
        isinstance(c.func, ast.Name) and c.func.id in ("exec", "globals")
        for c in by_type.get(ast.Call, ())
    )


def changed_objects(body: Iterable[ast.AST]) -> list[ast.expr]:
    """The objects ``body`` changes: whose attribute it writes (``gen.dataset.epoch_now =
    epoch``) or whose ``set_...`` method it calls (``train_set.set_epoch(epoch)``)."""
    out: list[ast.expr] = []
    for node in walk(body):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [t.value for t in targets if isinstance(t, ast.Attribute)]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr.startswith("set_")
        ):
            out.append(node.func.value)
    return out


def evaluates_its_model(forward: Function) -> bool:
    """``forward`` itself puts a module it holds in eval mode (``self.model.eval()``,
    ``self.model.train(False)``) and none back in training mode, as DIG's and Captum-style
    explainers do before attributing a trained model's prediction: a wrapper that runs a model
    for inference. (A distillation model sets its teacher to eval where it is built, or in
    ``train()``, not in the student's forward.)"""
    modes = [
        n
        for n in walk(forward.body)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("eval", "train")
        and isinstance(n.func.value, ast.Attribute)
        and dotted(n.func.value.value) == "self"
    ]
    return _all_eval(modes)


def parameter_defaults(function: Function) -> dict[str, ast.expr]:
    """A function's parameters that have a default, with it (positional and keyword-only)."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    given = zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    defaults = {a.arg: d for a, d in given}
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if d is not None:
            defaults[a.arg] = d
    return defaults


def _is_one(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value == 1


def _mark_no_grad(facts: LoopFacts, by_type: dict[type, list[Any]]) -> None:
    """Record the code that runs with autograd off: ``with torch.no_grad():`` bodies and the
    bodies of functions decorated with it (their nested functions excluded)."""
    bodies: list[list[ast.stmt]] = []
    for node in [*by_type.get(ast.With, ()), *by_type.get(ast.AsyncWith, ())]:
        if any(disables_grad(facts.names, item.context_expr) for item in node.items):
            bodies.append(node.body)
    for node in [*by_type.get(ast.FunctionDef, ()), *by_type.get(ast.AsyncFunctionDef, ())]:
        if any(disables_grad(facts.names, d) for d in node.decorator_list):
            bodies.append(node.body)
    for body in bodies:
        facts.no_grad.update(id(n) for n in walk(body))


def iterated(node: ast.expr) -> ast.expr:
    """What a loop header iterates: ``loader`` for ``enumerate(loader)`` or ``tqdm(loader)``,
    and for ``skipped or loader`` (a resumed run's partial epoch, else the loader: kohya's
    ``enumerate(skipped_dataloader or train_dataloader)``) the last, the one most epochs use."""
    while True:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            node = node.values[-1]
        elif (
            isinstance(node, ast.Call)
            and (dotted(node.func) or "") in ITER_WRAPPERS - {"zip"}
            and node.args
        ):
            node = node.args[0]
        else:
            return node


def _scopes(tree: ast.Module) -> Iterator[Scope]:
    yield tree
    for node in subtree(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _made_functions(facts: LoopFacts, factory: str | None) -> list[Function]:
    """The nested functions that ``factory``, a function of this file, returns by name
    (``def make_logger(): def log(loss): ...; return log``); none for anything else."""
    found: list[Function] = []
    for function in facts.functions.get(factory or "", ()):
        nested = {
            n.name: n
            for n in walk(function.body)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        values = returned(function)
        if not values or not all(isinstance(v, ast.Name) and v.id in nested for v in values):
            return []
        found += [nested[v.id] for v in values if isinstance(v, ast.Name)]
    return found


def _module_class(cls: ast.ClassDef, names: Resolver) -> bool:
    """A class of the file that may be a module: it derives from something, not only from
    ``object`` (a plain holder class has no forward to run)."""
    return any(dotted(b) not in (None, "object") or names.qualname(b) for b in cls.bases)


def _binding_scopes(tree: ast.Module, targets: set[str]) -> dict[str, set[int]]:
    """For each of ``targets``, the ``id`` of each function (or the module) that assigns it."""
    out: dict[str, set[int]] = {t: set() for t in targets}
    for scope in _scopes(tree):
        for node in walk(scope.body):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target, _ in assignments([node]):
                    if target in out:
                        out[target].add(id(scope))
    return out


def _collect_bindings(facts: LoopFacts, tree: ast.Module, by_type: dict[type, list[Any]]) -> None:
    names = facts.names
    for node in [*by_type.get(ast.FunctionDef, ()), *by_type.get(ast.AsyncFunctionDef, ())]:
        facts.functions.setdefault(node.name, []).append(node)
    for node in by_type.get(ast.ClassDef, ()):
        facts.classes[node.name] = node
    returns_loader = {
        f.name for fs in facts.functions.values() for f in fs if returned_loaders(f, names)
    }
    seen: dict[str, set[str]] = {}
    made: dict[str, list[Function]] = {}  # names bound to what a factory of this file returns
    unmade: set[str] = set()  # names also bound to anything else
    factories: dict[str | None, list[Function]] = {}  # function name → what it returns
    holders: dict[str, set[str]] = {}  # "model" → the classes of this file wrapping it
    for target, value in assignments(
        [*by_type.get(ast.Assign, ()), *by_type.get(ast.AnnAssign, ())]
    ):
        value = strip_moves(value)
        if dotted(value) == target:
            continue  # ``model = model.cuda()``: the same object, moved; its class stays
        if isinstance(value, ast.IfExp):
            # ``pbar = tqdm(enumerate(loader)) if is_train else enumerate(loader)`` (minGPT's)
            for branch in (value.body, value.orelse):
                if isinstance(branch, ast.Call) and facts.is_loader(branch):
                    facts.loader_wrappers.setdefault(target, []).append(branch)
        if not isinstance(value, ast.Call):
            seen.setdefault(target, set()).add("?")
            unmade.add(target)
            continue
        qual = names.qualname(value.func)
        local = value.func.id if isinstance(value.func, ast.Name) else None
        if local not in factories:
            factories[local] = _made_functions(facts, local)
        functions = factories[local]
        if functions:
            made.setdefault(target, []).extend(functions)
        else:
            unmade.add(target)
        if rewraps(names, target, value):
            continue  # the same module, wrapped: its class is what the other bindings say
        if qual in DATALOADERS:
            facts.loader_calls.setdefault(target, []).append(value)
        # ``pbar = tqdm(enumerate(loader), total=len(loader))``: its items are the batches
        if (qual or dotted(value.func)) in ITER_WRAPPERS and facts.is_loader(value):
            facts.loader_wrappers.setdefault(target, []).append(value)
        if (
            qual in DATALOADERS
            or local in returns_loader
            or (
                isinstance(value.func, ast.Name)
                and value.func.id == "iter"
                and value.args
                and facts.is_loader(value.args[0])
            )
        ):
            facts.loaders.add(target)
        if is_optimizer_class(qual):
            facts.optimizers.add(target)
        owner = qual if qual else (local if local in facts.classes else None)
        seen.setdefault(target, set()).add(owner or "?")
        if (
            local in facts.classes
            and _module_class(facts.classes[local], names)
            and any(dotted(strip_moves(a)) == target for a in value.args)
        ):
            # ``model = ModelWithLoss(model)``: a module of this file that holds the one the
            # name was bound to and runs it in its forward; what is called after is the holder
            holders.setdefault(target, set()).add(local)
    # An instance is known only when every assignment to the name agrees, or where one module
    # class of this file takes the name's module in, and holds it, from then on: where every
    # binding of the name is in the function that wraps it (not an export helper's
    # ``model = ExportWrapper(model)`` beside a training function's ``model = Net()``).
    facts.instances = {t: next(iter(o)) for t, o in seen.items() if len(o) == 1 and "?" not in o}
    if holders:
        scopes = _binding_scopes(tree, set(holders))
        facts.instances |= {
            t: next(iter(h)) for t, h in holders.items() if len(h) == 1 and len(scopes[t]) == 1
        }
    facts.instances |= _list_elements(facts, by_type, set(seen))
    facts.made = {t: fs for t, fs in made.items() if t not in unmade}
    facts.alternatives = {
        t: frozenset(o) for t, o in seen.items() if len(o) > 1 and o <= facts.classes.keys()
    }


def _list_elements(
    facts: LoopFacts, by_type: dict[type, list[Any]], assigned: set[str]
) -> dict[str, str]:
    """The loop names that each hold an instance of one class of this file: ``for m in models:``
    (or ``for i, m in enumerate(models):``) where ``models`` is only ever a list of that class's
    instances (``models = []`` then ``models.append(CNN().to(device))``, or ``[CNN() for _ in
    range(n)]``), and every loop that binds the name goes over such a list: an ensemble's
    ``m.train_model(x, y)`` runs the class's method."""
    if not facts.classes:
        return {}
    elements: dict[str, set[str]] = {}

    def element(value: ast.expr) -> str:
        value = strip_moves(value)
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in facts.classes
        ):
            return value.func.id
        return "?"

    for node in by_type.get(ast.Assign, ()):
        for target in node.targets:
            if not isinstance(target, ast.Name):
                continue
            value = node.value
            kinds = elements.setdefault(target.id, set())
            if isinstance(value, ast.List):
                kinds.update(element(e) for e in value.elts)
            elif isinstance(value, ast.ListComp):
                kinds.add(element(value.elt))
            else:
                kinds.add("?")
    for call in by_type.get(ast.Call, ()):
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "append"
            and isinstance(func.value, ast.Name)
            and func.value.id in elements
            and len(call.args) == 1
        ):
            elements[func.value.id].add(element(call.args[0]))
    of_class = {n: next(iter(k)) for n, k in elements.items() if len(k) == 1 and "?" not in k}
    if not of_class:
        return {}
    loops: dict[str, set[str]] = {}
    for loop in (*by_type.get(ast.For, ()), *by_type.get(ast.comprehension, ())):
        source, target = loop.iter, loop.target
        if (
            isinstance(source, ast.Call)
            and dotted(source.func) == "enumerate"
            and source.args
            and isinstance(target, ast.Tuple)
            and len(target.elts) == 2
        ):
            source, target = source.args[0], target.elts[1]
        if not isinstance(target, ast.Name):
            for n in subtree(target):
                if isinstance(n, ast.Name):
                    loops.setdefault(n.id, set()).add("?")
            continue
        if isinstance(source, ast.Call) and dotted(source.func) == "range":
            continue  # ``for m in range(n): models.append(CNN())``: an int, no method of ours
        name = dotted(source)
        loops.setdefault(target.id, set()).add(of_class.get(name or "", "?"))
    return {
        n: next(iter(k))
        for n, k in loops.items()
        if len(k) == 1 and "?" not in k and n not in assigned
    }


_CADENCE_FLAG = re.compile(r"log|sample|save|eval|print|report|every|checkpoint", re.IGNORECASE)


def _skips_off_cadence(test: ast.expr) -> bool:
    """The test of an early ``return`` that lets the rest of a function run only on a cadence:
    ``steps % n != 0``, ``steps % n``, ``not step % n == 0``, ``not should_log`` (a flag named
    for logging, sampling, saving or evaluating), or an ``or`` of such with rare conditions
    (``steps == 0 or steps % n != 0``)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return any(_skips_off_cadence(v) for v in test.values)
    if _is_modulo(test):
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotEq):
        return any(_is_modulo(side) for side in (test.left, *test.comparators))
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = test.operand
        if is_cadence_gate(inner):
            return True
        name = dotted(inner)
        return name is not None and bool(_CADENCE_FLAG.search(name.rsplit(".", 1)[-1]))
    return False


def none_test(test: ast.expr, op: type[ast.cmpop] = ast.Is) -> str | None:
    """``x`` for a test ``x is None`` (with ``op=ast.IsNot``, ``x is not None``), where ``x`` is
    a name or an attribute chain (``self.pe``); else None."""
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], op)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return dotted(test.left)
    return None


def returns_if_kept(stmt: ast.If) -> str | None:
    """``self.x`` for ``if self.x is not None:`` whose body returns (also under a further
    ``if``, ESPnet's ``if self.pe.size(1) >= x.size(1): ... return``): the function keeps
    ``self.x`` and, once it holds one, returns before building it again."""
    name = none_test(stmt.test, ast.IsNot) or ""
    if not name.startswith("self.") or stmt.orelse:
        return None
    returns = any(isinstance(n, ast.Return) for n in subtree(stmt))
    return name if returns else None


def stores(body: list[ast.stmt], name: str) -> bool:
    """A statement of ``body`` assigns ``name`` (``self.pe = pe.to(x.device)``)."""
    return any(
        isinstance(n, (ast.Assign, ast.AnnAssign))
        and any(dotted(t) == name for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))
        for stmt in body
        for n in subtree(stmt)
    )


def _before_early_return(body: list[ast.stmt]) -> list[ast.stmt]:
    """A called function's statements that run on every call: up to an early
    ``if <off cadence>: return`` (kohya's ``sample_images``: ``if steps % every != 0: return``;
    torchtitan's logging: ``if not should_log: return``), or an ``if``/``else`` whose every way
    through returns off a cadence or passes only on the first step (kohya's FLUX
    ``sample_images``: ``if steps == 0: [return unless asked] else: [if steps % every != 0:
    return]``). That ``if`` itself still runs, its tests and whatever its branches do before
    they return (MAE's ``all_reduce_mean``: ``if world_size > 1: ...; return x.item()``) (issue
    32)."""
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.If) and _gated([stmt]):
            return body[: i + 1]
        if isinstance(stmt, ast.If):
            kept = returns_if_kept(stmt)
            if kept is not None and stores(body[i + 1 :], kept):
                return body[: i + 1]  # ESPnet's ``extend_pe``: the table is built once, kept
    return body


_STEP_NAME = re.compile(r"step|epoch|iter", re.IGNORECASE)


def _first_step_test(test: ast.expr) -> bool:
    """``steps == 0``, ``epoch == 1``: a branch taken on one step of a run."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if not isinstance(test.ops[0], ast.Eq):
        return False
    sides = (test.left, test.comparators[0])
    constant = any(isinstance(x, ast.Constant) and type(x.value) is int for x in sides)
    names = [n for n in (dotted(x) for x in sides) if n is not None]
    return constant and any(_STEP_NAME.search(n.rsplit(".", 1)[-1]) for n in names)


def _gated(stmts: list[ast.stmt]) -> bool:
    """Whether running past ``stmts`` means a cadence (or first-step) test let it: one of them
    is ``if <off cadence>: return``, or an ``if``/``else`` each of whose branches is gated so,
    returns, or is taken on the first step only."""
    for stmt in stmts:
        if not isinstance(stmt, ast.If) or not stmt.body:
            continue
        if not stmt.orelse:
            if isinstance(stmt.body[-1], ast.Return) and _skips_off_cadence(stmt.test):
                return True
            continue
        body = _first_step_test(stmt.test) or _returns(stmt.body) or _gated(stmt.body)
        if body and (_returns(stmt.orelse) or _gated(stmt.orelse)):
            return True
    return False


def _returns(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return)


_EVAL_NAME = re.compile(
    r"(^|_)(test|tests|eval|evaluate|evaluation|valid|validate|validation|val)(_|$)"
)


def evaluation_function(facts: LoopFacts, function: Function) -> bool:
    """An evaluation function the epoch loop calls beside training (PyG's ``@torch.no_grad()
    def test():``): autograd off by its decorator, and named for evaluation or putting a model
    in ``eval()`` mode. Its reads are the evaluation's, once per epoch, not the step's (issue
    32: 42 such syncs). Also one named for evaluation that puts a model in ``eval()`` mode and
    computes under ``with torch.no_grad():`` (DGL's ``def evaluate(...)``), or trains nothing
    (:meth:`LoopFacts.function_trains`: no backward, no optimizer step; PyG's ``def test():
    model.eval(); ...`` with autograd left on, which TP403 reports; a ``scheduler.step(loss)``
    is no training); and one of any name that does both, eval mode and ``with
    torch.no_grad():``, and trains nothing (DeepGCNs' ``def infer(...)``).
    A ``@no_grad`` helper the step needs (an EMA update) stays hot."""
    named = bool(_EVAL_NAME.search(function.name.lower()))
    if not any(disables_grad(facts.names, d) for d in function.decorator_list):
        if not _switches_to_eval(function):
            return False
        without_grad = any(facts._without_grad(stmt) for stmt in function.body)
        trains = facts.function_trains(function)
        # unnamed (DeepGCNs' ``def infer(model, test_loader, ...)``): both eval mode and
        # ``with torch.no_grad():``, and no training
        passes = any(isinstance(n, (ast.For, ast.AsyncFor)) for n in walk(function.body))
        return (named and (without_grad or not trains)) or (without_grad and not trains and passes)
    return named or _switches_to_eval(function)


def _switches_to_eval(function: Function) -> bool:
    """``function`` calls ``.eval()`` on something (a model, put in evaluation mode)."""
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "eval"
        and not n.args
        for n in walk(function.body)
    )


def _conjuncts(test: ast.expr) -> list[ast.expr]:
    """The parts an ``and`` needs all of; the test itself otherwise."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return test.values
    return [test]


def _evaluation_branch(facts: LoopFacts, node: ast.If, scope: Scope) -> bool:
    """``if not train:`` (or ``if not train and ...:``) whose body trains nothing, in a scope
    where the training calls run under ``if train:``: one loop serves both passes (demucs'
    ``_run_one_epoch(epoch, train=True)``), and the body is the evaluation's (its metrics, its
    chunked inference), not the training step's."""
    negated = {
        text
        for part in _conjuncts(node.test)
        if isinstance(part, ast.UnaryOp)
        and isinstance(part.op, ast.Not)
        and (text := dotted(part.operand)) is not None
    }
    if not negated or facts.trains(node.body, scope):
        return False
    return any(
        isinstance(other, ast.If)
        and negated & {dotted(part) for part in _conjuncts(other.test)}
        and facts.trains(other.body, scope)
        for other in walk(scope.body)
    )


def _pass_test(test: ast.expr) -> bool:
    """A test of which pass runs: a flag or a phase named for training (``if is_train:``,
    ``if self.training:``, ``if phase == LoopPhase.TRAIN:``, ``if mode == "train":``,
    ``config["train"]``); not a step count, a cadence, nor an option of a training section
    (``config.TRAIN.CLIP_GRAD``)."""
    if isinstance(test, ast.Compare):
        if len(test.ops) != 1 or not isinstance(test.ops[0], (ast.Eq, ast.Is)):
            return False
        if dotted(test.left) is None:
            return False
        named = test.comparators[0]
        word = named.value if isinstance(named, ast.Constant) else dotted(named)
    elif isinstance(test, ast.Subscript):
        if dotted(test.value) is None or not isinstance(test.slice, ast.Constant):
            return False
        word = test.slice.value
    else:
        word = dotted(test)
    return isinstance(word, str) and _TRAIN_PASS.match(word.rsplit(".", 1)[-1]) is not None


_TRAIN_PASS = re.compile(r"(is_|do_)?train(ing)?$", re.I)


def _other_pass(facts: LoopFacts, node: ast.If, scope: Scope) -> bool:
    """``else:`` of ``if is_train:`` (``elif phase == VAL:`` of ``if phase == TRAIN:``) that
    trains nothing, in a scope whose training calls run under the same test: one function
    serves both passes (pytorch-GAT's ``main_loop(phase)``, the original transformer's
    ``train_val_loop(is_train)``), and the ``else`` is the other pass's logging and early
    stopping."""
    if not node.orelse or not _pass_test(node.test) or facts.trains(node.orelse, scope):
        return False
    key = ast.dump(node.test)
    return any(
        isinstance(other, ast.If)
        and ast.dump(other.test) == key
        and facts.trains(other.body, scope)
        for other in walk(scope.body)
    )


def _trains_its_own(facts: LoopFacts, body: list[ast.stmt]) -> bool:
    """``body`` builds a ``torch.optim`` optimizer of its own: what it trains is a fresh copy
    (meta-learning's periodic validation: ``learner = copy.deepcopy(model)``, ``adapt_opt =
    torch.optim.Adam(learner.parameters())``, a few adaptation steps, then a read), not the
    loop's model at its optimizer step."""
    return any(
        isinstance(n, ast.Call) and is_optimizer_class(facts.names.qualname(n.func))
        for n in walk(body)
    )


def _mark_hot(
    facts: LoopFacts, nodes: Iterable[ast.AST], scope: Scope, queue: list[Function]
) -> None:
    """Record ``nodes`` (statements or expressions) and everything under them as hot."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, NESTED_SCOPES):
            continue
        if id(node) in facts.hot:
            continue
        if isinstance(node, ast.ExceptHandler) and not facts.trains(node.body, scope):
            continue  # ``except torch.cuda.OutOfMemoryError: torch.cuda.empty_cache()``: the
            # handler runs when the step fails, not on every step
        facts.hot[id(node)] = (node, scope)
        if (
            isinstance(node, ast.If)
            and is_cadence_gate(node.test, facts.cadence_helpers)
            and (not facts.trains(node.body, scope) or _trains_its_own(facts, node.body))
            and not _every_optimizer_step(node.test)
        ):
            # The gated body runs once per N steps, and so does what ``and`` evaluates after
            # the cadence test. A gated body that trains is accumulation, not logging: hot;
            # unless it builds the optimizer it trains with (a periodic fine-tune of a copy).
            stack += [*_ungated_part(node.test, facts.cadence_helpers), *node.orelse]
            continue
        if (
            isinstance(node, ast.If)
            and _opt_in(node.test, facts.off_flags)
            and not facts.trains(node.body, scope)
        ):
            # ``if args.verbose: print(loss.item())``: diagnostics a run does only when asked
            stack += [node.test, *node.orelse]
            continue
        if (
            isinstance(node, ast.If)
            and _initialises(node)
            and not _fresh_each_call(node, scope)
            and not facts.trains(node.body, scope)
        ):
            # ``if loss_ema is None: loss_ema = loss.item()``: the body sets what its test
            # asks for, so it runs once (until the name is reset, per epoch at most)
            stack += [node.test, *node.orelse]
            continue
        if (
            isinstance(node, ast.If)
            and failure_check(node.test)
            and not facts.trains(node.body, scope)
        ):
            # ``if torch.isnan(k).any(): k = fallback(...)``: recovery from a bad value
            stack += [node.test, *node.orelse]
            continue
        if isinstance(node, ast.If) and _new_best(node) and not facts.trains(node.body, scope):
            # ``if acc > best_acc: best_acc = acc; save(...)``: a new best, rarer as it goes
            stack += [node.test, *node.orelse]
            continue
        if isinstance(node, ast.If) and _ends_run(node.body):
            # ``if not math.isfinite(loss): print(...); sys.exit(1)``: the body runs at most once.
            stack += [node.test, *node.orelse]
            continue
        if isinstance(node, ast.If) and _evaluation_branch(facts, node, scope):
            # ``if not train:`` in a loop that trains under ``if train:``: the other pass
            stack += [node.test, *node.orelse]
            continue
        if isinstance(node, ast.If) and _other_pass(facts, node, scope):
            # ``if is_train: ... else: <the evaluation's logging>``: the other pass
            stack += [node.test, *node.body]
            continue
        if isinstance(node, ast.If) and id(node) in facts.decided:
            # ``if not reverse:`` in a flow whose training calls never pass ``reverse``
            stack += [node.test, *getattr(node, facts.decided[id(node)])]
            continue
        if isinstance(node, ast.Call):
            called = [f for f in facts.callees(node, scope) if not evaluation_function(facts, f)]
            for f in called:
                facts.callers.setdefault(id(f), (f, []))[1].append(node)
            queue += called
            # A lambda handed to a call runs there: ``apply_to_collection(x, Tensor,
            # lambda t: t.item())`` (Lightning's example trainer) reads every step.
            stack += [
                a.body
                for a in [*node.args, *(k.value for k in node.keywords)]
                if isinstance(a, ast.Lambda)
            ]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            # ``self.r`` where the class's ``r`` is a property: reading it runs the getter
            # (Real-Time-Voice-Cloning's Tacotron: ``return self.decoder.r.item()``)
            queue += [f for f in facts.callees_of_property(node.attr, scope) if f is not scope]
        stack.extend(children(node))


def _new_best(node: ast.If) -> bool:
    """``if acc > best_acc: best_acc = acc ...``: a test of a value against a record that the
    body then raises or lowers to it (a checkpoint or prediction saved on a new best score)."""
    test = node.test
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Gt, ast.Lt, ast.GtE, ast.LtE))
    ):
        return False
    sides = {dotted(test.left), dotted(test.comparators[0])} - {None}
    if len(sides) != 2:
        return False
    return any(
        target in sides and dotted(value) in sides and dotted(value) != target
        for target, value in assignments(walk(node.body))
    )


def _initialises(node: ast.If) -> bool:
    """``if x is None: x = ...``: a test that a name is unset, whose body sets it; or a cache
    filled once per key, ``if key not in cache: cache[key] = ...`` (VITS' Hann windows per
    dtype and device); or a latch the body turns off, ``if self.need_sync: ...;
    self.need_sync = False`` (DINOv2's first-step stream synchronisation), ``if not done: ...;
    done = True``; also where the body, until it turns the latch off, only skips the step
    (TinyLlama's resume: ``if resume: if i < start: continue`` ``else: resume = False; ...``).
    A body that fills another key than the one tested runs every time."""
    test = node.test
    latch, negated = test, False
    if isinstance(latch, ast.UnaryOp) and isinstance(latch.op, ast.Not):
        latch, negated = latch.operand, True
    if isinstance(latch, (ast.Name, ast.Attribute)) and dotted(latch) is not None:
        return _turns_off(node.body, dotted(latch), negated)
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.NotIn)
        and dotted(test.comparators[0]) is not None
    ):
        cache, key = dotted(test.comparators[0]), ast.dump(test.left)
        return any(
            isinstance(stmt, ast.Assign)
            and any(
                isinstance(t, ast.Subscript)
                and dotted(t.value) == cache
                and ast.dump(t.slice) == key
                for t in stmt.targets
            )
            for stmt in node.body
        )
    name = none_test(test)
    return name is not None and any(
        isinstance(stmt, (ast.Assign, ast.AnnAssign))
        and any(
            dotted(t) == name
            for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        )
        for stmt in node.body
    )


def _turns_off(body: list[ast.stmt], latch: str | None, negated: bool) -> bool:
    """``body`` sets the flag ``latch`` to ``negated`` (turning its test off), or branches into
    a part that only skips the step (ends with ``continue``) and one that turns it off."""
    for stmt in body:
        if (
            isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Constant)
            and stmt.value.value is negated
            and any(dotted(t) == latch for t in stmt.targets)
        ):
            return True
        if isinstance(stmt, ast.If) and stmt.body and stmt.orelse:
            for skips, other in ((stmt.body, stmt.orelse), (stmt.orelse, stmt.body)):
                if isinstance(skips[-1], ast.Continue) and _turns_off(other, latch, negated):
                    return True
    return False


def _fresh_each_call(node: ast.If, scope: Scope) -> bool:
    """``if h is None: h = torch.zeros(...)`` on a parameter of the function, which no loop of
    the function holds: each call starts with the value it is given (pytorch_geometric_temporal's
    ``TGCN2._set_hidden_state``, handed ``None`` every step), so the body runs at every call,
    not once."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    name = dotted(node.test.left) if isinstance(node.test, ast.Compare) else None
    if name is None or name not in {a.arg for a in (*scope.args.args, *scope.args.kwonlyargs)}:
        return False
    return not any(
        isinstance(loop, LOOPS) and any(n is node for n in subtree(loop))
        for loop in walk(scope.body)
    )


def _mark_all(
    facts: LoopFacts, roots: Sequence[tuple[list[ast.AST], Scope]], entries: Sequence[Function]
) -> None:
    """Mark the step loops' bodies hot, then every function they or ``entries`` run."""
    queue = list(entries)
    for nodes, scope in roots:
        _mark_hot(facts, nodes, scope, queue)
    done: set[int] = set()
    while queue:
        function = queue.pop()
        if id(function) in done:
            continue
        done.add(id(function))
        _mark_hot(facts, _before_early_return(function.body), function, queue)
        queue += _submodule_forwards(facts, function)


def _submodule_forwards(facts: LoopFacts, function: Function) -> list[Function]:
    """The ``forward`` of each module class of this file that the ``__init__`` of ``function``'s
    class builds, where ``function`` is that class's ``forward``: what a model builds its
    forward runs, also where the call does not name the class (``for conv in self.convs:``,
    ``self.blocks[i](x)``, ``self.layers(x)`` of a ``Sequential``). The same reading that
    :mod:`torchpace.lint.project` makes of a model's submodules in other files."""
    if function.name != "forward":
        return []
    cls = facts._class_of(function)
    init = facts._methods(cls, "__init__")
    if not init:
        return []
    built = {
        n.func.id
        for n in walk(init[0].body)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id != cls
    }
    return [
        f for name in sorted(built & facts.classes.keys()) for f in facts._methods(name, "forward")
    ]


def _flag_default(function: Function, test: ast.expr) -> tuple[str, bool] | None:
    """``if reverse:`` / ``if not reverse:`` on a parameter with a constant default: the
    parameter and whether the test holds when the parameter keeps its default."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    name = test.operand if isinstance(test, ast.UnaryOp) and negated else test
    if not isinstance(name, ast.Name):
        return None
    default = parameter_defaults(function).get(name.id)
    if not isinstance(default, ast.Constant) or not isinstance(default.value, (bool, type(None))):
        return None
    return name.id, bool(default.value) != negated


def _passes(call: ast.Call, function: Function, parameter: str) -> bool:
    """``call`` may give ``function``'s ``parameter`` a value (by keyword, position or ``*``)."""
    if any(k.arg in (parameter, None) for k in call.keywords):
        return True
    if any(isinstance(a, ast.Starred) for a in call.args):
        return True
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if positional[:1] in (["self"], ["cls"]):
        positional = positional[1:]
    return parameter in positional[: len(call.args)]


def _decided(facts: LoopFacts, entered: set[int]) -> dict[int, str]:
    """The branches on a flag parameter (``if not reverse:``) that the training step never
    takes: in a function of this file that only hot calls of this file run, none of which
    passes the flag, its default decides the branch (a normalizing flow's ``reverse=False``
    keeps its inverse pass out of training). Not for a function another file calls."""
    out: dict[int, str] = {}
    for function_id, (function, calls) in facts.callers.items():
        if function_id in entered:
            continue
        stored = {
            n.id
            for n in walk(function.body)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        for node in walk(function.body):
            if not isinstance(node, ast.If):
                continue
            flag = _flag_default(function, node.test)
            if flag is None or flag[0] in stored:
                continue
            parameter, holds = flag
            if not any(_passes(c, function, parameter) for c in calls):
                out[id(node)] = "body" if holds else "orelse"
    return out


def _mark_repeated(facts: LoopFacts, tree: ast.Module) -> None:
    """Loops that run more than once: nested in another loop, or in a function a loop calls."""
    called_in_loops: list[Function] = []
    for scope in _scopes(tree):
        for node in _in_loop_bodies(scope.body):
            if isinstance(node, LOOPS):
                facts.repeated.add(id(node))
            elif isinstance(node, ast.Call):
                called_in_loops += facts.callees(node, scope)
    seen: set[int] = set()
    while called_in_loops:
        function = called_in_loops.pop()
        if id(function) in seen:
            continue
        seen.add(id(function))
        for node in walk(function.body):
            if isinstance(node, LOOPS):
                facts.repeated.add(id(node))
            elif isinstance(node, ast.Call):
                called_in_loops += facts.callees(node, function)


def _in_loop_bodies(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Each node of ``body``'s scope that is in the body of a loop (nested loops included), once:
    ``walk(loop.body)`` for every loop ``walk(body)`` meets, without walking a nested loop's
    body again for each loop around it."""
    stack: list[tuple[ast.AST, bool]] = [(node, False) for node in body]
    while stack:
        node, inside = stack.pop()
        if inside:
            yield node
        if isinstance(node, NESTED_SCOPES):
            continue
        if not inside and isinstance(node, LOOPS):
            in_body = {id(n) for n in node.body}
            stack.extend((kid, id(kid) in in_body) for kid in children(node))
        else:
            stack.extend((kid, inside) for kid in children(node))


# Names of modules that are run for evaluation: model, net, encoder, ...
MODEL_NAME = re.compile(r"(model|net|encoder|decoder|backbone|classifier)", re.I)


def _may_train(by_type: dict[type, list[Any]], names: Resolver) -> bool:
    """A cheap first pass: does the file call ``backward()``, an optimizer-like ``step()``,
    ``model.eval()``, build a DataLoader, or loop over something named like a loader? If not,
    it has no step or evaluation loops, and most library modules stop here."""
    for node in by_type.get(ast.Call, ()):
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr not in {"backward", "step", "eval"}:
                if _STEP_FUNCTION.search(func.attr) and any(
                    names_optimizer(dotted(a)) for a in node.args
                ):
                    return True  # ``model.train_step(model, optimizer, ...)``: see is_step
                continue
            owner = dotted(func.value) or ""
            last = owner.rsplit(".", 1)[-1]
            if func.attr == "backward" or (
                func.attr == "step" and (names_optimizer(last) or "scaler" in last)
            ):
                return True
            if func.attr == "eval" and MODEL_NAME.search(last):
                return True
        elif names.qualname(func) in {*DATALOADERS, "torch.autograd.backward"}:
            return True
    for node in [*by_type.get(ast.For, ()), *by_type.get(ast.AsyncFor, ())]:
        source = iterated(node.iter)
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and source.args:
            source = source.args[0]  # ``metric_logger.log_every(data_loader, ...)``
        text = dotted(source)
        if text is not None and _LOADER_NAME.search(text.rsplit(".", 1)[-1]):
            return True
    return False


_RANDOM_INPUTS = frozenset(
    {"torch.randn", "torch.rand", "torch.randint", "torch.randn_like", "torch.rand_like"}
)
# A smoke test runs a handful of steps: 100 is more than any memory check or timing demo needs
# and fewer than any training run.
_SMOKE_STEPS = 100


# Calls that show a file trains, or may: a backward, an optimizer's step, a trainer's fit, a
# learner's learn, a module switched to training mode, gradients clipped or zeroed.
_TRAINING_WORDS = re.compile(
    r"^(backward|step|fit|train\w*|learn\w*|optimi[sz]e\w*|zero_grad|clip_grad\w*|update_parameters)$"
)


# Hooks a framework calls to train: what they return or do is a training run's.
_FRAMEWORK_TRAINING_HOOKS = frozenset({"train_dataloader", "training_step"})


def _inference_script(tree: ast.Module, by_type: dict[type, list[Any]], names: Resolver) -> bool:
    """A script (``if __name__ == "__main__":``) with no sign of training anywhere: no call
    named for it (:data:`_TRAINING_WORDS`: ``loss.backward()``, ``optimizer.step()``,
    ``trainer.fit(...)``, ``model.train()``, ``train_one_epoch(...)``), no optimizer or
    gradient scaler built, and no framework hook that trains (``train_dataloader``,
    ``training_step``: a Lightning data module's demo ``__main__``). Its loops over batches run
    a model to extract, save or score: an offline segmentation-extraction script
    (taming-transformers), a captioning or inference script, never a training step."""
    if _main_block(tree) is None:
        return False
    if any(
        f.name in _FRAMEWORK_TRAINING_HOOKS
        for f in (*by_type.get(ast.FunctionDef, ()), *by_type.get(ast.AsyncFunctionDef, ()))
    ):
        return False  # a Lightning data or model module with a demo ``__main__``: a framework
        # trains from what its hooks return
    for call in by_type.get(ast.Call, ()):
        func = call.func
        last = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if _TRAINING_WORDS.match(last):
            return False
        qual = names.qualname(func) or ""
        if is_optimizer_class(qual) or qual.endswith("GradScaler"):
            return False
    return True


def _main_block(tree: ast.Module) -> ast.If | None:
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and dotted(node.test.left) == "__name__"
            and any(
                isinstance(c, ast.Constant) and c.value == "__main__" for c in node.test.comparators
            )
        ):
            return node
    return None


# A loop that stops after this many batches at most looks at the data: a dataset module's demo
# plotting two batches (``if ii == 1: break``), not a training run.
_PEEK_BATCHES = 10


def _peeks(loop: ast.For | ast.AsyncFor) -> bool:
    """The loop's body ends it after a few batches: a top-level ``if i == K: break`` (or ``>=``,
    ``>``) on the index ``enumerate`` gives, with K a literal of at most :data:`_PEEK_BATCHES`;
    or a ``break`` that ends the body, which runs once (a notebook showing the first batch)."""
    if loop.body and isinstance(loop.body[-1], ast.Break):
        return True
    source, target = loop.iter, loop.target
    if not (
        isinstance(source, ast.Call)
        and dotted(source.func) == "enumerate"
        and isinstance(target, ast.Tuple)
        and target.elts
        and isinstance(target.elts[0], ast.Name)
    ):
        return False
    index = target.elts[0].id
    for stmt in loop.body:
        if not (isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], ast.Break)):
            continue
        test = stmt.test
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Eq, ast.GtE, ast.Gt))
            and isinstance(test.left, ast.Name)
            and test.left.id == index
            and isinstance(test.comparators[0], ast.Constant)
            and type(test.comparators[0].value) is int
            and test.comparators[0].value <= _PEEK_BATCHES
        ):
            return True
    return False


def _unrunnable(
    facts: LoopFacts, loop: Loop, tree: ast.Module, by_type: dict[type, list[Any]]
) -> bool:
    """A notebook's loop that steps only optimizers no cell of the notebook binds (issue 32's
    template class: a handbook's DDP snippet "to be saved as a .py file", an exercise whose
    ``optimizer = # TODO`` cell does not parse): run, it stops at a NameError on its first
    step, so it is no training run. Not where a star import, ``exec`` or ``globals()`` may bind
    the name. Read of notebooks only: a notebook is read whole, while a ``.py`` file may be run
    with names bound for it (``exec``, ``runpy.run_path(init_globals=...)``, ``%run -i``)."""
    steps = [
        n.func.value
        for n in walk(loop.body)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and facts.is_optimizer_step(n)
    ]
    if not steps or not all(isinstance(s, ast.Name) for s in steps):
        return False
    if "_tp_bound_anywhere" not in tree.__dict__:
        tree.__dict__["_tp_bound_anywhere"] = _names_bound(by_type)
    bound: set[str] | None = tree.__dict__["_tp_bound_anywhere"]
    return bound is not None and not any(dotted(s) in bound for s in steps)


_DYNAMIC_BINDERS = frozenset({"exec", "globals", "locals", "vars"})


def _names_bound(by_type: dict[type, list[Any]]) -> set[str] | None:
    """Every name the file binds anywhere (assigned, a parameter, a definition, an import, a
    handler's or a pattern's name, declared global), with Python's builtins; None where names
    may be bound in ways a reading cannot see (a star import, ``exec``, ``globals()``)."""
    bound = set(dir(builtins))
    for name in by_type.get(ast.Name, ()):
        if not isinstance(name.ctx, ast.Load):
            bound.add(name.id)
        elif name.id in _DYNAMIC_BINDERS:
            return None
    imports = [*by_type.get(ast.Import, ()), *by_type.get(ast.ImportFrom, ())]
    for node in imports:
        if any(a.name == "*" for a in node.names):
            return None
        bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    named: tuple[type, ...] = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    named += (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)
    bound.update(n.name for kind in named for n in by_type.get(kind, ()) if n.name)
    bound.update(node.arg for node in by_type.get(ast.arg, ()))
    declared = (ast.Global, ast.Nonlocal)
    bound.update(name for kind in declared for n in by_type.get(kind, ()) for name in n.names)
    bound.update(node.rest for node in by_type.get(ast.MatchMapping, ()) if node.rest)
    return bound


def _smoke_test(loop: ast.AST, tree: ast.Module, names: Resolver) -> bool:
    """A few steps over random inputs under ``if __name__ == "__main__":``: a model file's self
    test or memory check (kohya's ``sdxl_original_unet.py``: 10 steps of ``torch.randn(...)
    .cuda()``), a deliberate benchmark, not the training run (issue 32). The loop iterates
    ``range(N)`` with N at most 100 (a literal, or a name the block assigns one), makes its
    inputs with random factories, and reads no loader."""
    block = _main_block(tree)
    if block is None or not any(loop is n for n in subtree(block)):
        return False
    if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)):
        return False
    if dotted(loop.iter.func) != "range" or not loop.iter.args:
        return False
    bound = loop.iter.args[-1] if len(loop.iter.args) < 3 else loop.iter.args[1]
    if isinstance(bound, ast.Name):
        assigned = [
            n.value
            for n in subtree(block)
            if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == bound.id for t in n.targets)
        ]
        bound = assigned[0] if len(assigned) == 1 else bound
    if not (isinstance(bound, ast.Constant) and type(bound.value) is int):
        return False
    if bound.value > _SMOKE_STEPS:
        return False
    random = False
    for node in walk(loop.body):
        if isinstance(node, (ast.For, ast.AsyncFor)) and not (
            isinstance(node.iter, ast.Call) and dotted(node.iter.func) == "range"
        ):
            return False  # iterates data
        if isinstance(node, ast.Call):
            if dotted(node.func) == "next":
                return False
            random = random or names.qualname(node.func) in _RANDOM_INPUTS
    return random


# A learning-rate finder: a class named for one (``LRFinder``, ``FindLR``), or its method.
_LR_FINDER = re.compile(
    r"(learning_?rate|lr)_?(range_?)?finder|find_?(lr|learning_?rate)", re.IGNORECASE
)
_LR_SWEEPS = frozenset({"range_test", "find_lr", "lr_find"})


def _inner_training_loops(facts: LoopFacts, loop: Loop, scope: Scope) -> list[Loop]:
    """The step loops inside ``loop`` that train, where its own statements train nothing (no
    backward, no optimizer step, here or in what they call) and one of them trains nested two
    deep: TRL's PPO update loop, which draws a batch, rolls out, then runs epochs of minibatch
    steps. What the outer body runs besides them (the rollout, the update's metrics) runs once
    per many optimizer steps (:func:`per_update_code`). Empty for any other loop."""
    inner = [n for n in walk(loop.body) if isinstance(n, LOOPS)]
    if not inner or (isinstance(loop, (ast.For, ast.AsyncFor)) and facts.is_loader(loop.iter)):
        return []  # a loop over batches: its body runs once a batch
    for n in walk(loop.body, into_loops=False):
        if isinstance(n, ast.Call) and (
            facts.is_backward(n)
            or facts.is_optimizer_step(n)
            or facts.hands_optimizer(n)
            or any(facts.function_trains(f) for f in facts.callees(n, scope))
        ):
            return []
    training = [n for n in inner if facts.is_step_loop(n, scope) and facts.trains(n.body, scope)]
    # epochs of minibatch steps (``for epoch in range(k): for start in range(0, n, m):``), not
    # one loop of steps per batch (a GAN's ``for _ in range(n_critic):``): the outer body runs
    # once per many optimizer steps
    nested = any(m is not n and any(x is n for x in walk(m.body)) for n in training for m in inner)
    return training if nested else []


def per_update_code(facts: LoopFacts) -> frozenset[int]:
    """``id`` of the nodes of each step loop that trains only in its inner loops
    (:func:`_inner_training_loops`), outside those training loops: code that runs once an
    update, after or before many optimizer steps."""
    out: set[int] = set()
    for loop in facts.step_loops:
        inner = _inner_training_loops(facts, loop, facts.scope_of[id(loop)])
        if not inner:
            continue
        training = {id(m) for n in inner for m in subtree(n)}
        out |= {id(n) for n in walk(loop.body) if id(n) not in training}
    return frozenset(out)


def _named_for_evaluation(source: ast.expr) -> bool:
    """What a loop iterates, or ``next()`` draws from, names a held-out set (``val_loader``,
    ``enumerate(val_loader)``, ``iter(valid_dataloader)``, ``val_iter``)."""
    name = dotted(iterated(source)) or ""
    return EVAL_NAME.search(name.rsplit(".", 1)[-1]) is not None


def _lr_sweep(facts: LoopFacts, scope: Scope) -> bool:
    """``scope`` is a learning-rate finder's sweep (a method of a class named for one, or a
    function named ``range_test``, ``find_lr`` or ``lr_find``, or for a finder or a range
    test, ``lr_range_test``): a short run, once, before the
    training run, that reads the loss at every step to smooth it and to stop where it diverges
    (the tutorials' ``LRFinder.range_test``), not the training run whose steps it times."""
    if isinstance(scope, ast.Module):
        return False
    if (
        scope.name in _LR_SWEEPS
        or scope.name.endswith("range_test")
        or _LR_FINDER.search(scope.name)
    ):
        return True  # also ``lr_range_test`` (PyTorch Step-by-Step's), ``find_lr_rate``
    owner = facts._class_of(scope)
    return owner is not None and bool(_LR_FINDER.search(owner))


# An entry (:mod:`.project`) for a function (or a class, whose ``__init__`` runs) of this file
# that another file's module forward calls, or the step code of a file linted with entries
# (FastSpeech 2's ``get_mask_from_lengths`` of ``utils/tools.py``, called by its variance
# adaptor's forward): it runs on every training step, and is read as a forward's code is
# (:mod:`.forwards`), not as a loop's hot code.
FORWARD = "@forward:"
# An entry for a function or method another file's step code calls with plain Python values
# only (numbers, strings, ``loss.item()``, an optimizer's learning rate): where no caller
# hands it anything else, its ``if isinstance(v, torch.Tensor):`` branches on what it is given
# never run (DeiT's, MAE's and DINO's ``MetricLogger.update``, handed floats).
PLAIN = "@plain:"


def analyse(
    tree: ast.Module,
    by_type: dict[type, list[Any]],
    names: Resolver,
    entries: frozenset[str] = frozenset(),
    off_flags: frozenset[str] = frozenset(),
    *,
    notebook: bool = False,
) -> LoopFacts:
    """The loops of one parsed file: step loops, epoch loops, and the hot code. ``entries``:
    module-level functions that another file calls on every step (:mod:`.project`), hot too.
    ``off_flags``: options for diagnostics that are off by default (``values.debug_flags_off``):
    what ``if args.verbose:`` runs is not hot. ``notebook``: the tree is a notebook's cells,
    all of them (:func:`_unrunnable`)."""
    facts = LoopFacts(names, off_flags=off_flags, by_type=by_type)
    entries = frozenset(e for e in entries if not e.startswith(FORWARD))  # read by .forwards
    plain = {e.removeprefix(PLAIN) for e in entries if e.startswith(PLAIN)} - entries
    entries = frozenset(e for e in entries if not e.startswith(PLAIN)) | plain
    if not entries and not _may_train(by_type, names) and not _defines_step_methods(by_type):
        return facts  # most library modules: nothing to analyse
    _collect_bindings(facts, tree, by_type)
    _mark_no_grad(facts, by_type)
    facts.cadence_helpers = _cadence_helpers(facts, by_type)
    queue: list[Function] = []
    roots: list[tuple[list[ast.AST], Scope]] = []  # the step loops' bodies
    facts.inference_only = not entries and _inference_script(tree, by_type, names)
    for scope in _scopes(tree):
        body = scope.body
        for node in walk(body):
            if not isinstance(node, LOOPS):
                continue
            facts.scope_of[id(node)] = scope
            if (
                not facts.inference_only
                and facts.is_step_loop(node, scope)
                and not _smoke_test(node, tree, names)
                and not _lr_sweep(facts, scope)
                and not (notebook and _unrunnable(facts, node, tree, by_type))
            ):
                facts.step_loops.append(node)
                header: list[ast.AST] = [node.test] if isinstance(node, ast.While) else []
                roots.append(([*header, *node.body], scope))
            elif isinstance(node, (ast.For, ast.AsyncFor)) and facts.is_loader(node.iter):
                facts.eval_loops.append(node)
            elif any(
                facts.is_step_loop(n, scope) or facts._calls_step_loop(n, scope)
                for n in walk(node.body)
                if isinstance(n, (*LOOPS, ast.Call))
            ):
                facts.epoch_loops.append(node)
    queue += [
        f
        for f in tree.body
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name in entries
    ]
    for entry in entries:  # "Class.method": a method another file calls on its instance
        if "." in entry:
            cls, method = entry.split(".", 1)
            queue += [
                m
                for m in facts._methods(cls, method)
                if not (method == "forward" and evaluates_its_model(m))
            ]  # an explainer's forward, called in another file's loop: inference
    queue += _framework_steps(facts)
    facts.step_functions = _engine_steps(facts, by_type.get(ast.Call, ()))
    for function in facts.step_functions:
        facts.scope_of[id(function)] = function
    queue += facts.step_functions
    _mark_repeated(facts, tree)
    entered = {id(f) for f in queue}
    facts.decided = _plain_decided(facts, plain, names)
    _mark_all(facts, roots, queue)
    decided = _decided(facts, entered)
    if decided:  # again, without the branches no training call takes (and what they call)
        facts.hot, facts.callers = {}, {}
        facts.decided = {**facts.decided, **decided}
        _mark_all(facts, roots, queue)
    return facts


def _plain_decided(facts: LoopFacts, plain: set[str], names: Resolver) -> dict[int, str]:
    """The ``if isinstance(v, torch.Tensor):`` tests, on what they are given, of the functions
    and methods only plain values reach (:data:`PLAIN`): their ``else``, if any, is the branch
    taken. ``v`` is a parameter, or a loop's target over one (``for k, v in kwargs.items()``)."""
    out: dict[int, str] = {}
    for entry in plain:
        cls, _, method = entry.rpartition(".")
        functions = facts._methods(cls, method) if cls else facts.functions.get(method, [])
        for function in functions:
            given = _given_names(function)
            for node in walk(function.body):
                if isinstance(node, ast.If) and _tests_tensor(node.test, given, names):
                    out[id(node)] = "orelse"
    return out


def _given_names(function: Function) -> set[str]:
    """A function's parameters, and the targets of its loops over them (``for k, v in
    kwargs.items()``, ``for v in values``)."""
    arguments = function.args
    given = {
        a.arg
        for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)
        if a.arg not in ("self", "cls")
    }
    given |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    for node in walk(function.body):
        if not isinstance(node, ast.For):
            continue
        source = node.iter
        if (
            isinstance(source, ast.Call)
            and isinstance(source.func, ast.Attribute)
            and source.func.attr in ("items", "values")
        ):
            source = source.func.value
        if isinstance(source, ast.Name) and source.id in given:
            target = node.target
            if isinstance(target, ast.Tuple) and target.elts:
                target = target.elts[-1]
            if isinstance(target, ast.Name):
                given.add(target.id)
    return given


def _tests_tensor(test: ast.expr, given: set[str], names: Resolver) -> bool:
    """``isinstance(v, torch.Tensor)`` with ``v`` one of ``given``."""
    return (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "isinstance"
        and len(test.args) == 2
        and isinstance(test.args[0], ast.Name)
        and test.args[0].id in given
        and names.qualname(test.args[1]) == "torch.Tensor"
    )
