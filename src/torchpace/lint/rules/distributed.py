"""TP5xx: many devices."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.lint.loops import (
    EVAL_NAME,
    Loop,
    dotted,
    is_cadence_gate,
    root_name,
    strip_moves,
    walk,
)
from torchpace.lint.project import training_helpers
from torchpace.lint.rule import (
    FileContext,
    Report,
    Rule,
    argument,
    has_star_args,
    is_const,
    keyword,
)
from torchpace.lint.tree import subtree

_DDP = "torch.nn.parallel.DistributedDataParallel"
_SAMPLER = "torch.utils.data.DistributedSampler"


_DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel",
        "torch.nn.parallel.data_parallel.data_parallel",
    }
)


def _trains_anywhere(ctx: FileContext) -> bool:
    """The file calls ``backward()`` or an optimizer's ``step()``, or hands something to
    another project file's training function (YOLOv4's ``train.py`` wraps the model in
    DataParallel and hands it to ``utils_fit.fit_one_epoch``, whose loop steps)."""
    facts = ctx.loops
    return any(
        facts.is_backward(call) or facts.is_optimizer_step(call) for call, _ in ctx.calls
    ) or bool(training_helpers(ctx))


def _check_data_parallel(ctx: FileContext) -> Iterator[Report]:
    # and a class of the file derived from it (StyleTTS2's ``class MyDataParallel(
    # torch.nn.DataParallel)``, which only forwards attribute lookups to the module)
    derived = {
        node.name
        for node in ctx.of_type(ast.ClassDef)
        if any(ctx.names.qualname(b) in _DATA_PARALLEL for b in node.bases)
    }
    found = [
        call
        for call, name in ctx.calls
        if name in _DATA_PARALLEL
        or (name is None and isinstance(call.func, ast.Name) and call.func.id in derived)
    ]
    if found and _trains_anywhere(ctx) and not _one_visible_device(ctx):
        # an inference script gains nothing from DDP's backward
        for call in found:
            if _one_device_id(ctx, call):
                continue  # ``DataParallel(model, device_ids=[0])``: it only calls the module
            if not _for_inference(ctx, call) and not _only_infers(ctx, call):
                yield Report(call.func)


def _one_device_id(ctx: FileContext, call: ast.Call) -> bool:
    """``device_ids`` is a list or tuple of one device (``[0]``, ``[args.gpu]``: one element,
    one device); given by position only to the module (the functional form's second argument is
    the inputs)."""
    functional = (ctx.names.qualname(call.func) or "").endswith("data_parallel")
    given = keyword(call, "device_ids")
    ids = (given.value if given else None) if functional else argument(call, "device_ids", 1)
    return (
        isinstance(ids, (ast.List, ast.Tuple))
        and len(ids.elts) == 1
        and not any(isinstance(e, ast.Starred) for e in ids.elts)
    )


def _one_visible_device(ctx: FileContext) -> bool:
    """The file sets ``os.environ["CUDA_VISIBLE_DEVICES"]`` to one device, a literal such as
    ``"0"``, at its top level and nowhere else (not under ``if args.debug:``): DataParallel
    then sees one GPU and only calls the module."""
    if b"CUDA_VISIBLE_DEVICES" not in ctx.source:
        return False
    assigned = [
        node
        for node in ctx.of_type(ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Subscript)
        and ctx.names.qualname(target.value) == "os.environ"
        and isinstance(target.slice, ast.Constant)
        and target.slice.value == "CUDA_VISIBLE_DEVICES"
    ]
    return bool(assigned) and all(
        ctx.parents.get(id(node)) is ctx.tree
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and node.value.value.strip().isdigit()
        for node in assigned
    )


def _for_inference(ctx: FileContext, call: ast.Call) -> bool:
    """``call`` wraps a model in a function that puts a model in evaluation mode and trains
    nothing itself, nor hands the model back: DDIM's ``Diffusion.sample()``, in the file whose
    ``train()`` trains it, loads a checkpoint into a DataParallel model only to sample."""
    scope = ctx.enclosing_scope(call)
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    facts = ctx.loops
    handing = {id(c) for c, _ in training_helpers(ctx)}
    evaluates = False
    for node in subtree(scope):
        if isinstance(node, ast.Return) and node.value is not None:
            return False
        if isinstance(node, ast.Call):
            if facts.is_backward(node) or facts.is_optimizer_step(node) or id(node) in handing:
                return False  # it trains, itself or through another file's function
            func = node.func
            evaluates |= isinstance(func, ast.Attribute) and func.attr == "eval" and not node.args
    return evaluates


def _only_infers(ctx: FileContext, call: ast.Call) -> bool:
    """``net_sampler = DataParallel(net_sampler)`` where every later use of the name runs it
    without autograd (``with torch.no_grad(): x_0 = net_sampler(x_T)``) or hands it to an
    evaluation function (``evaluate(net_sampler, net_model)``): a DDPM trainer's samplers,
    wrapped beside the module it trains, only ever sample."""
    from torchpace.lint.rules.evaluation import grad_disabled

    parent = ctx.parents.get(id(call))
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1):
        return False
    name = dotted(parent.targets[0])
    if name is None or "." in name:
        return False
    scope = ctx.enclosing_scope(call)
    # after the wrap in its scope; in a function that reads the name as a global, at any line
    # (``def train(epoch):`` above ``__main__`` trains the global ``model``)
    uses = [
        n
        for n in ctx.of_type(ast.Name)
        if n.id == name
        and isinstance(n.ctx, ast.Load)
        and (
            (ctx.enclosing_scope(n) is scope and n.lineno > parent.lineno)
            or (isinstance(scope, ast.Module) and _reads_global(ctx, n))
        )
    ]
    if not uses:
        return False
    for use in uses:
        if grad_disabled(ctx, use):
            continue
        holder = ctx.parents.get(id(use))
        callee = holder.func if isinstance(holder, ast.Call) and use in holder.args else None
        last = (dotted(callee) or "").rsplit(".", 1)[-1] if callee is not None else ""
        if not (last and EVAL_NAME.search(last)):
            return False
    return True


def _reads_global(ctx: FileContext, name: ast.Name) -> bool:
    """``name`` is read in a function that neither takes nor binds it: the module's."""
    function = ctx.enclosing_scope(name)
    if isinstance(function, ast.Module):
        return False
    args = function.args
    given = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    bound = any(
        isinstance(n, ast.Name) and n.id == name.id and isinstance(n.ctx, ast.Store)
        for n in subtree(function)
    )
    return name.id not in given and not bound


