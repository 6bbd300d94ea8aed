"""TP403: evaluation loops, and reinforcement learning's acting loops, that keep autograd on
(catalogue family "evaluation")."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.lint.device import may_use_accelerator
from torchpace.lint.environment import made_envs, steps_env
from torchpace.lint.loops import (
    MODEL_NAME,
    Function,
    Loop,
    LoopFacts,
    Scope,
    Step,
    assignments,
    disables_grad,
    dotted,
    in_eval_mode,
    strip_moves,
    walk,
)
from torchpace.lint.rule import FileContext, Report, Rule
from torchpace.lint.scale import SMALL_MODELS_DOC, TINY_WEIGHTS, model_weights
from torchpace.lint.tree import children, subtree


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
    sites = ctx.call_sites.get(id(scope), [])
    return bool(sites) and not all(grad_disabled(ctx, call) for call in sites)


def _a_module(facts: LoopFacts, name: str) -> bool:
    """``name`` holds a module: an instance of a class of this file that may be one (not a
    plain class: ``ou_noise = OrnsteinUhlenbeckNoise(...)``, then ``ou_noise()``), or of a
    torch.nn class."""
    owner = facts.instances.get(name, "")
    return _module_class(facts, owner) or _torch_module(owner)


def _torch_module(path: str) -> bool:
    """A torch.nn class (``torch.nn.Linear``, ``torch.nn.parallel.DistributedDataParallel``),
    not a function (``torch.nn.functional.relu``)."""
    return path.startswith("torch.nn.") and path.rsplit(".", 1)[-1][:1].isupper()


def _module_class(facts: LoopFacts, cls: str, seen: frozenset[str] = frozenset()) -> bool:
    """A class of this file that may be a module: one of its bases is not ``object`` (a
    torch.nn class, a class from elsewhere, or such a class of this file)."""
    node = facts.classes.get(cls)
    if node is None or cls in seen:
        return False
    for base in node.bases:
        name = dotted(base) or ""
        if name in facts.classes:
            if _module_class(facts, name, seen | {cls}):
                return True
        elif name != "object":
            return True
    return False


def _runs_model(facts: LoopFacts, target: str) -> bool:
    """Calling ``target`` runs a model: a module, or a name that says so (``model``, ``net``)."""
    return _a_module(facts, target) or bool(MODEL_NAME.search(target.rsplit(".", 1)[-1]))


def called_models(ctx: FileContext, loop: Step) -> set[str]:
    """The targets of calls in the loop that run a model: ``model(x)``, ``self.net(x)``; not a
    function of this file that turns autograd off itself around what it runs (an inference
    script's ``run_model(img, model)`` with its own ``with torch.no_grad():``)."""
    facts = ctx.loops
    found = set()
    for node in walk(loop.body):
        if not isinstance(node, ast.Call):
            continue
        target = dotted(node.func)
        if target is not None and _runs_model(facts, target):
            functions = facts.functions.get(target, []) if "." not in target else []
            if functions and all(_turns_grad_off(ctx, f) for f in functions):
                continue
            found.add(target)
    return found


def _turns_grad_off(ctx: FileContext, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``function`` runs without autograd: a ``@torch.no_grad()`` (or ``inference_mode``)
    decorator, or a body whose every statement that calls anything is under such a ``with``."""
    if any(_disables_grad(ctx, d) for d in function.decorator_list):
        return True
    calling = [stmt for stmt in function.body if any(isinstance(n, ast.Call) for n in walk([stmt]))]
    return bool(calling) and all(
        (
            isinstance(stmt, (ast.With, ast.AsyncWith))
            and any(_disables_grad(ctx, i.context_expr) for i in stmt.items)
        )
        or _only_mode_switch(stmt)
        for stmt in calling
    )


def _only_mode_switch(stmt: ast.stmt) -> bool:
    """``model = model.eval()``, ``model.eval()``: a statement that only switches a mode; or
    a ``return`` that only cuts what was computed from the graph or reads it to the host
    (``return segmentation.detach().cpu()``)."""
    if isinstance(stmt, ast.Return):
        calls = [n for n in walk([stmt]) if isinstance(n, ast.Call)]
        return all(isinstance(c.func, ast.Attribute) and c.func.attr in _RETURN_CUTS for c in calls)
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("eval", "train")
    )


_RETURN_CUTS = frozenset({"detach", "cpu", "numpy", "item", "tolist"})


def _freezes_parameters(ctx: FileContext) -> bool:
    """The file turns autograd off per parameter (``requires_grad_(False)``, ``p.requires_grad
    = False`` or a value it cannot read): cannot tell. Turning it on (SAC's learned
    temperature, ``log_alpha.requires_grad = True``) freezes nothing."""
    for node in ctx.of_type(ast.Attribute):
        parent = ctx.parents.get(id(node))
        if node.attr == "requires_grad_" and isinstance(parent, ast.Call):
            given = [*parent.args, *(k.value for k in parent.keywords)]
            if not all(_true(a) for a in given):
                return True
        elif (
            node.attr == "requires_grad"
            and isinstance(node.ctx, ast.Store)
            and not (isinstance(parent, ast.Assign) and _true(parent.value))
        ):
            return True
    return False


def _true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


# Calls whose result is a host value or a tensor cut from the graph; a distribution's
# ``sample()`` draws without autograd (``rsample()`` keeps it).
_CUTS = frozenset({"item", "tolist", "numpy", "detach", "detach_", "sample"})
_HOST_CALLS = frozenset({"float", "int", "bool", "len", "str", "round", "print"})


def _returns_host(function: Function) -> bool:
    """Every ``return`` of the function gives a host value (:func:`_host`), also through a
    name it binds only to host values (SAC's ``action = torch.tanh(z).detach().cpu().numpy()``
    then ``return action``)."""
    body = list(walk(function.body))
    returns = [n for n in body if isinstance(n, ast.Return)]

    def host(value: ast.expr | None) -> bool:
        if not isinstance(value, ast.Name):
            return _host(value)
        bound = [
            n.value
            for n in body
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            and any(isinstance(t, ast.Name) and t.id == value.id for t in _targets(n))
        ]
        stored = [
            n
            for n in body
            if isinstance(n, ast.Name) and n.id == value.id and isinstance(n.ctx, ast.Store)
        ]
        return bool(bound) and len(bound) == len(stored) and all(_host(v) for v in bound)

    return bool(returns) and all(host(r.value) for r in returns)


def _module_attrs(facts: LoopFacts, cls: str) -> set[str]:
    """Attributes a file class assigns a module to: ``self.fc = nn.Linear(...)``."""
    out = set()
    for node in subtree(facts.classes[cls]):
        if not isinstance(node, ast.Assign):
            continue
        value = strip_moves(node.value)  # ``self.actor = Actor(...).to(device)``: an Actor
        if not isinstance(value, ast.Call):
            continue
        name = facts.names.qualname(value.func) or dotted(value.func) or ""
        last = name.rsplit(".", 1)[-1]
        if (name.startswith("torch.nn.") and last[:1].isupper()) or last in facts.classes:
            out |= {d[5:] for d in (dotted(t) for t in node.targets) if d and d[:5] == "self."}
    return out


def _host(expr: ast.expr | None) -> bool:
    """``out.argmax().item()``, ``random.randint(0, 1)``, a literal: no tensor comes back."""
    if expr is None or isinstance(expr, ast.Constant):
        return True
    if not isinstance(expr, ast.Call):
        return False
    name = dotted(expr.func) or ""
    if name in _HOST_CALLS or name.split(".", 1)[0] == "random":
        return True
    # A cut anywhere down the chain of methods: ``self.actor(s).cpu().data.numpy().flatten()``
    # (DDPG's select_action) is a NumPy array's method of the host copy.
    node: ast.expr = expr
    while isinstance(node, (ast.Call, ast.Attribute)):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr in _CUTS:
                return True
            node = node.func
        else:
            node = node.value
    return False


def _local_modules(ctx: FileContext, scope: Scope) -> set[str]:
    """Names the function binds only to new modules (``mu, mu_target = MuNet(), MuNet()``),
    where the file's other functions use the same name for something else (``mu = tanh(x)``)."""
    facts = ctx.loops
    kinds: dict[str, set[bool]] = {}
    for target, value in assignments(n for n in walk(scope.body) if isinstance(n, ast.Assign)):
        value = strip_moves(value)
        cls = ctx.names.qualname(value.func) if isinstance(value, ast.Call) else None
        local = (
            value.func.id
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            else ""
        )
        module = _module_class(facts, local) or _torch_module(cls or "")
        kinds.setdefault(target, set()).add(module)
    return {t for t, k in kinds.items() if k == {True}}


def _targets(node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> list[ast.expr]:
    return node.targets if isinstance(node, ast.Assign) else [node.target]


class _Acting:
    """Follows what a loop body does with the outputs of the model calls it makes: whether
    any of them, or a tensor computed from them, is kept past the step that made it (stored,
    handed to a function, returned, read after the loop), which training would need it for.
    ``forwards``: the model calls seen; ``escaped``: a graph-carrying value was kept."""

    def __init__(self, ctx: FileContext, scope: Scope) -> None:
        self.ctx = ctx
        self.facts = ctx.loops
        self.local = _local_modules(ctx, scope)
        self.tainted: set[str] = set()
        self.forwards = 0
        self.escaped = False
        self._attrs: dict[str, set[str]] = {}  # class -> its module attributes, read once

    # A call that runs a model: a module of the file or named as one (``model(x)``), or a
    # method of one whose body runs its layers (``model.pi(s)``, ``q.sample_action(s, eps)``).
    def _forward(self, call: ast.Call) -> tuple[bool, bool]:
        """(runs a model, returns a host value)."""
        target = dotted(call.func)
        if target is None:
            return False, False
        if _runs_model(self.facts, target) or target in self.local:
            return True, False
        if isinstance(call.func, ast.Name):
            return self._acts_through(call)
        if not isinstance(call.func, ast.Attribute):
            return False, False
        base = dotted(call.func.value) or ""
        owner = self.facts.instances.get(base)
        if owner in self.facts.classes:
            classes = [owner]
        elif MODEL_NAME.search(base.rsplit(".", 1)[-1]):
            classes = [c for c in self.facts.classes if self.facts._methods(c, call.func.attr)]
        else:
            return False, False
        methods = [(c, m) for c in classes for m in self.facts._methods(c, call.func.attr)]
        if not methods or not all(self._runs_layers(c, m) for c, m in methods):
            return False, False
        return True, all(_returns_host(m) for _, m in methods)

    def _acts_through(self, call: ast.Call) -> tuple[bool, bool]:
        """A function of the file handed a model (``get_action(model, state, goal)``) that
        calls it and returns only host values (``q.max(1)[1].item()``, a random action): a
        forward whose output stays in the function. One that stores anything or returns a
        tensor is not one (:meth:`_runs_layers`' caution, for functions)."""
        assert isinstance(call.func, ast.Name)
        functions = self.facts.functions.get(call.func.id, [])
        if len(functions) != 1 or any(isinstance(a, ast.Starred) for a in call.args):
            return False, False
        function = functions[0]
        params = [a.arg for a in function.args.args]
        given = {p: dotted(a) or "" for p, a in zip(params, call.args, strict=False)}
        given |= {k.arg: dotted(k.value) or "" for k in call.keywords if k.arg}
        models = {
            p
            for p, arg in given.items()
            if arg and (_runs_model(self.facts, arg) or arg in self.local)
        }
        body = list(walk(function.body))
        if not models or any(
            isinstance(n, (ast.Global, ast.Nonlocal))
            or (
                isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                and not all(isinstance(t, ast.Name) for t in _targets(n))
            )
            for n in body
        ):
            return False, False
        runs = any(
            isinstance(n, ast.Call) and dotted(n.func) in models and id(n) not in self.facts.no_grad
            for n in body
        )
        return (True, True) if runs and _returns_host(function) else (False, False)

    def _runs_layers(self, cls: str, method: Function) -> bool:
        if cls not in self._attrs:
            self._attrs[cls] = _module_attrs(self.facts, cls)
        attrs = self._attrs[cls]
        for node in walk(method.body):
            if isinstance(node, ast.Assign) and any(
                (dotted(t) or "").startswith("self.") for t in node.targets
            ):
                return False  # it keeps something on the module: cannot tell what
            if isinstance(node, ast.Call):
                name = dotted(node.func) or ""
                if name in ("self", "self.forward") or (
                    name.startswith("self.") and name[5:] in attrs
                ):
                    return True
        return False

    def value(self, expr: ast.expr) -> bool:
        """Whether ``expr`` may be a tensor on the model's graph; uses that keep one are
        recorded as escapes on the way."""
        if isinstance(expr, ast.Name):
            return expr.id in self.tainted
        if isinstance(expr, ast.Call):
            return self._call(expr)
        if isinstance(
            expr, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
        ):
            if any(isinstance(n, ast.Name) and n.id in self.tainted for n in subtree(expr)):
                self.escaped = True
            return False
        kids = [c for c in children(expr) if isinstance(c, ast.expr)]
        return any([self.value(c) for c in kids])

    def _call(self, call: ast.Call) -> bool:
        args = [*call.args, *(k.value for k in call.keywords)]
        forward, host = self._forward(call)
        if forward:
            self.forwards += 1
            for a in args:
                self.value(a)
            return not host
        func = call.func
        base = self.value(func.value) if isinstance(func, ast.Attribute) else False
        tainted = [self.value(a) for a in args]
        if isinstance(func, ast.Attribute) and func.attr in _CUTS:
            return False
        name = self.ctx.names.qualname(func) or dotted(func) or ""
        if name in _HOST_CALLS:
            return False
        if base or name.startswith("torch."):  # a tensor's method or a torch op: it flows on
            return base or any(tainted)
        if any(tainted):  # handed to other code (a buffer's put, a list's append): kept
            self.escaped = True
        return False

    def _bind(self, target: ast.expr, tainted: bool) -> None:
        if isinstance(target, ast.Name):
            if tainted:
                self.tainted.add(target.id)
            else:
                self.tainted.discard(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._bind(elt, tainted)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, tainted)
        elif tainted:  # stored on an object or in a container
            self.escaped = True

    def run(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self._stmt(stmt)

    def _stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        if isinstance(stmt, ast.Assign):
            tainted = self.value(stmt.value)
            for target in stmt.targets:
                self._bind(target, tainted)
        elif isinstance(stmt, ast.AugAssign):
            tainted = self.value(stmt.value) or self.value(stmt.target)
            self._bind(stmt.target, tainted)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self._bind(stmt.target, self.value(stmt.value))
        elif isinstance(stmt, ast.Return) or (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Yield, ast.YieldFrom))
        ):
            value = stmt.value
            if isinstance(value, (ast.Yield, ast.YieldFrom)):
                value = value.value
            if value is not None and self.value(value):
                self.escaped = True  # returned or yielded: the caller may train on it
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self._bind(stmt.target, self.value(stmt.iter))
            self._branches(stmt.body, stmt.orelse)
        elif isinstance(stmt, (ast.If, ast.While)):
            self.value(stmt.test)
            self._branches(stmt.body, stmt.orelse)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.value(item.context_expr)
            self.run(stmt.body)
        elif isinstance(stmt, ast.Try):
            self._branches(stmt.body, [s for h in stmt.handlers for s in h.body], stmt.orelse)
            self.run(stmt.finalbody)
        else:
            for child in children(stmt):
                if isinstance(child, ast.expr):
                    self.value(child)

    def _branches(self, *bodies: list[ast.stmt]) -> None:
        start, ends = set(self.tainted), []
        for body in bodies:
            self.tainted = set(start)
            self.run(body)
            ends.append(self.tainted)
        self.tainted = start.union(*ends)


def _acting_loop(ctx: FileContext, loop: Loop, scope: Scope, made: set[str] | None) -> bool:
    """A loop that steps an environment and runs the model only to act: every model output
    becomes a host value (``.item()``, ``.numpy()``, ``.detach()``) or is dropped within the
    step; none is stored, handed on, or read after the loop (REINFORCE keeps
    ``m.log_prob(a)`` for its loss: that loop needs autograd and is not one)."""
    if made is None or not any(steps_env(n, made) for n in walk(loop.body, into_loops=False)):
        return False
    flow = _Acting(ctx, scope)
    flow.run(loop.body)
    flow.run(loop.body)  # what one iteration leaves, the next one reads
    if flow.escaped or not flow.forwards:
        return False
    inside = {id(n) for n in subtree(loop)}
    return not any(
        isinstance(n, ast.Name) and n.id in flow.tainted and id(n) not in inside
        for n in walk(scope.body)
    )


def _per_step(body: list[ast.stmt]) -> list[ast.stmt]:
    """The loop body without the branches that end it (``if done: agent.update(); break``):
    what runs at every step. SAC's acting loop updates once, when the episode ends."""
    return [
        s
        for s in body
        if not (
            isinstance(s, ast.If)
            and not s.orelse
            and isinstance(s.body[-1], (ast.Break, ast.Return))
        )
    ]


def _renders_every_step(loop: Loop) -> bool:
    """The acting loop draws the environment at every step (``env.render()``, not under an
    ``if``): drawing a frame takes milliseconds, the small policy's autograd bookkeeping
    microseconds (a test mode watching the agent)."""
    return any(
        isinstance(s, ast.Expr)
        and isinstance(s.value, ast.Call)
        and isinstance(s.value.func, ast.Attribute)
        and s.value.func.attr == "render"
        for s in loop.body
    )


def _check_eval_loop_without_no_grad(ctx: FileContext) -> Iterator[Report]:
    facts = ctx.loops
    if not facts.scope_of or _freezes_parameters(ctx):
        return
    made = made_envs(ctx) if b"step(" in ctx.source else None  # None: no environment steps
    # An evaluation in a file that runs on the CPU only is no GPU run's (issue 32's verdict
    # rules: a dozen judged false); an acting loop is still reported there: it runs at every
    # environment step of training, where autograd's bookkeeping is the step's own cost.
    gpu: bool | None = None
    reported: list[ast.For | ast.AsyncFor | ast.While] = []
    for loop in ctx.of_type(ast.For, ast.AsyncFor, ast.While):
        scope = facts.scope_of.get(id(loop))
        if scope is None:
            continue
        assert isinstance(loop, (ast.For, ast.AsyncFor, ast.While))
        if grad_disabled(ctx, loop):
            continue
        if facts.trains(loop.body, scope) and (
            facts.trains(_per_step(loop.body), scope) or not _acting_loop(ctx, loop, scope, made)
        ):
            continue  # trains at every step; an acting loop may update on its way out only
        if isinstance(loop.body[-1], ast.Break):
            continue  # one pass, then break: a lazy module's shapes, a smoke test
        if _asserts_outputs(ctx, loop):
            continue  # a check of the model's outputs (equivariance, a test): no evaluation
        if any(
            isinstance(n, (ast.With, ast.AsyncWith)) and grad_disabled(ctx, n.body[0])
            for n in walk(loop.body)
        ):
            continue
        if not _called_with_grad(ctx, scope):
            continue
        if _volatile_inputs(ctx, loop):
            continue  # autograd off the pre-0.4 way
        models = called_models(ctx, loop)
        evaluated = models & in_eval_mode(scope, loop.lineno)
        over_loader = isinstance(loop, (ast.For, ast.AsyncFor)) and facts.is_loader(loop.iter)
        if _acting_loop(ctx, loop, scope, made):
            if not _renders_every_step(loop):
                reported.append(loop)
        elif models and (evaluated or over_loader):
            if gpu is None:
                gpu = may_use_accelerator(ctx)
            if gpu and not _small_models(ctx, models, scope):
                reported.append(loop)
    # One finding per evaluation pass: a loop inside another reported one (DeepSNAP's ``for
    # batch in loader`` inside ``for loader in loaders``) is the same pass, one ``no_grad`` off.
    ids = {id(loop) for loop in reported}
    for loop in reported:
        if not any(id(a) in ids for a in ctx.ancestors(loop)):
            yield Report(loop)


# Numerical comparisons a check of a model's outputs asserts, and the test helpers that do.
_COMPARISONS = frozenset({"allclose", "isclose", "equal"})
_ASSERTS = frozenset({"assert_close", "assert_allclose"})


def _asserts_outputs(ctx: FileContext, loop: Loop) -> bool:
    """The loop asserts a numerical comparison of what it computes (``assert
    torch.allclose(y_from_x_transformed.tensor, y.transform(g).tensor)`` for each group element,
    a steerable-CNN notebook's equivariance check; ``torch.testing.assert_close``): a test of
    the model, run once, not an evaluation pass. Not a loop over a data loader: an evaluation
    pass with a sanity check in it is still an evaluation pass."""
    if isinstance(loop, (ast.For, ast.AsyncFor)) and ctx.loops.is_loader(loop.iter):
        return False
    for node in walk(loop.body):
        if isinstance(node, ast.Assert) and any(
            isinstance(c, ast.Call) and _called(c) in _COMPARISONS for c in walk([node.test])
        ):
            return True
        if isinstance(node, ast.Call) and _called(node) in _ASSERTS:
            return True
    return False


def _called(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _small_models(ctx: FileContext, models: set[str], scope: Scope) -> bool:
    """Every model the loop runs is one this file spells out, small (lint.scale): the history
    autograd records for its forward is a few activations of a few thousand numbers, freed at
    once, so turning it off saves next to nothing."""
    for target in models:
        weights = model_weights(ctx, target, scope)
        if weights is None or weights > TINY_WEIGHTS:
            return False
    return True


_VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})


def _volatile_inputs(ctx: FileContext, loop: Loop) -> bool:
    """The loop wraps its inputs in ``Variable(x, volatile=True)``: before PyTorch 0.4 that was
    how code turned autograd off for a forward, what ``torch.no_grad()`` does now."""
    return any(
        isinstance(n, ast.Call)
        and ctx.names.qualname(n.func) in _VARIABLE
        and any(
            k.arg == "volatile" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in n.keywords
        )
        for n in walk(loop.body)
    )


EVAL_LOOP_WITHOUT_NO_GRAD = Rule(
    code="TP403",
    name="eval-loop-without-no-grad",
    message="Evaluation loop records autograd history it never uses (no `torch.no_grad()`)",
    technique="no-grad-eval",
    doc=f"""\
## What it does
Flags a loop that runs a model without training it (no `backward()` or optimizer step in it or
in the functions it calls) and is not under `torch.no_grad()`, `torch.inference_mode()` or
`torch.set_grad_enabled(False)` (nor one that wraps its inputs in `Variable(x, volatile=True)`,
how code before PyTorch 0.4 turned autograd off): a loop after `model.eval()`, or one over a
DataLoader. A
function's loop is flagged only when the function is called in the same file without such a
context. A loop inside another flagged one is the same evaluation pass (`for batch in loader`
inside `for loader in loaders`): only the outer one is flagged.

Also a reinforcement-learning *acting* loop: one that steps an environment (`env.step(a)`)
and runs the policy or Q-network only to choose the action, where every output of the model
becomes a host value within the step (`.item()`, `.numpy()`, `.detach()`, a distribution's
`sample()`) and none is stored, handed to other code, returned or read after the loop; the
update later recomputes what it trains on. The model may run in a function of the file the
loop hands it to (`action = get_action(model, state)`), where that function returns only host
values, stores nothing and does not turn autograd off itself, or in a method of an object the
file builds (`action = agent.select_action(state)`) that runs its modules and returns host
values (`.cpu().data.numpy().flatten()`, or a name bound only to one). An update on the way out
of the loop (`if done: agent.update(); break`) does not make it a training loop. Not flagged:
an acting loop that draws the environment at every step (`env.render()`, not under an `if`),
whose frames take far longer than the policy's bookkeeping; REINFORCE-style
loops that keep `m.log_prob(a)` (or any output with its graph) for the loss, and loops that sum
outputs into a loss read after the loop. Nor an evaluation loop in a file that runs on the CPU
only (nothing moved to a device; an acting loop is reported there too: it runs at every
environment step of training). Nor an evaluation loop whose every model is small by the reading
below: the history autograd records for it is a few small activations, freed at once. Nor a
loop that asserts a numerical comparison of what it computes (`assert torch.allclose(...)`,
`torch.testing.assert_close`: a notebook's equivariance check, a test), not an evaluation pass;
a loop over a loader with such a sanity check in it is still one.

{SMALL_MODELS_DOC}

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
