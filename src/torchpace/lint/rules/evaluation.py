"""TP403: evaluation loops that keep autograd on (catalogue family "evaluation")."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.lint.loops import (
    LOOPS,
    MODEL_NAME,
    Loop,
    LoopFacts,
    Scope,
    disables_grad,
    dotted,
    in_eval_mode,
    walk,
)
from torchpace.lint.rule import FileContext, Report, Rule


def _disables_grad(ctx: FileContext, expr: ast.expr) -> bool:
    return disables_grad(ctx.names, expr)


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
        if any(f is scope for f in ctx.loops.callees(call, ctx.enclosing_scope(call)))
    ]
    return bool(sites) and not all(grad_disabled(ctx, call) for call in sites)


def _a_module(facts: LoopFacts, name: str) -> bool:
    """``name`` holds a module: an instance of a class of this file, or of a torch.nn class."""
    owner = facts.instances.get(name, "")
    return owner in facts.classes or (
        owner.startswith("torch.nn.") and owner.rsplit(".", 1)[-1][:1].isupper()
    )


def called_models(ctx: FileContext, loop: Loop) -> set[str]:
    """The targets of calls in the loop that run a model: ``model(x)``, ``self.net(x)``."""
    facts = ctx.loops
    found = set()
    for node in walk(loop.body):
        if not isinstance(node, ast.Call):
            continue
        target = dotted(node.func)
        if target is None:
            continue
        if _a_module(facts, target) or MODEL_NAME.search(target.rsplit(".", 1)[-1]):
            found.add(target)
    return found


def _freezes_parameters(ctx: FileContext) -> bool:
    """The file turns autograd off per parameter (``requires_grad_(False)``): cannot tell."""
    for node in ctx.of_type(ast.Attribute):
        if node.attr == "requires_grad_" or (
            node.attr == "requires_grad" and isinstance(node.ctx, ast.Store)
        ):
            return True
    return False


def _check_eval_loop_without_no_grad(ctx: FileContext) -> Iterator[Report]:
    facts = ctx.loops
    if not facts.scope_of or _freezes_parameters(ctx):
        return
    for loop in ctx.of_type(ast.For, ast.AsyncFor, ast.While):
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
        models = called_models(ctx, loop)
        if not models:
            continue
        evaluated = models & in_eval_mode(scope, loop.lineno)
        over_loader = isinstance(loop, (ast.For, ast.AsyncFor)) and facts.is_loader(loop.iter)
        if (evaluated or over_loader) and _called_with_grad(ctx, scope):
            yield Report(loop)


# What may be done with a forward's output that only reads it: the graph autograd records for
# it is never used (issue 32: reinforcement learning's acting, 21 patterns in two repositories).
_TO_HOST = frozenset({"item", "tolist", "numpy"})  # a Python or NumPy value: no graph after it
_KEEPS_READING = frozenset({"cpu", "argmax", "argmin", "squeeze", "unsqueeze", "flatten", "view"})
_TO_INDEX = frozenset({"torch.argmax", "torch.argmin", "int", "float", "bool"})
_DISTRIBUTIONS = ("Categorical", "Bernoulli", "OneHotCategorical")  # sample() has no gradient


def _model_call(ctx: FileContext, call: ast.Call) -> bool:
    """``q_network(x)``, ``model.pi(x)``, ``actor.get_action(x)``: a module of this file, or
    one torch or the name says is a model, called or asked a method."""
    facts = ctx.loops
    target = dotted(call.func)
    if target is None:
        return False
    candidates = [target]
    if isinstance(call.func, ast.Attribute):
        base = dotted(call.func.value)
        if base is not None and base not in {"self", "cls", "torch", "F", "np"}:
            candidates.append(base)
    if any(_a_module(facts, name) for name in candidates):
        return True
    return bool(MODEL_NAME.search(target.split(".")[0])) and target.split(".")[0] != "self"


def _names_bound(ctx: FileContext, node: ast.AST) -> list[str] | None:
    """The plain names ``node``'s value is assigned to (``a, b = node``), or None."""
    parent = ctx.parents.get(id(node))
    if not (isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1):
        return None
    target = parent.targets[0]
    items = target.elts if isinstance(target, ast.Tuple) else [target]
    if not all(isinstance(t, ast.Name) for t in items):
        return None
    return [t.id for t in items if isinstance(t, ast.Name)]


