"""Loop-aware rules of several families, to be moved into their family modules."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.lint.loops import MODEL_NAME, Loop, Scope, dotted, iterated, walk
from torchpace.lint.rule import (
    FileContext,
    Report,
    Rule,
    argument,
    has_star_args,
    is_const,
    keyword,
)

# TP103 ------------------------------------------------------------------------------------------


def _unpinned(calls: list[ast.Call]) -> bool:
    """True when none of these DataLoader calls can pin memory."""
    for call in calls:
        pin = keyword(call, "pin_memory")
        if has_star_args(call) or (pin is not None and not is_const(pin.value, False)):
            return False
    return True


def _batch_names(target: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _check_non_blocking_unpinned(ctx: FileContext) -> Iterator[Report]:
    facts = ctx.loops
    if not facts.loader_calls:
        return
    for node in ctx.nodes:
        if not isinstance(node, (ast.For, ast.AsyncFor)):
            continue
        name = dotted(iterated(node.iter))
        calls = facts.loader_calls.get(name or "")
        if not calls or not _unpinned(calls):
            continue
        batch = _batch_names(node.target)
        for call in walk(node.body):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr in {"to", "cuda"}
            ):
                continue
            flag = keyword(call, "non_blocking")
            receiver = call.func.value
            while isinstance(receiver, ast.Subscript):
                receiver = receiver.value  # batch[0], batch["x"]
            if (
                flag is not None
                and is_const(flag.value, True)
                and isinstance(receiver, ast.Name)
                and receiver.id in batch
            ):
                yield Report(flag)


NON_BLOCKING_UNPINNED = Rule(
    code="TP103",
    name="non-blocking-copy-from-pageable-memory",
    message="`non_blocking=True` cannot overlap the copy: the loader does not pin its batches",
    technique="pinned-memory",
    doc="""\
## What it does
Flags `.to(..., non_blocking=True)` and `.cuda(non_blocking=True)` on the batches of a
`DataLoader` created without `pin_memory=True`.

## Why is this slow
A copy from ordinary (pageable) host memory cannot run asynchronously: the driver first stages
it through a pinned buffer, and the host waits. `non_blocking=True` only overlaps the copy with
compute when the source is pinned, so here it promises an overlap that never happens.

## Example
```python
loader = DataLoader(train_set, batch_size=64, num_workers=4)
for x, y in loader:
    x = x.to(device, non_blocking=True)
```

## Use instead
```python
loader = DataLoader(train_set, batch_size=64, num_workers=4, pin_memory=True)
for x, y in loader:
    x = x.to(device, non_blocking=True)
```

## Fix safety
No fix: pinning memory takes page-locked host memory, which the author should budget.

## References
PyTorch Performance Tuning Guide, "Enable async data loading and augmentation" (pin_memory);
"PyTorch | Tricks for Faster Training", on `a.cuda(non_blocking=True)` with pinned memory.
""",
    check=_check_non_blocking_unpinned,
)


# TP104 ------------------------------------------------------------------------------------------

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, ...)
_NUM_WORKERS_POSITION = 5


def _check_workers_not_persistent(ctx: FileContext) -> Iterator[Report]:
    facts = ctx.loops
    if not facts.loader_calls:
        return
    repeated_loaders = {
        dotted(iterated(loop.iter))
        for loop in ctx.nodes
        if isinstance(loop, (ast.For, ast.AsyncFor)) and id(loop) in facts.repeated
    }
    for name, calls in facts.loader_calls.items():
        if name not in repeated_loaders:
            continue
        for call in calls:
            workers = argument(call, "num_workers", _NUM_WORKERS_POSITION)
            if has_star_args(call) or not (
                isinstance(workers, ast.Constant)
                and type(workers.value) is int
                and workers.value > 0
            ):
                continue
            persistent = keyword(call, "persistent_workers")
            if persistent is None or is_const(persistent.value, False):
                yield Report(call)


WORKERS_NOT_PERSISTENT = Rule(
    code="TP104",
    name="dataloader-workers-restarted-every-epoch",
    message="DataLoader workers are started again at every epoch (no `persistent_workers`)",
    technique="persistent-workers",
    doc="""\