DATA_PARALLEL = Rule(
    code="TP501",
    name="data-parallel",
    message="`nn.DataParallel` runs one process for all GPUs; use DistributedDataParallel",
    technique="ddp-not-dp",
    doc="""\
## What it does
Flags `torch.nn.DataParallel(...)` (also a class of the file derived from it) and the
functional `torch.nn.parallel.data_parallel(...)` in
a file that trains (calls `backward()` or an optimizer's `step()`, or hands something to
another project file's training function, `fit_one_epoch(model_train, ...)`); inference and
evaluation scripts are left alone, and so is a function of a training file that wraps a model
only to evaluate or sample with it (it calls `.eval()`, trains nothing and returns nothing), and a
model wrapped under a name that every later use runs without autograd or hands to a function
named for evaluation or sampling (a DDPM trainer's `net_sampler = DataParallel(net_sampler)`,
then `with torch.no_grad(): x_0 = net_sampler(x_T)` and `evaluate(net_sampler, net_model)`).
Nor DataParallel on one device: `device_ids` of one element (`device_ids=[0]`), or a file that
sets `os.environ["CUDA_VISIBLE_DEVICES"]` to one device (`"0"`) at its top level and nowhere
else (not under `if args.debug:`): the wrapper
then only calls the module, and there is no second GPU for DDP to drive.

## Why is this slow
DataParallel drives every GPU from one Python process: it copies the model to each device on
every forward, gathers outputs on the first GPU and is held back by the GIL. DistributedDataParallel
runs one process per GPU and overlaps the gradient all-reduce with the backward pass.

## Example
```python
model = nn.DataParallel(model)
```

## Use instead
```python
# launched with: torchrun --nproc-per-node=N train.py
torch.distributed.init_process_group("nccl")
model = nn.parallel.DistributedDataParallel(model.to(local_rank), device_ids=[local_rank])
```

## Fix safety
No fix: moving to DistributedDataParallel changes how the script is launched and needs a
sampler per process.

## References
PyTorch Performance Tuning Guide, "Use efficient data-parallel backend".
""",
    check=_check_data_parallel,
)