def _only_read(ctx: FileContext, node: ast.AST, scope: Scope, depth: int = 0) -> bool:
    """Whether every use of the tensor ``node`` computes only values: ``.item()``, ``.cpu()``,
    ``argmax``, an index, a detached copy, or a distribution's ``sample()``; never kept for a
    backward (a stored log-probability, a loss, a list of outputs)."""
    if depth > 6:
        return False
    parent = ctx.parents.get(id(node))
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return _only_read(ctx, parent, scope, depth + 1)
    if isinstance(parent, ast.Attribute) and parent.value is node:
        call = ctx.parents.get(id(parent))
        if not (isinstance(call, ast.Call) and call.func is parent):
            return False
        if parent.attr in _TO_HOST or parent.attr == "detach":
            return True
        if parent.attr in _KEEPS_READING or parent.attr == "sample":
            return _only_read(ctx, call, scope, depth + 1)
        return False
    if isinstance(parent, ast.Call) and node in parent.args:
        name = ctx.names.qualname(parent.func) or dotted(parent.func) or ""
        if name in _TO_INDEX:
            return True
        if name.rsplit(".", 1)[-1] in _DISTRIBUTIONS:
            return _only_sampled(ctx, parent, scope, depth + 1)
        return False
    names = _names_bound(ctx, node)
    if names is None:
        return False
    for name in names:
        uses = _uses_after(ctx, name, node, scope)
        if not all(_only_read(ctx, use, scope, depth + 1) for use in uses):
            return False
    return True


def _only_sampled(ctx: FileContext, dist: ast.Call, scope: Scope, depth: int) -> bool:
    """A distribution built on a forward's output whose only use is ``.sample()``."""
    names = _names_bound(ctx, dist)
    uses: list[ast.AST] = [dist] if names is None else []
    for name in names or ():
        uses += _uses_after(ctx, name, dist, scope)
    for use in uses:
        parent = ctx.parents.get(id(use))
        if not (
            isinstance(parent, ast.Attribute) and parent.value is use and parent.attr == "sample"
        ):
            return False
    return True


def _uses_after(ctx: FileContext, name: str, node: ast.AST, scope: Scope) -> list[ast.AST]:
    """Reads of ``name`` in ``scope`` from ``node``'s line up to the name's next assignment
    (``actions = actions.cpu().numpy()`` reads the tensor once; later reads are of the array)."""
    line = getattr(node, "lineno", 0)
    named = [n for n in walk(scope.body) if isinstance(n, ast.Name) and n.id == name]
    stores = [n.lineno for n in named if isinstance(n.ctx, ast.Store) and n.lineno > line]
    until = min(stores, default=float("inf"))
    return [n for n in named if isinstance(n.ctx, ast.Load) and line <= n.lineno <= until]


def _check_acting_without_no_grad(ctx: FileContext) -> Iterator[Report]:
    """Reinforcement learning's acting: a forward run at every environment step with autograd
    on, whose outputs are only read (an action sampled, an argmax sent to the host)."""
    bound = ctx.env_bound
    if not bound or _freezes_parameters(ctx):
        return
    reported: set[int] = set()
    for call, _ in ctx.calls:
        if id(call) not in bound or not _model_call(ctx, call):
            continue
        if grad_disabled(ctx, call) or id(call) in ctx.loops.no_grad:
            continue
        scope = ctx.enclosing_scope(call)
        if not _called_with_grad(ctx, scope) or not _only_read(ctx, call, scope):
            continue
        loop = next((a for a in ctx.ancestors(call) if isinstance(a, LOOPS)), None)
        if loop is None or id(loop) in reported:
            continue  # a helper's forward (reported at its loop, if any, through the caller)
        reported.add(id(loop))
        yield Report(loop)


def _check_inference_without_no_grad(ctx: FileContext) -> Iterator[Report]:
    seen: set[int] = set()
    for report in [*_check_eval_loop_without_no_grad(ctx), *_check_acting_without_no_grad(ctx)]:
        if id(report.node) not in seen:
            seen.add(id(report.node))
            yield report


EVAL_LOOP_WITHOUT_NO_GRAD = Rule(
    code="TP403",
    name="eval-loop-without-no-grad",
    message=(
        "Evaluation or acting loop records autograd history it never uses (no `torch.no_grad()`)"
    ),
    technique="no-grad-eval",
    doc="""\
## What it does
Flags a loop that runs a model without training it (no `backward()` or optimizer step in it or
in the functions it calls) and is not under `torch.no_grad()`, `torch.inference_mode()` or
`torch.set_grad_enabled(False)`: a loop after `model.eval()`, or one over a DataLoader. A
function's loop is flagged only when the function is called in the same file without such a
context.

Also a reinforcement-learning loop that steps an environment and runs the policy or Q-network
at every step with autograd on, where the output is only read: an `argmax`, `.item()`, `.cpu()`,
a detached copy, or an action sampled from a `Categorical`. The update that trains the network
recomputes its outputs from the stored observations, so the graph recorded while acting is
never used. An output kept as it is (a log-probability stored for a later `backward()`, as
REINFORCE does) keeps the loop quiet.

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
and, when acting:
```python
with torch.no_grad():
    q_values = q_network(torch.as_tensor(obs, device=device))
actions = q_values.argmax(dim=1).cpu().numpy()
```

## Fix safety
No fix: code that calls `torch.autograd.grad` inside the loop (saliency maps, adversarial
examples) needs autograd on.

## References
PyTorch Performance Tuning Guide, "Disable gradient calculation for validation or inference".
""",
    check=_check_inference_without_no_grad,
)


RULES = (EVAL_LOOP_WITHOUT_NO_GRAD,)