## What it does
Flags a `DataLoader` with a literal `num_workers > 0` and no `persistent_workers=True` that is
iterated inside another loop, such as an epoch loop.

## Why is this slow
Each `for batch in loader` starts `num_workers` new processes, which import, copy the dataset
and warm up before the first batch arrives; the device idles meanwhile, at the start of every
epoch.

## Example
```python
loader = DataLoader(train_set, batch_size=64, num_workers=8)
for epoch in range(epochs):
    for x, y in loader:
        train_step(x, y)
```

## Use instead
```python
loader = DataLoader(train_set, batch_size=64, num_workers=8, persistent_workers=True)
```

## Fix safety
No fix: persistent workers keep their copy of the dataset and their memory between epochs, and
a dataset that changes between epochs must then be changed in the workers.

## References
PyTorch docs, `torch.utils.data.DataLoader` (`persistent_workers`); catalogue entry
`persistent-workers`.
""",
    check=_check_workers_not_persistent,
)


# TP403 ------------------------------------------------------------------------------------------

_NO_GRAD = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.inference_mode",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.inference_mode",
    }
)


def _disables_grad(ctx: FileContext, expr: ast.expr) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)``."""
    target = expr.func if isinstance(expr, ast.Call) else expr
    qual = ctx.names.qualname(target)
    if qual in _NO_GRAD:
        return True
    if qual == "torch.set_grad_enabled" and isinstance(expr, ast.Call):
        return bool(expr.args) and is_const(expr.args[0], False)
    return False


def grad_disabled(ctx: FileContext, node: ast.AST) -> bool:
    """Whether ``node`` runs under a ``with`` or a decorator that disables autograd, within its
    own function."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (ast.With, ast.AsyncWith)) and any(
            _disables_grad(ctx, item.context_expr) for item in ancestor.items
        ):
            return True
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return any(_disables_grad(ctx, d) for d in ancestor.decorator_list)
    return False


def _called_with_grad(ctx: FileContext, scope: Scope) -> bool:
    """For a function: it is called in this file, and at least once with autograd on."""
    if isinstance(scope, ast.Module):
        return True
    sites = [
        call
        for call, _ in ctx.calls
        if any(f is scope for f in ctx.loops.callees(call, _scope_of(ctx, call)))
    ]
    return bool(sites) and not all(grad_disabled(ctx, call) for call in sites)


def _scope_of(ctx: FileContext, node: ast.AST) -> Scope:
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return ancestor
    return ctx.tree


def _module_calls(ctx: FileContext, loop: Loop, scope: Scope) -> set[str]:
    """The targets of calls in the loop that run a model: ``model(x)``, ``self.net(x)``."""
    facts = ctx.loops
    found = set()
    for node in walk(loop.body):
        if not isinstance(node, ast.Call):
            continue
        target = dotted(node.func)
        if target is None:
            continue
        owner = facts.instances.get(target, "")
        if (
            owner in facts.classes
            or (owner.startswith("torch.nn.") and owner.rsplit(".", 1)[-1][:1].isupper())
            or MODEL_NAME.search(target.rsplit(".", 1)[-1])
        ):
            found.add(target)
    return found


def _put_in_eval(ctx: FileContext, scope: Scope, before: int) -> set[str]:
    """Modules switched to eval mode in ``scope`` before line ``before`` (and not back)."""
    mode: dict[str, tuple[int, str]] = {}
    for node in walk(scope.body):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"eval", "train"}
            and node.lineno < before
        ):
            target = dotted(node.func.value)
            if target is not None and node.lineno >= mode.get(target, (0, ""))[0]:
                mode[target] = (node.lineno, node.func.attr)
    return {t for t, (_, m) in mode.items() if m == "eval"}


def _freezes_parameters(ctx: FileContext) -> bool:
    """The file turns autograd off per parameter (``requires_grad_(False)``): cannot tell."""
    for node in ctx.nodes:
        if isinstance(node, ast.Attribute) and (
            node.attr == "requires_grad_"
            or (node.attr == "requires_grad" and isinstance(node.ctx, ast.Store))
        ):
            return True
    return False


def _check_eval_loop_without_no_grad(ctx: FileContext) -> Iterator[Report]:
    facts = ctx.loops
    if not facts.scope_of or _freezes_parameters(ctx):
        return
    for loop in ctx.nodes:
        scope = facts.scope_of.get(id(loop))
        if scope is None:
            continue
        assert isinstance(loop, (ast.For, ast.AsyncFor, ast.While))
        if facts.trains(loop.body, scope) or grad_disabled(ctx, loop):
            continue
        if any(
            isinstance(n, (ast.With, ast.AsyncWith)) and grad_disabled(ctx, n.body[0])
            for n in walk(loop.body)
        ):
            continue
        models = _module_calls(ctx, loop, scope)
        if not models:
            continue
        evaluated = models & _put_in_eval(ctx, scope, loop.lineno)
        over_loader = isinstance(loop, (ast.For, ast.AsyncFor)) and facts.is_loader(loop.iter)
        if (evaluated or over_loader) and _called_with_grad(ctx, scope):
            yield Report(loop)


EVAL_LOOP_WITHOUT_NO_GRAD = Rule(
    code="TP403",
    name="eval-loop-without-no-grad",
    message="Evaluation loop records autograd history it never uses (no `torch.no_grad()`)",
    technique="no-grad-eval",
    doc="""\