def _check_find_unused(ctx: FileContext) -> Iterator[Report]:
    for call, name in ctx.calls:
        if name == _DDP:
            kw = keyword(call, "find_unused_parameters")
            if kw is not None and is_const(kw.value, True) and not _frozen_after(ctx, call):
                yield Report(kw)


def _frozen_after(ctx: FileContext, wrap: ast.Call) -> bool:
    """The wrapped model's parameters have their gradients turned off or on after the wrap:
    ``p.requires_grad = False`` for ``p`` over the model's ``parameters()`` (or a submodule's),
    or ``model.backbone.requires_grad_(False)``, later in the function that wraps it, or in an
    epoch or step loop (a backbone frozen for the first epochs, then thawed). DDP registered
    those parameters, so in the steps they get no gradient it needs
    ``find_unused_parameters=True``; frozen before the wrap, DDP never registers them. Not an
    input's ``requires_grad_`` (a gradient penalty), nor another module's (a frozen teacher)."""
    scope = ctx.enclosing_scope(wrap)
    models = _model_names(ctx, wrap, scope)
    if not models:
        return False
    training = {id(loop) for loop in (*ctx.loops.epoch_loops, *ctx.loops.step_loops)}
    for node in ctx.of_type(ast.Assign, ast.Call):
        owners: list[ast.expr | None]
        if isinstance(node, ast.Assign):
            owners = [
                _parameters_of(ctx, t.value)
                for t in node.targets
                if isinstance(t, ast.Attribute) and t.attr == "requires_grad"
            ]
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_":
            owners = [node.func.value]
        else:
            continue
        if not any(o is not None and root_name(o) in models for o in owners):
            continue
        same = ctx.enclosing_scope(node) is scope and node.lineno > wrap.lineno
        if same or any(id(a) in training for a in ctx.ancestors(node)):
            return True
    return False


def _model_names(ctx: FileContext, wrap: ast.Call, scope: ast.AST) -> set[str]:
    """The names the wrapped model goes by in ``scope``: what DDP is given, what its result is
    bound to, and names bound to one another (``model_train = model.train()``)."""
    names: set[str] = set()
    given = wrap.args[0] if wrap.args else None
    if given is not None and (root := root_name(strip_moves(given))) is not None:
        names.add(root)
    parent = ctx.parents.get(id(wrap))
    if isinstance(parent, ast.Assign):
        names |= {t for t in map(dotted, parent.targets) if t is not None and "." not in t}
    for _ in range(2):
        for node in subtree(scope):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target, value = dotted(node.targets[0]), root_name(strip_moves(node.value))
            if target is None or value is None:
                continue
            if value in names or target in names:
                names |= {target, value}
    return names


def _parameters_of(ctx: FileContext, owner: ast.expr) -> ast.expr | None:
    """For ``p`` in ``p.requires_grad = ...``, a loop variable over ``m.parameters()`` (or
    ``named_parameters()``): ``m``; else None (``p`` is no parameter this reads)."""
    if not isinstance(owner, ast.Name):
        return None
    for loop in ctx.ancestors(owner):
        if not isinstance(loop, (ast.For, ast.comprehension)):
            continue
        targets = {n.id for n in subtree(loop.target) if isinstance(n, ast.Name)}
        source = loop.iter
        if owner.id in targets and isinstance(source, ast.Call):
            func = source.func
            if isinstance(func, ast.Attribute) and func.attr in _PARAMETER_LISTS:
                return func.value
    return None


_PARAMETER_LISTS = frozenset({"parameters", "named_parameters"})


FIND_UNUSED_PARAMETERS = Rule(
    code="TP503",
    name="ddp-find-unused-parameters",
    message="`find_unused_parameters=True` walks the autograd graph after every forward",
    technique="ddp-unused-params",
    doc="""\
## What it does
Flags `DistributedDataParallel(..., find_unused_parameters=True)`.

## Why is this slow
DDP then traverses the autograd graph after each forward to mark the parameters that will get no
gradient, and buckets follow constructor order instead of the order gradients arrive, which
reduces the overlap of all-reduce with backward.

## Example
```python
model = DistributedDataParallel(model, device_ids=[rank], find_unused_parameters=True)
```

## Use instead
```python
model = DistributedDataParallel(model, device_ids=[rank])
```
Keep it only when some parameters really get no gradient in a step; DDP raises an error that
says so when they do.

Not where the file turns parameters' gradients off or on after the wrap (`p.requires_grad =
False`, `module.requires_grad_(False)` on a later line or in an epoch loop: a backbone frozen
for the first epochs): DDP registered them, and in the steps they get no gradient it needs the
setting.

## Fix safety
No fix: a model with parameters unused in some steps needs the setting.

## References
PyTorch Performance Tuning Guide, "Match the order of layers in constructors and during the
execution if using DistributedDataParallel(find_unused_parameters=True)".
""",
    check=_check_find_unused,
)


