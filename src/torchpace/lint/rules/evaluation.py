"""TP403: evaluation loops that keep autograd on (catalogue family "evaluation")."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.lint.loops import (
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


RULES = (EVAL_LOOP_WITHOUT_NO_GRAD,)