## What it does
Flags a loop that runs a model without training it (no `backward()` or optimizer step in it or
in the functions it calls) and is not under `torch.no_grad()`, `torch.inference_mode()` or
`torch.set_grad_enabled(False)`: a loop after `model.eval()`, or one over a DataLoader. A
function's loop is flagged only when the function is called in the same file without such a
context.

## Why is this slow
With autograd on, every operation saves its inputs for a backward pass that never comes, so
the loop allocates and keeps activation memory and does bookkeeping work per operation. Under
`no_grad` the same forward uses less memory, which also allows larger evaluation batches.

## Example
```python
model.eval()
for x, y in val_loader:
    correct += (model(x).argmax(1) == y).sum()
```

## Use instead
```python
model.eval()
with torch.no_grad():
    for x, y in val_loader:
        correct += (model(x).argmax(1) == y).sum()
```

## Fix safety
No fix: code that calls `torch.autograd.grad` inside the loop (saliency maps, adversarial
examples) needs autograd on.

## References
PyTorch Performance Tuning Guide, "Disable gradient calculation for validation or inference".
""",
    check=_check_eval_loop_without_no_grad,
)


# TP602 ------------------------------------------------------------------------------------------

_PROFILERS = frozenset(
    {
        "torch.profiler.profile",
        "torch.autograd.profiler.profile",
        "torch.autograd.profiler.emit_nvtx",
    }
)


def _check_profiler_without_schedule(ctx: FileContext) -> Iterator[Report]:
    if not any(name in _PROFILERS for _, name in ctx.calls):
        return
    facts = ctx.loops
    step_loops = {id(loop) for loop in facts.step_loops}
    for node in ctx.nodes:
        if not isinstance(node, (ast.With, ast.AsyncWith)):
            continue
        scope = _scope_of(ctx, node)
        wraps_training = any(
            id(n) in step_loops
            or (
                isinstance(n, ast.Call)
                and any(facts.function_has_step_loop(f) for f in facts.callees(n, scope))
            )
            for n in walk(node.body)
        )
        if not wraps_training:
            continue
        for item in node.items:
            call = item.context_expr
            if not isinstance(call, ast.Call) or ctx.names.qualname(call.func) not in _PROFILERS:
                continue
            if has_star_args(call) or keyword(call, "schedule") is not None:
                continue
            yield Report(call)


PROFILER_WITHOUT_SCHEDULE = Rule(
    code="TP602",
    name="profiler-around-whole-training",
    message="A profiler records every step of the training loop (no `schedule`)",
    technique="disable-debug-apis",
    doc="""\