def _uses_attribute(ctx: FileContext, *names: str) -> bool:
    return any(n.attr in names for n in ctx.of_type(ast.Attribute))


def _steps_on_some_iterations(ctx: FileContext, loop: Loop) -> bool:
    """True when the optimizer steps only every N iterations: gradient accumulation.

    Either the step is under ``if i % n == 0:``, or the body skips ahead first with
    ``if i % n != 0: continue``.
    """
    facts = ctx.loops
    for node in walk(loop.body):
        if isinstance(node, ast.Call) and facts.is_optimizer_step(node):
            for ancestor in ctx.ancestors(node):
                if ancestor is loop:
                    break
                if isinstance(ancestor, ast.If) and is_cadence_gate(ancestor.test):
                    return True
    for i, stmt in enumerate(loop.body):
        if (
            isinstance(stmt, ast.If)
            and is_cadence_gate(stmt.test)
            and any(isinstance(s, ast.Continue) for s in stmt.body)
        ):
            later = walk(loop.body[i + 1 :])
            return any(isinstance(n, ast.Call) and facts.is_optimizer_step(n) for n in later)
    return False


def _check_accumulation_without_no_sync(ctx: FileContext) -> Iterator[Report]:
    if not any(name == _DDP for _, name in ctx.calls):
        return
    if _uses_attribute(ctx, "no_sync", "require_backward_grad_sync"):
        return
    facts = ctx.loops
    for loop in facts.step_loops:
        if not _steps_on_some_iterations(ctx, loop):
            continue
        for node in walk(loop.body):
            if (
                isinstance(node, ast.Call)
                and facts.is_backward(node)
                and not _steps_after_each(ctx, node, loop)
            ):
                yield Report(node)


def _steps_after_each(ctx: FileContext, backward: ast.Call, loop: Loop) -> bool:
    """``backward`` is followed, in the blocks that hold it, by an optimizer step on every pass,
    ungated (Swin's and RepVGG's ``else:`` taken when ``ACCUMULATION_STEPS <= 1``): that branch
    accumulates nothing, and each all-reduce is needed. Only the statements after it are read,
    not a sibling branch of an ``if`` around it."""
    facts = ctx.loops
    child: ast.AST = backward
    for ancestor in ctx.ancestors(backward):
        if ancestor is loop:
            return False
        if isinstance(ancestor, ast.stmt) and isinstance(child, ast.stmt):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(ancestor, field, None)
                if isinstance(block, list) and any(s is child for s in block):
                    after = block[[id(s) for s in block].index(id(child)) + 1 :]
                    for node in walk(after):
                        if (
                            isinstance(node, ast.Call)
                            and facts.is_optimizer_step(node)
                            and not _gated_below(ctx, node, ancestor)
                        ):
                            return True
        child = ancestor
    return False


def _gated_below(ctx: FileContext, node: ast.AST, top: ast.AST) -> bool:
    """A cadence gate (``if (i + 1) % n == 0:``) stands between ``node`` and ``top``."""
    for ancestor in ctx.ancestors(node):
        if ancestor is top:
            return False
        if isinstance(ancestor, ast.If) and is_cadence_gate(ancestor.test):
            return True
    return False


ACCUMULATION_WITHOUT_NO_SYNC = Rule(
    code="TP502",
    name="ddp-accumulation-without-no-sync",
    message="Gradient accumulation on a DDP model all-reduces on every micro-batch",
    technique="ddp-no-sync",
    doc="""\
## What it does
Flags `backward()` in a loop that steps the optimizer only every N iterations (gradient
accumulation) in a file that wraps its model in `DistributedDataParallel` and never uses
`no_sync()`. Not a `backward()` in a branch that steps the optimizer after it on every pass
(`else: loss.backward(); optimizer.step()` beside an accumulating branch): there each all-reduce
is needed.

## Why is this slow
DDP all-reduces the gradients during every backward. With accumulation only the last
micro-batch's all-reduce is needed; the others move the whole gradient across the network for
nothing.

## Example
```python
model = DistributedDataParallel(model, device_ids=[rank])
for i, (x, y) in enumerate(loader):
    loss_fn(model(x), y).backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
```

## Use instead
```python
for i, (x, y) in enumerate(loader):
    sync = (i + 1) % accum == 0
    with contextlib.nullcontext() if sync else model.no_sync():
        loss_fn(model(x), y).backward()
    if sync:
        optimizer.step()
        optimizer.zero_grad()
```

## Fix safety
No fix: the context must wrap the forward as well as the backward, which needs restructuring.

## References
PyTorch Performance Tuning Guide, "Skip unnecessary all-reduce if training with
DistributedDataParallel and gradient accumulation".
""",
    check=_check_accumulation_without_no_sync,
)


def _check_sampler_without_set_epoch(ctx: FileContext) -> Iterator[Report]:
    facts = ctx.loops
    several_epochs = bool(facts.epoch_loops) or any(
        id(loop) in facts.repeated for loop in facts.step_loops
    )
    if not several_epochs or _uses_attribute(ctx, "set_epoch"):
        return
    for call, name in ctx.calls:
        if name != _SAMPLER or has_star_args(call) or _for_evaluation(ctx, call):
            continue
        shuffle = keyword(call, "shuffle")
        if shuffle is None or is_const(shuffle.value, True):
            yield Report(call)


def _for_evaluation(ctx: FileContext, call: ast.Call) -> bool:
    """The sampler serves evaluation, whose order changes nothing: it is built under
    ``torch.no_grad()`` or in a function named for evaluation (tacotron2's ``validate``), or
    its name or its dataset's says so (``val_sampler``, ``DistributedSampler(val_set)``)."""
    if id(call) in ctx.loops.no_grad:
        return True
    scope = ctx.enclosing_scope(call)
    if not isinstance(scope, ast.Module) and EVAL_NAME.search(scope.name):
        return True
    parent = ctx.parents.get(id(call))
    names = [dotted(call.args[0]) if call.args else None]
    if isinstance(parent, ast.Assign):
        names += [dotted(t) for t in parent.targets]
    return any(n is not None and EVAL_NAME.search(n.rsplit(".", 1)[-1]) for n in names)


SAMPLER_WITHOUT_SET_EPOCH = Rule(
    code="TP504",
    name="distributed-sampler-without-set-epoch",
    message="DistributedSampler repeats the same order every epoch without `set_epoch()`",
    technique="sampler-set-epoch",
    doc="""\
## What it does
Flags a shuffling `DistributedSampler` in a file that trains for several epochs and never calls
`set_epoch()`. Not a sampler for evaluation, whose order changes nothing: one built under
`torch.no_grad()` or in a function named for evaluation (`validate`), or named so itself or by
its dataset (`val_sampler`, `DistributedSampler(val_set)`).

## Why is this slow
The sampler seeds its shuffle with `seed + epoch`, and the epoch only changes through
`set_epoch`. Without it every epoch sees the samples in the same order, so the model gets less
variety per step and usually needs more steps to reach the same loss.

## Example
```python
sampler = DistributedSampler(train_set)
loader = DataLoader(train_set, batch_size=64, sampler=sampler)
for epoch in range(epochs):
    for x, y in loader:
        train_step(x, y)
```

## Use instead
```python
for epoch in range(epochs):
    sampler.set_epoch(epoch)
    for x, y in loader:
        train_step(x, y)
```

## Fix safety
No fix: the sampler may be reached through another name or object.

## References
PyTorch docs, `torch.utils.data.distributed.DistributedSampler` ("calling the set_epoch()
method at the beginning of each epoch ... is necessary to make shuffling work properly");
catalogue entry `sampler-set-epoch` (measured).
""",
    check=_check_sampler_without_set_epoch,
)

RULES = (
    DATA_PARALLEL,
    ACCUMULATION_WITHOUT_NO_SYNC,
    FIND_UNUSED_PARAMETERS,
    SAMPLER_WITHOUT_SET_EPOCH,
)