## What it does
Flags `torch.profiler.profile(...)` without a `schedule`, and `torch.autograd.profiler.profile`
or `emit_nvtx`, used as a `with` block around a whole training loop.

## Why is this slow
The profiler records every operator of every step, which slows each step and grows memory
until the loop ends. A schedule profiles a few steps after a warm-up and records nothing
otherwise.

## Example
```python
with torch.profiler.profile() as prof:
    for x, y in loader:
        train_step(x, y)
```

## Use instead
```python
schedule = torch.profiler.schedule(wait=5, warmup=2, active=3, repeat=1)
with torch.profiler.profile(schedule=schedule) as prof:
    for x, y in loader:
        train_step(x, y)
        prof.step()
```

## Fix safety
No fix: which steps to record is the author's choice.

## References
PyTorch Performance Tuning Guide, "Disable debugging APIs"; PyTorch docs,
`torch.profiler.schedule`.
""",
    check=_check_profiler_without_schedule,
)

# TP302 ------------------------------------------------------------------------------------------

_AUTOCASTS = frozenset(
    {"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast"}
)
# The file runs in reduced precision some other way, or through a framework that may: cannot tell.
_OTHER_PRECISION_ATTRS = frozenset({"half", "bfloat16", "float16"})
_FRAMEWORKS = ("accelerate", "lightning", "pytorch_lightning", "deepspeed", "transformers")


def _manages_precision(ctx: FileContext) -> bool:
    for node in ctx.nodes:
        if isinstance(node, ast.Attribute) and node.attr in _OTHER_PRECISION_ATTRS:
            return True
        if (
            isinstance(node, ast.Call)
            and ctx.names.qualname(node.func) == "torch.set_default_dtype"
        ):
            return True
    imported = ctx.names.bindings.values()
    if any(path.split(".")[0] in _FRAMEWORKS for path in imported):
        return True
    return any(
        ctx.names.qualname(n) in _AUTOCASTS
        for n in ctx.nodes
        if isinstance(n, (ast.Name, ast.Attribute))
    )


def _check_cuda_loop_without_autocast(ctx: FileContext) -> Iterator[Report]:
    from torchpace.lint.device import uses_cuda

    facts = ctx.loops
    training = [
        loop for loop in facts.step_loops if facts.trains(loop.body, facts.scope_of[id(loop)])
    ]
    if not training or _manages_precision(ctx) or not uses_cuda(ctx):
        return
    # One finding per file, on the first training loop: the fix is one change.
    yield Report(min(training, key=lambda loop: loop.lineno))


CUDA_LOOP_WITHOUT_AUTOCAST = Rule(
    code="TP302",
    name="cuda-training-without-autocast",
    message="The CUDA training loop runs every op in float32 (no autocast)",
    technique="amp-bf16",
    doc="""\
## What it does
Flags the first training loop of a file that trains on CUDA and never uses `torch.autocast`
(nor `.half()` / `.bfloat16()` / float16 dtypes, nor a framework that manages precision).

## Why is this slow
Tensor cores run bfloat16 and float16 matrix multiplies and convolutions many times faster
than float32, and half-width activations halve the memory traffic. Without autocast every op
runs in float32.

## Example
```python
for x, y in loader:
    loss = loss_fn(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
```

## Use instead
```python
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
```
On GPUs without bfloat16 (before Ampere), use `dtype=torch.float16` with a
`torch.amp.GradScaler("cuda")`.

## Fix safety
No fix: reduced precision changes the numerics; check that training still converges (`torchpace
tune` does).

## References
PyTorch Performance Tuning Guide, "Use mixed precision and AMP"; "Techniques to make PyTorch
code run faster on GPUs", mixed precision with `autocast` and `GradScaler`.
""",
    check=_check_cuda_loop_without_autocast,
)

RULES = (
    CUDA_LOOP_WITHOUT_AUTOCAST,
    NON_BLOCKING_UNPINNED,
    WORKERS_NOT_PERSISTENT,
    EVAL_LOOP_WITHOUT_NO_GRAD,
    PROFILER_WITHOUT_SCHEDULE,
)
