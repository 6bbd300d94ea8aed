"""TP201-TP205: host-device synchronisations inside a training loop.

Every rule here reports only hot code (see :mod:`torchpace.lint.loops`): inside a training
loop, or a same-file function it calls, and not under a logging cadence such as
``if step % 100 == 0:``; and only in files that may use an accelerator
(:func:`torchpace.lint.device.may_use_accelerator`); never in a loop that steps an environment
(:mod:`torchpace.lint.environment`), which reads its action back to the host by design.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence

from torchpace.lint.device import cpu_names, may_use_accelerator
from torchpace.lint.forwards import in_forwards
from torchpace.lint.loops import (
    LOOPS,
    NESTED_SCOPES,
    PARAMETERS,
    LoopFacts,
    Scope,
    bound_in,
    constructor,
    dotted,
    evaluation_function,
    is_cadence_gate,
    moves_itself,
    per_update_code,
    root_name,
    walk,
)
from torchpace.lint.rule import (
    Check,
    FileContext,
    Report,
    Rule,
    argument,
    keyword,
    parameter_names,
    passed_for,
    per_file,
)
from torchpace.lint.scale import SMALL_MODELS_DOC, step_runs
from torchpace.lint.tensors import TensorFacts
from torchpace.lint.tree import subtree

# What every rule about waiting for the device (TP201-TP205) leaves alone, beside small models:
# the hot code of :func:`_hot` without these.
WAITS_LEFT_ALONE_DOC = (
    "Not the reads of a function that turns objects into bytes and back (`pickle.dumps`, "
    "`pickle.loads`), trains nothing, and that no call of the file hands a tensor on the device: "
    "a pickle-based `all_gather` must bring each rank's byte count and bytes to the host to "
    "unpickle them; its caller's per-step read of the values it gathers is what costs, and is "
    "reported there. Nor, in a loop that trains only in loops nested two deep inside it (TRL's "
    "PPO update: draw a batch, roll out, then epochs of minibatch steps; not a loop over a "
    "loader's batches, nor a GAN's one loop of critic steps), what its own body runs around "
    "them: once an update, after many optimizer steps (the update's metrics); the inner loops' "
    "waits are reported."
)

REFERENCES = 'PyTorch Performance Tuning Guide, "Avoid unnecessary CPU-GPU synchronization"'


@per_file
def _hot(ctx: FileContext, *, waits: bool = True) -> list[tuple[ast.AST, Scope]]:
    """The hot code, in a file that may use an accelerator: on the CPU alone nothing runs
    asynchronously, so nothing waits for a device. For a rule about waiting for the device
    (``waits``), not the loops of a small model (lint.scale): its kernels take microseconds, so
    the queue a sync waits on is about empty."""
    if not (ctx.loops.hot and (ctx.entries or may_use_accelerator(ctx))):  # see lint.project
        return []
    bound = ctx.env_bound  # an RL interaction loop reads its action back every step anyway
    small = ctx.launch_bound if waits else frozenset()
    synced = _synced_by_evaluation(ctx) | _validated_every_step(ctx) if waits else frozenset()
    host = _host_steps(ctx) if waits else frozenset()
    pickling = _pickling_functions(ctx) if waits else frozenset()
    # an update loop's own code around its inner training loops: one wait per update
    updates = per_update_code(ctx.loops) if waits else frozenset()
    return [
        (node, scope)
        for node, scope in ctx.loops.hot.values()
        if id(node) not in bound
        and id(node) not in small
        and id(node) not in synced
        and id(node) not in host
        and id(scope) not in pickling
        and id(node) not in updates
    ]


# Python's object serialisation to bytes in memory: a function that calls these moves objects
# as bytes (not ``pickle.dump(snapshot, f)``, a training loop's checkpoint).
_PICKLES = frozenset({"pickle.dumps", "pickle.loads"})


def _pickling_functions(ctx: FileContext) -> frozenset[int]:
    """``id`` of each function that pickles or unpickles objects (a pickle-based
    ``all_gather``: each rank's byte count and bytes come back to the host to be unpickled).
    Its reads are what it is for; the cost is the caller's, gathering Python objects every
    step, and is reported there."""
    if b"pickle" not in ctx.source:
        return frozenset()
    return frozenset(
        id(scope)
        for call, qual in ctx.calls
        if qual in _PICKLES
        and isinstance(scope := ctx.enclosing_scope(call), (ast.FunctionDef, ast.AsyncFunctionDef))
        and not ctx.loops.function_trains(scope)
        and not _handed_device_values(ctx, scope)
    )


def _handed_device_values(
    ctx: FileContext, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> bool:
    """A call of ``function`` in this file hands it a tensor not in host memory, as an
    argument or inside a literal dict, list or tuple (``all_gather({"loss": loss.detach()})``):
    pickling it copies it from the device, a wait that only the helper's reads show."""
    for call, _ in ctx.calls:
        if not (isinstance(call.func, ast.Name) and call.func.id == function.name):
            continue
        tensors = ctx.tensors(ctx.enclosing_scope(call))
        stack: list[ast.expr] = [*call.args, *(k.value for k in call.keywords)]
        while stack:
            arg = stack.pop()
            if isinstance(arg, ast.Dict):
                stack += [v for v in arg.values if v is not None]
            elif isinstance(arg, (ast.List, ast.Tuple, ast.Set)):
                stack += arg.elts
            elif tensors.is_tensor(arg) and not tensors.is_host(arg):
                return True
    return False


@per_file
def _host_steps(ctx: FileContext) -> frozenset[int]:
    """The code of a notebook's training loops that train on the host
    (:func:`~torchpace.lint.rules.precision.host_training_loops`), less what a loop on a device
    also runs (a textbook's seq2seq chapter, trained on the CPU)."""
    from torchpace.lint.rules.precision import host_training_loops

    host = host_training_loops(ctx)
    if not host:
        return frozenset()
    on_host: set[int] = set()
    placed: set[int] = set()
    for loop in ctx.loops.training_loops():
        nodes = {id(n) for run, _, _ in step_runs(ctx, loop) for n in run}
        (on_host if id(loop) in host else placed).update(nodes)
    return frozenset(on_host - placed)


@per_file
def _synced_by_evaluation(ctx: FileContext) -> frozenset[int]:
    """The nodes of training loops that call, on every step, an evaluation function of this
    file that reads a value to the host (DGL's full-graph examples: ``acc = evaluate(...)``
    returning ``correct.item()``): the step waits for the device there anyway, so the loop's
    other reads add no wait of their own."""
    facts = ctx.loops
    out: set[int] = set()
    for loop in facts.step_loops:
        scope = facts.scope_of[id(loop)]
        nodes = list(walk(loop.body))
        for call in (n for n in nodes if isinstance(n, ast.Call) and id(n) in facts.hot):
            functions = facts.callees(call, scope)
            if functions and all(
                evaluation_function(facts, f) and any(_sync_method(n) for n in walk(f.body))
                for f in functions
            ):
                out |= {id(n) for n in nodes}
                break
    return frozenset(out)


@per_file
def _validated_every_step(ctx: FileContext) -> frozenset[int]:
    """The nodes of training steps that, after their optimizer step, switch a model to eval
    mode and read a value to the host, on every step (pyGAT's and pygcn's ``train(epoch)``:
    one full-batch step, then the validation forward, whose loss is printed and returned for
    early stopping): the step waits for the device there anyway, so its other reads add no wait
    of their own, and the reads after ``eval()`` are the evaluation's."""
    if b".eval()" not in ctx.source:
        return frozenset()  # no model is switched to eval mode: most files stop here
    facts = ctx.loops
    if not any(
        isinstance(call.func, ast.Attribute) and call.func.attr == "eval" and id(call) in facts.hot
        for call, _ in ctx.calls
    ):
        return frozenset()  # nor in the code a step runs
    out: set[int] = set()
    for step in facts.training_loops():
        bodies = [nodes for nodes, _, _ in step_runs(ctx, step)]
        if any(_validates_after_stepping(facts, body) for body in bodies):
            out |= {id(n) for body in bodies for n in body}
    return frozenset(out)


def _validates_after_stepping(facts: LoopFacts, nodes: Sequence[ast.AST]) -> bool:
    calls = sorted((n for n in nodes if isinstance(n, ast.Call)), key=_position)
    stepped = evaluating = False
    for call in calls:
        func = call.func
        if facts.is_optimizer_step(call):
            stepped = True
        elif (
            stepped
            and isinstance(func, ast.Attribute)
            and func.attr == "eval"
            and not call.args
            and dotted(func.value) is not None
            and id(call) in facts.hot
        ):
            evaluating = True
        elif evaluating and _sync_method(call) and id(call) in facts.hot:
            return True
    return False


def _position(node: ast.AST) -> tuple[int, int]:
    return (node.lineno, node.col_offset)  # type: ignore[attr-defined]


def hot_calls(ctx: FileContext, *, waits: bool = True) -> list[tuple[ast.Call, str | None, Scope]]:
    """The calls of :func:`_hot`'s code, with their resolved names."""
    key = "_tp_hot_calls_waits" if waits else "_tp_hot_calls"
    cached: list[tuple[ast.Call, str | None, Scope]] | None = ctx.__dict__.get(key)
    if cached is None:
        qualname = ctx.names.qualname
        cached = ctx.__dict__[key] = [
            (node, qualname(node.func), scope)
            for node, scope in _hot(ctx, waits=waits)
            if isinstance(node, ast.Call)
        ]
    return cached


# TP201 ------------------------------------------------------------------------------------------

_SYNC_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
_CONVERSIONS = frozenset({"float", "int", "bool", "complex"})


def _sync_method(call: ast.AST) -> bool:
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr in _SYNC_METHODS
        and not call.args
    )


def _plain_numpy(call: ast.Call) -> bool:
    """``x.numpy()`` without ``force=True``: a CUDA tensor's raises, so it reads host memory."""
    return isinstance(call.func, ast.Attribute) and call.func.attr == "numpy" and not call.keywords


def _syncs_earlier(node: ast.expr) -> bool:
    """True when a sync already happened in the receiver chain: ``x.cpu().numpy()``."""
    while isinstance(node, (ast.Call, ast.Attribute, ast.Subscript)):
        if _sync_method(node):
            return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return False


def _reads_scale(call: ast.Call) -> bool:
    """``scaler.get_scale()`` / ``scaler.state_dict()``: a GradScaler reads its scale tensor
    with ``.item()`` (Swin logs ``loss_scaler.state_dict()["scale"]`` every step)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or call.args:
        return False
    if func.attr == "get_scale":
        return True
    owner = (dotted(func.value) or "").rsplit(".", 1)[-1].lower()
    return func.attr == "state_dict" and "scaler" in owner


def _bindings(scope: Scope, name: str) -> list[ast.stmt | ast.expr]:
    """The nodes of ``scope`` that bind the plain name ``name`` (``=``, ``:=``, ``+=``)."""
    return [
        n
        for n in subtree(scope)
        if isinstance(n, (ast.Assign, ast.NamedExpr, ast.AugAssign, ast.AnnAssign))
        and any(
            isinstance(t, ast.Name) and t.id == name
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        )
    ]


def _moves_later(scope: Scope, name: str, line: int) -> bool:
    """``scope`` binds ``name`` only once, after ``line``, to a move of itself to a device:
    ``batch = move_to_device(batch, self.device)``, ``x = x.to(device)``."""
    bindings = _bindings(scope, name)
    if len(bindings) != 1 or not isinstance(bindings[0], ast.Assign):
        return False
    move = bindings[0]
    return move.lineno > line and moves_itself(move.value, name)


def _read_before_move(scope: Scope, receiver: ast.expr) -> bool:
    """The value read comes from a parameter (a batch handed in) that the function moves to
    the device only after this line: it is still in host memory (OLMo's ``train_step`` counts
    masked instances, then calls ``move_to_device(batch, ...)``)."""
    params = parameter_names(scope)
    name = root_name(receiver)
    if name is None or not params:
        return False
    if name not in params:  # ``mask := batch.get("mask")``, ``mask = batch["mask"]``: once
        bound = [
            n.value for n in _bindings(scope, name) if isinstance(n, (ast.Assign, ast.NamedExpr))
        ]
        name = root_name(bound[0]) if len(bound) == 1 else None
        if name not in params:
            return False
    return _moves_later(scope, name, receiver.lineno)


def _host_where_read(ctx: FileContext, scope: Scope, receiver: ast.expr) -> bool:
    """The last statement before the read that binds the name read, in the same step (the read's
    block or a block around it, no loop between them), binds a host tensor: ``correct =
    pred.eq(y).cpu().sum()``, then ``correct.item()`` (Pointnet++'s training loop, whose
    evaluation later binds ``correct = np.sum(...)`` in the same function). A statement between
    them that may bind the name otherwise, or a loop boundary, leaves it undecided."""
    if not isinstance(receiver, ast.Name):
        return False
    name = receiver.id
    node: ast.AST = receiver
    for parent in ctx.ancestors(receiver):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if not isinstance(block, list) or node not in block:
                continue
            for stmt in reversed(block[: block.index(node)]):
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and stmt.targets[0].id == name
                ):
                    return ctx.tensors(scope).is_host(stmt.value)
                if any(
                    isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                    for n in subtree(stmt)
                ):
                    return False
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.While, *NESTED_SCOPES)):
            return False  # an earlier iteration's binding may reach the read
        node = parent
    return False


def _batch_read_before_rebinding(ctx: FileContext, receiver: ast.expr) -> bool:
    """The name read is one the enclosing loop's header binds from a loader's batch, and no
    statement of the loop's body binds it again before this read (PyTorch-GAN's
    ``labels = to_categorical(labels.numpy(), ...)``, the batch's CPU labels made a device
    tensor on the same line): in host memory, whatever the name holds later."""
    name = root_name(receiver)
    if name is None:
        return False
    loop = next((a for a in ctx.ancestors(receiver) if isinstance(a, LOOPS)), None)
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not ctx.loops.is_loader(loop.iter):
        return False  # also a read in an inner loop, which a rebinding may have run before
    if name not in {n.id for n in subtree(loop.target) if isinstance(n, ast.Name)}:
        return False
    statement = statement_of(ctx, receiver)
    assert statement is not None  # an expression in a loop's body is in one of its statements
    return not any(
        isinstance(n, ast.Name)
        and n.id == name
        and isinstance(n.ctx, ast.Store)
        and (n.lineno, n.col_offset) < (statement.lineno, statement.col_offset)
        for stmt in loop.body
        for n in subtree(stmt)
    )


# Collectives whose result every rank holds alike: read on the host to decide, they are a stop
# flag the ranks agree on (issue 32), which the loop needs each time it checks it.
_AGREEING = frozenset(
    f"torch.distributed.{name}" for name in ("all_reduce", "broadcast", "all_gather_into_tensor")
)


def _tests_of(ctx: FileContext, node: ast.expr) -> list[ast.AST]:
    """The branches whose test ``node`` is read in (an ``if``, ``while``, ``assert`` or
    conditional expression), from the innermost out to the statement that holds ``node``."""
    out: list[ast.AST] = []
    child: ast.AST = node
    parent = ctx.parents.get(id(node))
    while parent is not None:
        if isinstance(parent, (ast.If, ast.While, ast.Assert, ast.IfExp)) and parent.test is child:
            out.append(parent)
        if isinstance(parent, ast.stmt):
            break
        child, parent = parent, ctx.parents.get(id(parent))
    return out


def _ends_inner_loop(ctx: FileContext, node: ast.expr) -> bool:
    """``node`` is read in the test of an ``if`` whose body only leaves a loop nested in the
    step, also after noting a flag (greedy decoding, ``if decoder_input.item() == EOS_token:
    break``; a line search's ``if kl < limit: accepted = True; break``), or of such a loop's
    own ``while`` (a conjugate gradient's ``while rdotr > tol:``): the value decides
    how many times that loop runs, which the host must know. The step loop's own ``break`` on
    a value (``if loss.item() < tol: break``) is not one."""
    tests = _tests_of(ctx, node)
    branch = tests[-1] if tests else None
    if isinstance(branch, ast.While):
        # ``while rdotr > tol:``: the test is how long this loop runs
        loop: ast.AST | None = branch
    elif (
        isinstance(branch, ast.If)
        and not branch.orelse
        and isinstance(branch.body[-1], ast.Break)
        and all(_notes_a_flag(s) for s in branch.body[:-1])
    ):
        loop = next((a for a in ctx.ancestors(branch) if isinstance(a, LOOPS)), None)
    else:
        return False
    return loop is not None and all(loop is not s for s in ctx.loops.step_loops)


def _notes_a_flag(stmt: ast.stmt) -> bool:
    """``flag = True``, ``accepted = step``: a name set to a constant or another name, before a
    ``break`` (a line search noting that it accepted a step)."""
    return (
        isinstance(stmt, ast.Assign)
        and all(isinstance(t, ast.Name) for t in stmt.targets)
        and isinstance(stmt.value, (ast.Constant, ast.Name))
    )


def _agreed_decision(ctx: FileContext, node: ast.expr) -> bool:
    """``node`` decides a branch (it is in the test of an ``if``, ``while``, conditional
    expression or ``assert``) and reads a tensor that its loop, before it, hands to a collective
    that leaves every rank the same value (``dist.all_reduce(stop)``, then ``if stop.item():``):
    a stop flag all ranks must agree on, read when the loop checks it, not a wait to remove."""
    read = node
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        read = node.func.value  # ``stop.item()``
    name = root_name(read)
    if name is None:
        return False
    if not _tests_of(ctx, node):
        return False
    loop = next((a for a in ctx.ancestors(node) if isinstance(a, LOOPS)), None)
    return loop is not None and any(
        ctx.names.qualname(c.func) in _AGREEING
        and c.args
        and root_name(c.args[0]) == name
        and c.lineno < node.lineno
        for c in walk(loop.body)
        if isinstance(c, ast.Call)
    )


# Libraries that compute on host arrays only: what a step hands them must be read first.
_HOST_LIBRARIES = ("cv2.", "scipy.", "skimage.")


def _fed_to_host_library(ctx: FileContext, read: ast.Call, scope: Scope) -> bool:
    """What ``read`` brings to the host (``pred = pred.cpu().numpy()``) reaches, through the
    names its function binds from it, a call of OpenCV, SciPy or scikit-image in that function
    (RITM's click simulation: ``cv2.distanceTransform`` of the error region on each step's
    prediction): the step's algorithm runs on the host, and needs the values there."""
    if isinstance(scope, ast.Module) or not any(
        (q or "").startswith(_HOST_LIBRARIES) for _, q in ctx.calls
    ):
        return False
    stmt = statement_of(ctx, read)
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        return False
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]

    def bound(t: ast.expr) -> set[str]:  # the names a target binds, not ``x`` of ``x[i]``
        if isinstance(t, ast.Name):
            return {t.id}
        if isinstance(t, (ast.Tuple, ast.List)):
            return {n for e in t.elts for n in bound(e)}
        if isinstance(t, ast.Starred):
            return bound(t.value)
        return set()

    tainted = {n for t in targets for n in bound(t)}
    body = list(walk(scope.body))
    for _ in range(3):  # names bound from the read, and from those, a few steps on
        for node in body:
            if isinstance(node, ast.Assign) and any(
                isinstance(n, ast.Name) and n.id in tainted for n in subtree(node.value)
            ):
                tainted |= {n for t in node.targets for n in bound(t)}
    # the library call runs with each read: inside the loop of the function that makes the
    # read, if any (not after it, once an epoch, on what the steps gathered)
    loop = next((a for a in ctx.ancestors(read) if isinstance(a, LOOPS)), None)
    if loop is not None and not any(a is scope for a in ctx.ancestors(loop)):
        loop = None  # the read's loop is outside this function: each call is one step
    within = {id(n) for n in subtree(loop)} if loop is not None else None
    return any(
        isinstance(node, ast.Call)
        and (within is None or id(node) in within)
        and (ctx.names.qualname(node.func) or "").startswith(_HOST_LIBRARIES)
        and any(
            isinstance(n, ast.Name) and n.id in tainted
            for a in (*node.args, *(k.value for k in node.keywords))
            for n in subtree(a)
        )
        for node in body
    )


def _module_state(ctx: FileContext, node: ast.expr) -> bool:
    """``self.x`` where ``x`` is a tensor the enclosing module keeps on its device: a buffer it
    registers (``self.register_buffer("queue_ptr", torch.zeros(1))``) or an ``nn.Parameter`` it
    binds to ``self.x`` in ``__init__``, which move with the module; not a plain tensor
    attribute, which stays on the host."""
    if not (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return False
    cls = ctx.parents.get(id(ctx.enclosing_scope(node)))
    if not isinstance(cls, ast.ClassDef):
        return False
    init = constructor(cls)
    if init is None:
        return False
    qualname = ctx.names.qualname
    for n in walk(init.body):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            first = n.args[0] if n.args else None
            named = isinstance(first, ast.Constant) and first.value == node.attr
            if n.func.attr == "register_buffer" and named:
                return True
        elif (
            isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call)
            and any(dotted(t) == f"self.{node.attr}" for t in n.targets)
        ):
            return qualname(n.value.func) in PARAMETERS  # what ``model.to(device)`` moves
    return False


def _reads_module_state(ctx: FileContext, node: ast.AST) -> bool:
    """``self.x.item()`` or ``int(self.x)`` of a tensor the module keeps (:func:`_module_state`)."""
    if not isinstance(node, ast.Call):
        return False
    if _sync_method(node):
        return _module_state(ctx, node.func.value)  # type: ignore[attr-defined]
    return (
        isinstance(node.func, ast.Name)
        and node.func.id in _CONVERSIONS
        and len(node.args) == 1
        and _module_state(ctx, node.args[0])
    )


def _legacy_item(node: ast.AST, scope: Scope) -> bool:
    """``loss.data[0]``: before PyTorch 0.4 a loss was a one-element tensor and this read its
    value to the host, as ``loss.item()`` does now. Only of a loss: a name that says it is one
    (``loss_l``, ``total_loss``) or that the scope calls ``.backward()`` on; of any other tensor
    it takes a row, on the device."""
    if not (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "data"
        and isinstance(node.slice, ast.Constant)
        and node.slice.value == 0
    ):
        return False
    name = dotted(node.value.value)
    if name is None:
        return False
    if "loss" in name.rpartition(".")[2].lower():
        return True
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "backward"
        and dotted(n.func.value) == name
        for n in walk(scope.body)
    )


def _check_host_sync(ctx: FileContext) -> Iterator[Report]:
    for node, scope in _hot(ctx):
        if _legacy_item(node, scope):
            yield Report(node)  # pre-0.4 ``loss.data[0]``: a read of the loss every step
        for bound in _tensor_bounds(ctx, node, scope):
            yield Report(bound)  # ``x[:, :n]`` with ``n`` a tensor: an implicit ``int(n)``
    hot = hot_calls(ctx)
    seen = {id(call) for call, _, _ in hot}
    for node, _ in in_forwards(ctx, lambda n: _reads_module_state(ctx, n)):
        if id(node) not in seen:
            yield Report(node)  # a module's forward reads its own state, every step
    for call, qual, scope in hot:
        if _reads_scale(call):
            yield Report(call)
            continue
        if _logged_tensor(ctx, call, scope):
            yield Report(call)  # the writer reads the value to the host: ``.item()`` unwritten
            continue
        if _sync_method(call):
            receiver = call.func.value  # type: ignore[attr-defined]
            if _syncs_earlier(receiver):
                continue
            if _plain_numpy(call):
                continue  # a CUDA tensor's ``.numpy()`` raises: what it reads is on the host
            if isinstance(receiver, ast.Call):
                inner = ctx.names.qualname(receiver.func) or ""
                if inner.startswith("numpy."):
                    continue  # np.array(x).tolist() never touches a device
            if ctx.tensors(scope).is_host(receiver) or _host_where_read(ctx, scope, receiver):
                continue  # a loader's batch or a from_numpy tensor: already on the host
            if _read_before_move(scope, receiver):
                continue  # a batch handed in, read before this function moves it
            if _batch_read_before_rebinding(ctx, receiver):
                continue  # the loader's batch, read before the loop body binds the name anew
            if _agreed_decision(ctx, call):
                continue  # a stop flag every rank holds alike: the loop needs it to decide
            if _fed_to_host_library(ctx, call, scope):
                continue  # OpenCV or SciPy computes on what was read: the host needs it
            if _ends_inner_loop(ctx, call):
                continue  # how long the step's inner loop runs: the host must know
            yield Report(call)
        elif (
            isinstance(call.func, ast.Name)
            and call.func.id in _CONVERSIONS
            and qual is None
            and len(call.args) == 1
            and (ctx.tensors(scope).is_tensor(call.args[0]) or _module_state(ctx, call.args[0]))
            and not ctx.tensors(scope).is_host(call.args[0])
        ):
            yield Report(call)


# A logger's methods that turn a tensor they are handed into a host number or array:
# TensorBoard's ``SummaryWriter`` (``make_np``: ``.detach().cpu().numpy()``) and W&B's ``log``
# (a dict of values, each tensor converted with ``.cpu()``), and the argument that holds it.
_WRITER_VALUES = {"add_scalar": (1, "scalar_value"), "add_histogram": (1, "values")}


def _logged_tensor(ctx: FileContext, call: ast.Call, scope: Scope) -> bool:
    """``writer.add_scalar("loss", loss, step)`` or ``wandb.log({"loss": loss})`` handed a tensor
    not in host memory: the writer reads it to the host, a wait as ``loss.item()`` is, hidden in
    the library (``add_scalar("loss", loss.item(), step)`` is reported at the ``.item()``)."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    tensors = ctx.tensors(scope)
    if func.attr in _WRITER_VALUES and func.attr not in ctx.loops.functions:
        # (a method of the file's own, a buffer that keeps the tensor, is no writer)
        position, keyword = _WRITER_VALUES[func.attr]
        value = argument(call, keyword, position)
        return value is not None and tensors.on_device(value)
    if func.attr == "log" and ctx.names.qualname(func) == "wandb.log" and call.args:
        logged = call.args[0]
        return isinstance(logged, ast.Dict) and any(
            v is not None and tensors.on_device(v) for v in logged.values
        )
    return False


def _tensor_bounds(ctx: FileContext, node: ast.AST, scope: Scope) -> list[ast.expr]:
    """A slice's bounds, or a ``range()``'s arguments, in hot code that are tensors not on the
    host: Python reads each with ``__index__``, an implicit ``int()`` that waits for the device
    (vits' ``x[i, :, idx_str:idx_end]`` with ``idx_str = ids_str[i]`` of a CUDA tensor;
    ``pred[:length]`` for each ``length`` of a loop over a CUDA lengths tensor)."""
    if isinstance(node, ast.Slice):
        bounds = [node.lower, node.upper, node.step]
    elif isinstance(node, ast.Call) and dotted(node.func) == "range":
        bounds = list(node.args)
    else:
        return []
    tensors = ctx.tensors(scope)
    return [b for b in bounds if isinstance(b, (ast.Name, ast.Subscript)) and tensors.on_device(b)]


HOST_SYNC_IN_LOOP = Rule(
    code="TP201",
    name="host-sync-in-training-loop",
    message="Reading a tensor's value on the host waits for the device on every step",
    technique="avoid-syncs",
    doc=f"""\
## What it does
Flags `.item()`, `.tolist()`, `.cpu()` and `.numpy(force=True)` (a plain `.numpy()` of a CUDA
tensor raises, so what it reads is in host memory, and the copy before it is what waits),
`float()` / `int()` / `bool()` of a tensor, a
tensor not in host memory as a slice bound or `range()` argument (`pred[:length]` for each `length`
of a loop over a CUDA lengths tensor: Python reads it with `__index__`), `loss.data[0]` (the
spelling of `loss.item()` before PyTorch 0.4, of a name that says it is a loss or that the function
calls `.backward()` on), a GradScaler's `get_scale()` or `state_dict()` (both read the scale
with `.item()`), and a tensor not in host memory handed to a logger that reads it
(TensorBoard's `writer.add_scalar("loss", loss, step)` or `add_histogram`, `wandb.log({{"loss":
loss}})`: the library calls `.cpu()` on it), inside a training loop or a function that the loop
calls (also the getter of a
property the step reads, `self.r` where `r` is a `@property` returning `self.decoder.r.item()`; a
Lightning module's `training_step`, a Transformers trainer's `training_step(self, model, inputs)`
and `compute_loss(self, model, inputs)` overrides (TRL's trainers, a custom loss), and the
function handed to an Ignite engine, `Engine(train_step)`, which the framework calls once per
batch or micro-batch). Calls under a logging cadence (`if
step % 100 == 0:`, `if step % 100 == 0 or step == last:`, or one kept by hand, `if step - last_save
>= save_steps:`, `if time.time() - last_log > 30:`) or under an option for diagnostics that is
off by default (`if args.verbose:` with `--verbose` a `store_true`; also `--debug`, `--profile`,
`--print_*`, `--show_*`, `--plot_*`, `--synchronize-step`, and an option whose help says it
visualises, plots, measures, monitors, debugs or profiles: `--visdom`, "use visdom for loss
visualization", or TensorBoard, read as `config["enable_tensorboard"]` of `vars(args)`; also a level
above zero, `if opt.debug > 0:`, and a switch named for debugging or
for an evaluation-only mode, `debug`, `verbose`, `test`, `eval`, of an options object another
file declares: CenterNet's `if opt.test: self.save_result(...)`), under a first-value test whose
body sets what it tests (`if loss_ema is None:
loss_ema = loss.item()`, once until reset; not on a parameter of a function that no loop of it
holds, `if h is None: h = ...`, which each call starts afresh), under a latch its body turns off
(`if self.need_sync: ...; self.need_sync = False`, also after a branch that only skips the step,
a resumed run's fast-forward), under a test for a new best that records it (`if acc >
best_acc: best_acc = acc; save_ckpt(...)`: rarer as training goes), in an exception handler that
does not train (`except
torch.cuda.OutOfMemoryError:`), in a cache filled once per key (`if key not in
cache: cache[key] = ...`, where the body fills the key it tests), after the loop, in the evaluation
branch of a loop that serves both passes (`if not train:` where the backward runs under `if
train:`; the `else:` of a test for the training pass, `if is_train: ... else:`, `if phase ==
LoopPhase.TRAIN: ... elif phase == LoopPhase.VAL:`, where the step runs under the same test), and
in evaluation loops (under `torch.no_grad()`, after `model.eval()` or with
`model.eval()` in the loop's body, in a function named for evaluation, or a pass that moves each
batch, runs the model under `torch.no_grad()` and then only saves or prints what it computed, a
latent cache's `np.savez`) are not flagged; the optimizer step of gradient accumulation
(`if (i + 1) %
accumulate == 0: optimizer.step()`) is training, and is; so is what a gate on the accumulation count
runs (`if step % args.gradient_accumulation_steps == 0:`), once per optimizer step. Nor are reads of
tensors in host memory: a loader's batch before it is moved (also a batch a function is handed and
moves only after the read, `batch = move_to_device(batch, device)`, and a batch read before the
loop's body binds its name anew, `labels = one_hot(labels.numpy())`), `from_numpy`. A module's
`forward`, and the methods and functions of its file that it calls, run on every step of whatever
trains the model, also where no loop lint can follow calls it: there a read of a tensor the module
keeps on its device is flagged, a buffer it registers or a parameter its `__init__` binds (MoCo's
queue pointer, `ptr = int(self.queue_ptr)`; a step counter, `self.step.item()`), outside evaluation
branches (`if not self.training:`) and `@torch.no_grad()` forwards. Nor the reads of a
reinforcement-learning interaction loop, one that steps an environment (`env.step(action)`) on every
iteration, itself or in a function of the file it calls (an agent's `step(action)` method around
`self.env.step(action)`), nor those of the functions it calls: the action comes back to the host at
every environment step by design, and the step's time is the environment's. A loop that calls a
function stepping the environment in its own loop (a rollout) is not one: its reads are per update.
Nor a stop flag the ranks agree on: a tensor the loop hands to `dist.all_reduce` or `dist.broadcast`
and then reads to decide a branch (`if stop.item():`), which every rank needs. Nor a read that
decides when a loop inside the step ends, an `if` whose body is only `break`, or notes a flag
then breaks (greedy decoding, `if decoder_input.item() == EOS_token: break`; a line search's `if
kl.item() < limit: accepted = True; break`): the host must know how many times to run it. A read
that breaks the training loop itself is still reported. Nor the reads of a training loop that calls,
on every step, an evaluation function of the file that reads a value to the host (`acc =
evaluate(model)` returning `correct.item()`, one step an epoch in full-graph training): the step
waits there anyway. Nor the reads of a training step that, after its optimizer step, switches a
model to eval mode and reads a value on every step (pyGAT's and pygcn's `train(epoch)`: one
full-batch step, then the validation forward whose loss is printed and returned for early stopping):
the step waits there anyway, and the reads after `eval()` are the evaluation's. A loop over a loader
in a function the file only calls with autograd off (`calc_loss_loader`, called by `evaluate_model`
under `torch.no_grad()`) is evaluation; so is a function named for it that puts the model in
`eval()` mode and computes under `with torch.no_grad():` or trains nothing (no backward, no
optimizer step: PyG's `def test(): model.eval(); ...`). Nor a read under `if isinstance(v,
torch.Tensor):` in a function or method of another file that every training call hands plain Python
values only (a metric logger's `update(loss=loss_value, lr=lr)`, with `loss_value = loss.item()` and
the optimizer's `param_groups[0]["lr"]`): that branch never runs. Handed a tensor by any call
(DETR's loss dict), it is reported. Nor, in a notebook, the reads of a training loop that trains
on the host (it moves nothing, in its body or the functions of the notebook it calls, and runs no
model the notebook moves): a notebook's cells are separate runs, and a cell that only prints the
CUDA device puts nothing on it (TP302 reads notebooks so too). Nor a
read whose value a function of the step hands, through the names it binds from it, to OpenCV, SciPy
or scikit-image (RITM's click simulation: `cv2.distanceTransform` of each step's error region):
that part of the algorithm runs on the host.

{WAITS_LEFT_ALONE_DOC}

{SMALL_MODELS_DOC}

## Why is this slow
The host cannot read a value the device has not computed yet, so it blocks until the device's
queue drains. The device then idles while the host prepares and launches the next step, on
every step. On a CPU run the cost is smaller but the call still forces a copy and breaks
`torch.compile` graphs.

## Example
```python
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    running += loss.item()
```

## Use instead
```python
for step, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    running += loss.detach()  # stays on the device
    if step % 100 == 0:
        print(running.item() / 100)  # one sync per 100 steps
        running.zero_()
```

## Fix safety
No fix: where to accumulate and how often to log is the author's choice.

## References
{REFERENCES}; "7個提升PyTorch性能的技巧" (PyTorch Lightning team), "避免CPU到GPU的傳輸"; "PyTorch |
Tricks for Faster Training", "Avoid unnecessary CPU-GPU synchronizations".
""",
    check=_check_host_sync,
)


# TP202 ------------------------------------------------------------------------------------------


def _formatted_tensors(node: ast.AST, tensors: TensorFacts) -> Iterator[ast.expr]:
    if isinstance(node, ast.FormattedValue):
        if tensors.on_device(node.value):
            yield node.value
    elif isinstance(node, ast.Call):
        func = node.func
        if (isinstance(func, ast.Name) and func.id in {"print", "str", "repr"}) or (
            isinstance(func, ast.Attribute)
            and func.attr == "format"
            and isinstance(func.value, ast.Constant)
            and isinstance(func.value.value, str)
        ):
            yield from (a for a in node.args if tensors.on_device(a))
        elif isinstance(func, ast.Attribute) and func.attr in _PROGRESS_POSTFIX:
            yield from (v for v in _postfix_values(node) if tensors.on_device(v))
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _text(node.left):
        parts = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        for part in parts:
            # ``"%g" * 3 % (*mloss, n)`` (YOLOv5): a starred tensor is formatted element-wise
            value = part.value if isinstance(part, ast.Starred) else part
            if tensors.on_device(value):
                yield value


# tqdm's progress-bar postfix: every value that is not a number or a string goes through
# ``str()`` (``pbar.set_postfix(loss=loss)`` prints the tensor, on every step it is called).
_PROGRESS_POSTFIX = frozenset({"set_postfix", "set_postfix_str"})


def _postfix_values(call: ast.Call) -> list[ast.expr]:
    """The values a postfix call formats: its keywords, its positional argument, and the values
    of a dict given there (``set_postfix({"loss": loss})``)."""
    out = [k.value for k in call.keywords if k.arg is not None]
    for arg in call.args[:1]:
        out += list(arg.values) if isinstance(arg, ast.Dict) else [arg]
    return out


def _text(node: ast.expr) -> bool:
    """A format string: a literal, or literals joined and repeated (``"%11s" * 2 + "%g" * 5``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        return _text(node.left) or (isinstance(node.op, ast.Add) and _text(node.right))
    return False


def _check_tensor_formatted(ctx: FileContext) -> Iterator[Report]:
    for node, scope in _hot(ctx):
        for value in _formatted_tensors(node, ctx.tensors(scope)):
            if not _behind_a_tensor_check(ctx, value, scope):
                yield Report(value)


def _behind_a_tensor_check(ctx: FileContext, node: ast.AST, scope: Scope) -> bool:
    """Inside the body of an ``if`` on a tensor (``if torch.min(y) < -1.: print(...)``): a
    sanity check's report, run when the check fails; TP204 reports the check itself (issue
    32: VITS's mel_spectrogram)."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
        checks = isinstance(ancestor, ast.If) and child in ancestor.body
        if checks and any(True for _ in _tensor_operands(ancestor.test, ctx.tensors(scope))):  # type: ignore[attr-defined]
            return True
        child = ancestor
    return False


TENSOR_FORMATTED_IN_LOOP = Rule(
    code="TP202",
    name="tensor-formatted-in-training-loop",
    message="Printing or formatting a tensor copies it to the host and waits for the device",
    technique="avoid-syncs",
    doc=f"""\
## What it does
Flags a tensor passed to `print`, `str`, `repr`, `str.format` or `%`, placed in an f-string,
or given to a tqdm progress bar's `set_postfix` (`pbar.set_postfix(loss=loss)`: tqdm formats
every value that is not a number with `str()`), inside a training loop, unless a logging
cadence (`if step % N == 0:`) gates it.

{WAITS_LEFT_ALONE_DOC}

{SMALL_MODELS_DOC}

## Why is this slow
Formatting a tensor reads its values on the host, which waits for every queued kernel to
finish: a hidden `.item()` on every step.

## Example
```python
for step, (x, y) in enumerate(loader):
    loss = train_step(x, y)
    print(f"step {{step}} loss {{loss}}")
```

## Use instead
```python
for step, (x, y) in enumerate(loader):
    loss = train_step(x, y)
    if step % 100 == 0:
        print(f"step {{step}} loss {{loss.item():.4f}}")
```

## Fix safety
No fix: the logging cadence is the author's choice.

## References
{REFERENCES}.
""",
    check=_check_tensor_formatted,
)


# TP203 ------------------------------------------------------------------------------------------

# ``torch.unique`` too: its output's length is the number of distinct values, copied to the host
# before the output is allocated (torch.cuda.set_sync_debug_mode reports it)
_DATA_DEPENDENT_FUNCTIONS = frozenset(
    {"torch.nonzero", "torch.masked_select", "torch.argwhere"}
    | {"torch.unique", "torch.unique_consecutive"}
)
_DATA_DEPENDENT_METHODS = frozenset(
    {"nonzero", "masked_select", "argwhere", "unique", "unique_consecutive"}
)
# Only a tensor has these methods (a NumPy array has ``nonzero()`` too, but not these):
# FastSpeech 2's loss selects ``mel_predictions.masked_select(mel_masks.unsqueeze(-1))`` from
# what its forward is handed.
_TENSOR_ONLY_SELECTIONS = frozenset({"masked_select", "argwhere"})
_MASK_FUNCTIONS = frozenset(
    {
        "torch.isnan",
        "torch.isinf",
        "torch.isfinite",
        "torch.logical_and",
        "torch.logical_or",
        "torch.logical_not",
        "torch.logical_xor",
        "torch.eq",
        "torch.ne",
        "torch.gt",
        "torch.ge",
        "torch.lt",
        "torch.le",
        "torch.isin",
    }
)


# What combines two masks into a mask: logic, and ``*`` (a product of bool tensors is one).
_MASK_OPS = (ast.BitAnd, ast.BitOr, ast.BitXor, ast.Mult)
# Tensor methods that compare elementwise, and those that only reshape (a mask stays one).
_MASK_METHODS = frozenset(
    {"gt", "ge", "lt", "le", "eq", "ne", "isnan", "isinf", "isfinite", "logical_not"}
    | {"logical_and", "logical_or", "logical_xor"}
)
_SHAPE_METHODS = frozenset(
    {"unsqueeze", "squeeze", "view", "reshape", "expand", "expand_as", "flatten", "t"}
    | {"transpose", "permute", "contiguous", "repeat"}
)


# Factories that make a boolean tensor when given ``dtype=torch.bool``.
_BOOL_FACTORIES = frozenset(
    f"torch.{f}" for f in ("eye", "zeros", "ones", "full", "empty", "tril", "triu", "rand")
)


def _bool_dtype(ctx: FileContext, call: ast.Call) -> bool:
    dtype = keyword(call, "dtype")
    return dtype is not None and ctx.names.qualname(dtype.value) == "torch.bool"


def _changes_dtype(ctx: FileContext, call: ast.Call) -> bool:
    """``.to(...)`` given a dtype (``x.to(torch.float)``, ``dtype=``); not ``.to(device)``."""
    if keyword(call, "dtype") is not None:
        return True
    for arg in call.args:
        qual = ctx.names.qualname(arg) or ""
        if qual.startswith("torch.") and qual != "torch.device":
            return True
    return False


def _is_mask(
    node: ast.expr, ctx: FileContext, tensors: TensorFacts, seen: frozenset[str] = frozenset()
) -> bool:
    """True when ``node`` is certainly a boolean tensor. ``seen``: the names being read, whose
    binding from themselves (``mask = mask.to(device)``) their other bindings decide."""
    if isinstance(node, ast.Compare):
        return tensors.is_tensor(node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        return _is_mask(node.operand, ctx, tensors, seen)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _MASK_OPS):
        return _is_mask(node.left, ctx, tensors, seen) and _is_mask(node.right, ctx, tensors, seen)
    if isinstance(node, ast.Call):
        qual = ctx.names.qualname(node.func)
        if qual in _MASK_FUNCTIONS:
            return True
        if qual in _BOOL_FACTORIES and _bool_dtype(ctx, node):
            return True  # SimCLR's ``torch.eye(n, dtype=torch.bool)``
        func = node.func
        if not isinstance(func, ast.Attribute):
            return False
        if func.attr == "bool" and not node.args:
            return True
        if func.attr in ("to", "cuda") and not _changes_dtype(ctx, node):
            return _is_mask(func.value, ctx, tensors, seen)  # a mask moved to the device is one
        if func.attr in _MASK_METHODS:  # ``(pos + neg).gt(0)``, ``x.isnan()`` of a tensor
            return tensors.is_tensor(func.value)
        # a mask reshaped: ``pos.unsqueeze(2).expand_as(conf_data)``
        return func.attr in _SHAPE_METHODS and _is_mask(func.value, ctx, tensors, seen)
    name = dotted(node)
    if name is not None and name in tensors.names:
        if name in seen:
            return True  # ``mask = mask.to(device)``: what it was bound to before decides
        values = tensors.values.get(name, [])
        grounded = [v for v in values if v is not None and name not in map(dotted, subtree(v))]
        return (
            bool(grounded)
            and all(v is not None for v in values)
            and all(_is_mask(v, ctx, tensors, seen | {name}) for v in values if v is not None)
        )
    return False


def _check_data_dependent_shape(ctx: FileContext) -> Iterator[Report]:
    for node, scope in _hot(ctx):
        if isinstance(node, ast.Call):
            qual = ctx.names.qualname(node.func)
            if (
                (
                    qual in _DATA_DEPENDENT_FUNCTIONS
                    or (qual == "torch.where" and len(node.args) == 1 and not node.keywords)
                )
                and not (node.args and ctx.tensors(scope).is_host(node.args[0]))
            ) or (
                qual is None
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _DATA_DEPENDENT_METHODS
                and (
                    node.func.attr in _TENSOR_ONLY_SELECTIONS
                    or ctx.tensors(scope).is_tensor(node.func.value)
                )
                and not ctx.tensors(scope).is_host(node.func.value)
            ):
                yield Report(node)
        elif isinstance(node, ast.Subscript) and (
            isinstance(node.ctx, ast.Load)
            or _read_in_place(ctx, node)
            or _tensor_put(ctx, node, scope)
        ):
            tensors = ctx.tensors(scope)
            # ``x[mask]``, and ``edge_index[:, mask]``: one index of several is a mask; one in
            # host memory is counted there, with no wait
            index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            index = [i for i in index if not tensors.is_host(i)]
            if _selects_by_mask(ctx, scope, node.value, index):
                yield Report(node)


# A name that says it holds a mask: ``mask``, ``train_mask``, ``pos_masks``, ``mask_k``,
# ``mask_bool`` (not ``mask_idx`` or ``mask_token_id``, which name indices).
_MASK_NAME = re.compile(r"(?:\w+_)?masks?(?:_(?:bool|[a-z0-9]))?", re.IGNORECASE)
# What a name bound to one of these holds is not a boolean mask.
_INDEX_MAKERS = frozenset(
    {"torch.arange", "torch.randperm", "torch.nonzero", "torch.argsort", "torch.multinomial"}
    | {"torch.randint", "torch.tensor", "torch.as_tensor", "torch.from_numpy"}
)
_INDEX_METHODS = frozenset({"long", "int", "nonzero", "argsort", "float", "half", "tolist"})


def _mask_name(node: ast.expr) -> tuple[str | None, ast.expr]:
    """The last word of ``node`` (``mask``, ``data.train_mask``, ``inputs["loss_mask"]``) and
    what a slice of it slices (``mask[:, k]``, ``mask[:16]``: a slice of a mask is one, and the
    binding of ``mask`` says what it holds)."""
    while isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value, node
        node = node.value
    if isinstance(node, ast.Name):
        return node.id, node
    if isinstance(node, ast.Attribute):
        return node.attr, node
    return None, node


def _named_mask(node: ast.expr, ctx: FileContext, scope: Scope) -> bool:
    """An index whose name says it is a boolean mask (:data:`_MASK_NAME`), bound by nothing in
    the scope that makes indices or host values: PyG's ``out[data.train_mask]``, a loss's
    ``confidence[mask, :]`` with ``mask = hard_negative_mining(...)``, a head's ``x[mask]`` of
    what its ``forward`` is handed."""
    name, root = _mask_name(node)
    if name is None or not _MASK_NAME.fullmatch(name):
        return False
    if not isinstance(root, ast.Name):
        return True
    bound = bound_in(ctx, root.id, scope)
    if bound is None and scope is not ctx.tree and root.id not in parameter_names(scope):
        scope = ctx.tree  # a name of the file's (``keep_mask = torch.arange(0, n, 2)``)
        bound = bound_in(ctx, root.id, scope)
    return not any(_not_a_mask(v, ctx, scope) for v in bound or ())


def _not_a_mask(value: ast.expr, ctx: FileContext, scope: Scope, depth: int = 0) -> bool:
    """``value`` holds indices or host values, not a mask on the device: a Python value, what
    makes indices (``torch.randperm``, ``.nonzero()``, ``.long()``), a NumPy result
    (``np.where(m)[0]``), or a slice or move of one (``indices[i * b:(i + 1) * b]`` with
    ``indices = torch.arange(n).to(device)``)."""
    if isinstance(value, (ast.Constant, ast.Dict)):
        return True
    if isinstance(value, (ast.List, ast.Tuple)):  # ``[0, 2, 5]``, not ``[m1.cuda(), m2.cuda()]``
        return all(_not_a_mask(e, ctx, scope, depth) for e in value.elts)
    if isinstance(value, ast.ListComp):
        return _not_a_mask(value.elt, ctx, scope, depth)
    if isinstance(value, ast.Subscript):
        return _not_a_mask(value.value, ctx, scope, depth)
    if isinstance(value, ast.Compare):
        return _numpy_value(value.left, ctx, scope, depth)  # a NumPy array of booleans
    if isinstance(value, ast.Call):
        qual = ctx.names.qualname(value.func) or ""
        dtype = next((k.value for k in value.keywords if k.arg == "dtype"), None)
        if qual in _INDEX_MAKERS and not (dtype and ctx.names.qualname(dtype) == "torch.bool"):
            return True
        if qual.startswith(("numpy.", "random.")) or qual in ("torch.argwhere", "torch.topk"):
            return True
        if qual == "torch.where" and len(value.args) == 1:
            return True  # ``torch.where(m)[0]``: the indices of a mask
        if isinstance(value.func, ast.Name) and value.func.id in (
            "list",
            "range",
            "sorted",
            "int",
            "len",
        ):
            return True
        func = value.func
        if not isinstance(func, ast.Attribute):
            return False
        if func.attr in _INDEX_METHODS:
            return True
        return func.attr in ("to", "cuda") and _not_a_mask(func.value, ctx, scope, depth)
    if isinstance(value, ast.Name) and depth < 2:
        bound = bound_in(ctx, value.id, scope)
        return bool(bound) and all(_not_a_mask(v, ctx, scope, depth + 1) for v in bound or ())
    return False


def _numpy_value(value: ast.expr, ctx: FileContext, scope: Scope, depth: int) -> bool:
    """``value`` is what a NumPy function returns (``np.random.random(n)``), or a name bound
    only to such values."""
    if isinstance(value, ast.Call):
        return (ctx.names.qualname(value.func) or "").startswith("numpy.")
    if isinstance(value, ast.Name) and depth < 2:
        bound = bound_in(ctx, value.id, scope)
        return bool(bound) and all(_numpy_value(v, ctx, scope, depth + 1) for v in bound or ())
    return False


def _moved_holder(index: ast.expr, tensors: TensorFacts) -> bool:
    """``data.train_mask`` of a ``data`` moved to the device (``dataset[0].to(device)``)."""
    return isinstance(index, ast.Attribute) and tensors.is_tensor(index.value)


def _selects_by_mask(
    ctx: FileContext, scope: Scope, value: ast.expr, index: Sequence[ast.expr]
) -> bool:
    """``value[index]`` selects through a boolean mask, one index of several at least: a mask
    lint knows, a comparison indexing a tensor or what a module is handed, or an index named as
    a mask (:func:`_named_mask`) of such a value."""
    tensors = ctx.tensors(scope)
    if any(_is_mask(i, ctx, tensors) for i in index):
        return True
    if tensors.is_host(value):
        return False
    if any(_a_comparison(i, ctx, scope, of_module_input=True) for i in index):
        return True
    tensor = _a_tensor(value, tensors) or _a_module_input(value, ctx, scope)
    if tensor and any(_a_comparison(i, ctx, scope) for i in index):
        return True
    return any(_named_mask(i, ctx, scope) and (tensor or _moved_holder(i, tensors)) for i in index)


def _tensor_put(ctx: FileContext, node: ast.Subscript, scope: Scope) -> bool:
    """``embeds[mask] = image_embeds.view(-1, d)``: a tensor of values assigned through a mask is
    an ``index_put_``, which turns a boolean mask into indices first (``nonzero``, a wait). Only
    a single value in host memory takes the masked fill (a Python number, ``torch.tensor(0.)``):
    ``index_put_`` dispatches to ``masked_fill_`` for one element on the CPU, and a 0-dim
    tensor on the device (``x.sum()``) still goes through ``nonzero``. The value is a tensor by
    lint's tensor facts or by a method only tensors have."""
    parent = ctx.parents.get(id(node))
    if not (isinstance(parent, ast.Assign) and node in parent.targets):
        return False
    value = parent.value
    if isinstance(value, ast.Constant) or (_a_number(value) and ctx.tensors(scope).is_host(value)):
        return False  # a Python number, or one in host memory: index_put_ fills by the mask
    if isinstance(value, ast.Subscript) and ast.dump(value.slice) == ast.dump(node.slice):
        return False  # ``distance[mask] = dist[mask]``: the selection's read is the finding
    return _a_tensor(value, ctx.tensors(scope))


def _a_number(node: ast.expr) -> bool:
    """``torch.tensor(0.0)``: a tensor of one literal number (also negative)."""
    return (
        isinstance(node, ast.Call)
        and dotted(node.func) in {"torch.tensor", "torch.as_tensor"}
        and len(node.args) == 1
        and isinstance(node.args[0], (ast.Constant, ast.UnaryOp))
    )


def _read_in_place(ctx: FileContext, node: ast.Subscript) -> bool:
    """``l[mask] -= 1``: an augmented assignment reads the selection before it writes it back
    (a plain ``x[mask] = 0`` only writes, as a masked fill)."""
    parent = ctx.parents.get(id(node))
    return isinstance(parent, ast.AugAssign) and parent.target is node


# Methods that only a tensor has, each returning a tensor: NumPy arrays have none of them, and
# a module's ``.to()``/``.float()`` is never indexed.
_TENSOR_ONLY_METHODS = frozenset(
    {"to", "float", "half", "double", "long", "int", "bfloat16", "detach", "contiguous"}
    | {"clone", "permute", "unsqueeze", "sigmoid", "softmax", "log_softmax"}
)


def _a_tensor(node: ast.expr, tensors: TensorFacts) -> bool:
    """A tensor, as lint's tensor facts know it or by a method only tensors have
    (``pred.to(torch.float32)``)."""
    if tensors.is_tensor(node):
        return True
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _TENSOR_ONLY_METHODS
    )


def _a_module_input(node: ast.expr, ctx: FileContext, scope: Scope, depth: int = 0) -> bool:
    """A parameter of a method of a module class (``def forward(self, x, edge_index, ...)``
    of an ``nn.Module`` or a library's layer), or a slice of one (``target = x[:, 1:]``): what
    a model is handed each step is its batch's tensors (ogb's ``RGCNConv.forward`` selecting
    ``edge_index[:, edge_type == i]``)."""
    from torchpace.lint.project import plain_class

    if isinstance(node, ast.Subscript) and depth < 2:  # ``annotations[j]``, ``x[:, 4]``
        return _a_module_input(node.value, ctx, scope, depth + 1)
    if not isinstance(node, ast.Name):
        return False
    owner = ctx.parents.get(id(scope))
    if not (
        (isinstance(owner, ast.ClassDef) and owner.bases and not plain_class(ctx, owner))
        or _called_each_step(ctx, scope)
    ):
        return False
    if node.id in parameter_names(scope):
        return True
    bound = bound_in(ctx, node.id, scope) if depth < 2 else None
    # ``x = x[x[:, 4] != -1]``, a selection of itself, keeps what the name is
    bound = [v for v in bound or () if not _selects_from(v, node.id)]
    return bool(bound) and all(
        isinstance(v, ast.Subscript) and _a_module_input(v.value, ctx, scope, depth + 1)
        for v in bound
    )


def _selects_from(value: ast.expr, name: str) -> bool:
    """``value`` is ``name[...]`` (also ``name[...][...]``)."""
    while isinstance(value, ast.Subscript):
        value = value.value
    return isinstance(value, ast.Name) and value.id == name


def _called_each_step(ctx: FileContext, scope: Scope) -> bool:
    """A module-level function of this file that another file's training step calls, handing
    it more than plain Python values (an entry, :mod:`torchpace.lint.project`): StarGANv2-VC's
    ``compute_d_loss(nets, args, x_real, y_org, y_trg, ...)``, called by its trainer's step
    with the batch's tensors."""
    return (
        isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef))
        and scope.name in ctx.entries
        and ctx.parents.get(id(scope)) is ctx.tree
    )


def _a_comparison(
    node: ast.expr, ctx: FileContext, scope: Scope, depth: int = 0, *, of_module_input: bool = False
) -> bool:
    """``node`` is a comparison (``a == b``, ``~m``, ``m1 & m2`` of comparisons), or a name the
    scope binds to one and nothing else: as the index of a tensor it can only be a boolean mask
    (``pred[batch.y == batch.y]`` where what ``batch.y`` is, lint does not know; a Python bool
    would index ``pred[True]``, which nobody writes). ``of_module_input``: one comparison at
    least compares a module's input (:func:`_a_module_input`), so the mask is a tensor whatever
    it indexes (``embed[mask]`` with ``mask = target != ignore_index`` in a ``forward``)."""
    if isinstance(node, ast.Compare):
        if _numpy_value(node.left, ctx, scope, depth):
            return False  # ``np.random.random(n) < p``: a mask in host memory, counted there
        return all(isinstance(op, _ELEMENTWISE) for op in node.ops) and (
            not of_module_input
            or any(_a_module_input(o, ctx, scope) for o in (node.left, *node.comparators))
        )
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        return _a_comparison(node.operand, ctx, scope, depth, of_module_input=of_module_input)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.Mult)):
        sides = (node.left, node.right)
        return all(_a_comparison(n, ctx, scope, depth) for n in sides) and (
            not of_module_input
            or any(_a_comparison(n, ctx, scope, depth, of_module_input=True) for n in sides)
        )
    if isinstance(node, ast.Name) and depth < 2:
        bound = bound_in(ctx, node.id, scope)  # the scope's own bindings, not the file's
        return bool(bound) and all(
            _a_comparison(v, ctx, scope, depth + 1, of_module_input=of_module_input)
            for v in bound or ()
        )
    return False


# ``in`` and ``is`` give a Python bool whatever their operands are.
_ELEMENTWISE = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


DATA_DEPENDENT_SHAPE_IN_LOOP = Rule(
    code="TP203",
    name="data-dependent-shape-in-training-loop",
    message="The result's shape depends on tensor values, so the host waits for the device",
    technique="avoid-syncs",
    doc=f"""\
## What it does
Flags `nonzero()`, single-argument `torch.where`, `masked_select`, `argwhere`, `torch.unique` (and
`unique_consecutive`) and indexing with a boolean mask (`x[x > 0]`, `x[mask]` where `mask` is a
comparison, `edge_index[:, mask]`) inside a training loop. A comparison indexing a tensor is taken
as a mask even where lint does not know what is compared (`pred.float()[batch.y == batch.y]`): a
Python bool would index `pred[True]`.
In a method of a module class, what the method is given is taken as the batch's tensors
(`edge_index[:, edge_type == i]` in a graph layer's `forward`), and so are slices of it; so
is what another file's training step hands a function of this one (a loss function's
`out[y_org != y_trg]`). `masked_select` and `argwhere` are tensor methods only, so they are
flagged on any value not known to be in host memory.
An index whose name says it is a mask (`mask`, `train_mask`, `pos_masks`, `mask_k`, `mask_bool`;
not `mask_idx` or `mask_token_id`) is taken as one where it indexes a tensor, what a module is
handed, or is a field of a tensor object moved to the device (PyG's `out[data.train_mask]`),
unless the function binds it to indices (`randperm`, `nonzero()`, `.long()`) or a Python value.
A mask is also what a tensor's comparison method gives (`(pos + neg).gt(0)`, `x.isnan()`), a
product of masks (`(u > 0) * (l == u)`), a mask reshaped (`pos.unsqueeze(2).expand_as(x)`), a
factory given `dtype=torch.bool`, and a mask moved (`torch.eye(n, dtype=torch.bool).to(device)`);
a tensor is also what the first API's typed constructors make (`torch.LongTensor(n, m)`, on the
host) and what `Variable(x)` wraps. An augmented assignment through a mask (`l[mask] -= 1`)
reads the selection first, and is flagged, as is assigning a tensor through a mask (`embeds[mask]
= image_embeds.view(-1, d)`, also a 0-dim tensor on the device, `x[mask] = y.sum()`: an
`index_put_`, which turns the mask into indices). Assigning a number through a mask (`x[mask] =
0`, `x[mask] = torch.tensor(0.)`) is a masked fill and is not flagged, nor a tensor or mask in
host memory (a loader's batch before it is moved, `torch.from_numpy`, a factory without
`device=`, or what is computed from one such as `torch.arange(n) < k`; a NumPy comparison such as
`np.random.random(n) < p`): its count needs no wait for the device.

{WAITS_LEFT_ALONE_DOC}

{SMALL_MODELS_DOC}

## Why is this slow
The size of the result (the count of matches, or of distinct values) is only known once the
device has computed it, so PyTorch copies the count to the host and waits before it can
allocate the output. Under `torch.compile` the data-dependent shape also breaks the graph.

## Example
```python
valid = logits[labels != IGNORE]
```

## Use instead
```python
weights = (labels != IGNORE).float()
loss = (F.cross_entropy(logits, labels.clamp(min=0), reduction="none") * weights).sum()
loss = loss / weights.sum().clamp(min=1)
```
Fixed-shape arithmetic with the mask (`torch.where(mask, a, b)`, `masked_fill`, multiplying by
the mask) keeps the work on the device.

## Fix safety
No fix: the fixed-shape form depends on what the selected values are used for.

## References
{REFERENCES} (lists `cuda_tensor.nonzero()`).
""",
    check=_check_data_dependent_shape,
)


# TP204 ------------------------------------------------------------------------------------------


def _tensor_operands(test: ast.expr, tensors: TensorFacts) -> Iterator[ast.expr]:
    if isinstance(test, ast.BoolOp):
        for value in test.values:
            yield from _tensor_operands(value, tensors)
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        yield from _tensor_operands(test.operand, tensors)
    elif tensors.is_tensor(test) and not tensors.is_host(test):
        yield test


def _made_a_tensor_below(ctx: FileContext, node: ast.If, operand: ast.expr, scope: Scope) -> bool:
    """``operand`` compares a parameter of the function with a constant, and the function binds
    that parameter to a tensor only inside this ``if`` (TRL's ``if beta == 0: ... elif beta ==
    1: ... else: beta = torch.tensor(beta, ...)``), outside any loop, and no call of the file
    hands it a tensor: at the test it still holds what the caller passed, a config's float."""
    if not (
        isinstance(operand, ast.Compare)
        and len(operand.comparators) == 1
        and isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef))
    ):
        return False
    sides = (operand.left, operand.comparators[0])
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    if len(names) != 1 or not any(isinstance(s, ast.Constant) for s in sides):
        return False
    name = names[0]
    if name not in parameter_names(scope):
        return False
    for given in passed_for(ctx, scope, name) or ():
        if given is None:
            continue  # the default
        tensors = ctx.tensors(ctx.enclosing_scope(given))
        if tensors.is_tensor(given) and not tensors.is_host(given):
            return False  # a caller hands a tensor: the test reads the device
    top: ast.AST = node  # the first ``if`` of an ``if``/``elif`` chain
    for parent in ctx.ancestors(node):
        if isinstance(parent, ast.If) and len(parent.orelse) == 1 and parent.orelse[0] is top:
            top = parent
            continue
        if isinstance(parent, LOOPS):
            return False  # a later iteration reads the tensor
        if parent is scope:
            break
    stores = [
        n
        for n in walk(scope.body)
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
    ]
    inside = {id(n) for n in subtree(top)}
    return bool(stores) and all(id(n) in inside for n in stores)


def _check_tensor_branch(ctx: FileContext) -> Iterator[Report]:
    for node, scope in _hot(ctx):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            for operand in _tensor_operands(node.test, ctx.tensors(scope)):
                if id(operand) not in ctx.loops.hot:
                    continue  # behind ``step % n == 0 and ...``
                if isinstance(node, ast.If) and _made_a_tensor_below(ctx, node, operand, scope):
                    continue  # ``if beta == 0:`` before ``else: beta = torch.tensor(beta)``
                if _agreed_decision(ctx, operand) or _ends_inner_loop(ctx, operand):
                    continue  # the loop needs the value to decide (TP201 leaves these too)
                yield Report(operand)


TENSOR_BRANCH_IN_LOOP = Rule(
    code="TP204",
    name="tensor-branch-in-training-loop",
    message="Python control flow on a tensor value waits for the device",
    technique="avoid-syncs",
    doc=f"""\
## What it does
Flags `if`, `while`, conditional expressions and `assert` whose condition is a tensor, such as
`if loss > 10:` or `if torch.isnan(loss).any():`, inside a training loop; also a branch on each
element of a device tensor the loop iterates (`for d in done: if d:`), one wait per element. Not
a stop flag the ranks agree on (a tensor the loop all-reduces or broadcasts, then branches on),
nor an `if` that only leaves a loop nested in the step (a conjugate-gradient loop's `if rdotr <
tol: break`, a line search's `if kl < limit: accepted = True; break`), nor such a loop's own
`while` test (`while rdotr > tol:`): the host must know when that loop ends. Nor a test of a
function's parameter against a constant where the function makes that name a tensor only inside
the `if` (TRL's `if beta == 0: ... else: beta = torch.tensor(beta, ...)`, outside any loop), and
no call of the file hands it a tensor: the test reads what the caller passed.

{WAITS_LEFT_ALONE_DOC}

{SMALL_MODELS_DOC}

## Why is this slow
Python needs a `bool`, so the tensor is copied to the host, which waits for the device to
finish everything queued before it. Under `torch.compile` the branch also breaks the graph.

## Example
```python
if torch.isnan(loss).any():
    raise RuntimeError("loss is NaN")
```

## Use instead
```python
bad = torch.isnan(loss).any()  # stays on the device
...
if step % 100 == 0 and bad:  # checked once per 100 steps
    raise RuntimeError("loss is NaN")
```
Or use `torch.where` to keep both branches on the device.

## Fix safety
No fix: how often to check is the author's choice.

## References
{REFERENCES}.
""",
    check=_check_tensor_branch,
)


# TP205 ------------------------------------------------------------------------------------------


def _aliases(ctx: FileContext, name: str) -> set[str]:
    """Names bound to the function ``name`` itself, not to a call of it:
    ``sync = torch.cuda.synchronize if cuda else noop`` (issue 32), ``self.sync = ...``,
    ``sync = functools.partial(torch.cuda.synchronize, device)``; read once per file and name."""
    cache: dict[str, set[str]] = ctx.__dict__.setdefault("_tp_aliases", {})
    if name not in cache:
        cache[name] = _find_aliases(ctx, name)
    return cache[name]


def _find_aliases(ctx: FileContext, name: str) -> set[str]:
    out: set[str] = set()
    for node in ctx.of_type(ast.Assign):
        called = {id(c.func) for c in subtree(node.value) if isinstance(c, ast.Call)}
        refers = any(
            isinstance(sub, (ast.Attribute, ast.Name))
            and id(sub) not in called
            and ctx.names.qualname(sub) == name
            for sub in subtree(node.value)
        )
        if refers:
            out |= {d for d in (dotted(t) for t in node.targets) if d}
    return out


def check_calls_to(name: str, *, waits: bool) -> Check:
    """A check reporting every hot call of the function ``name``, by its name or through a
    name bound to it (:func:`_aliases`); ``waits``: see :func:`_hot`."""

    def check(ctx: FileContext) -> Iterator[Report]:
        aliases: set[str] | None = None
        for call, qual, _ in hot_calls(ctx, waits=waits):
            if qual == name:
                yield Report(call)
                continue
            if qual is None or not qual.startswith("torch."):
                if aliases is None:
                    aliases = _aliases(ctx, name)
                if aliases and dotted(call.func) in aliases:
                    yield Report(call)

    return check


# What stalls the host until the device, or every rank, has caught up: the device's queue drained,
# or a barrier (a collective whose wait blocks the host, NCCL's included).
_WAITS = frozenset(
    {"torch.cuda.synchronize", "torch.distributed.barrier", "torch.distributed.monitored_barrier"}
)


def _waits(ctx: FileContext, call: ast.Call, qual: str | None) -> bool:
    """``torch.cuda.synchronize()``, ``dist.barrier()``, Accelerate's
    ``accelerator.wait_for_everyone()`` or Fabric's ``fabric.barrier()``."""
    if qual in _WAITS:
        return True
    func = call.func
    if not isinstance(func, ast.Attribute) or (qual or "").startswith("torch."):
        return False
    owner = (dotted(func.value) or "").rsplit(".", 1)[-1].lower()
    return func.attr == "wait_for_everyone" or (func.attr == "barrier" and owner == "fabric")


def _only_waits(where: FileContext, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A helper that does nothing but wait (detectron2's and PixArt's ``synchronize()``: return
    early on one process, else ``dist.barrier()``; or ``if dist.is_initialized():
    dist.barrier()``): its docstring, guards that return, names it binds for them, and the
    wait, also under a test."""
    return _waits_only(where, function.body) is True


def _waits_only(where: FileContext, body: list[ast.stmt]) -> bool | None:
    """True: ``body`` waits and does nothing else (:func:`_only_waits`); None: it does nothing
    at all (guards that return nothing, names for them, a docstring, ``pass``); False: it does
    something else."""
    waited = False
    for stmt in body:
        if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Return) and stmt.value is None):
            continue  # a helper that returns a value (a timer's ``time.time()``) is more
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and not _calls_wait(where, stmt):
            continue
        if (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and _waits(where, stmt.value, where.names.qualname(stmt.value.func))
        ):
            waited = True
            continue
        if isinstance(stmt, ast.If):
            branches = [_waits_only(where, stmt.body), _waits_only(where, stmt.orelse)]
            if False in branches:
                return False
            waited = waited or True in branches
            continue
        return False
    return True if waited else None


def _calls_wait(where: FileContext, stmt: ast.stmt) -> bool:
    return any(
        isinstance(n, ast.Call) and _waits(where, n, where.names.qualname(n.func))
        for n in subtree(stmt)
    )


def _wait_helper(ctx: FileContext, call: ast.Call) -> bool:
    """``call`` calls a module-level function of this or another project file that only waits
    (:func:`_only_waits`); read once per file and callee."""
    from torchpace.lint.project import definition_of

    func = call.func
    if not isinstance(func, ast.Name) and ctx.names.import_path(func) is None:
        return False  # a method of an object (``self.log(...)``, ``x.view(...)``)
    key = dotted(func)
    if key is None:
        return False
    cache: dict[str, bool] = ctx.__dict__.setdefault("_tp_wait_helpers", {})
    if key not in cache:
        found = definition_of(ctx, call, ast.FunctionDef)
        cache[key] = found is not None and _only_waits(*found)
    return cache[key]


_CLIPS = frozenset({"clip_grad_norm_", "clip_grad_value_"})
# Names of what runs kernels when called, or whose methods do (``model(x)``, ``self.net(x)``,
# ``ema.update()``, ``self.generator.sample(z)``).
_DEVICE_WORK = re.compile(
    r"model|net|ema|encoder|decoder|generator|discriminator|critic|actor|policy|module|forward",
    re.IGNORECASE,
)


def _works(ctx: FileContext, stmt: ast.stmt, scope: Scope) -> bool:
    """``stmt`` may queue work on the device: backward, an optimizer step, gradient clipping
    (also under a test, or in a function of this file it calls), or a call of a model or of
    what its name says runs one (a forward, an EMA update)."""
    if ctx.loops.trains([stmt], scope):
        return True
    for n in walk([stmt]):
        if not isinstance(n, ast.Call):
            continue
        name = dotted(n.func) or ""
        if name.rsplit(".", 1)[-1] in _CLIPS:
            return True
        owner = name if isinstance(n.func, ast.Name) else name.rpartition(".")[0]
        callee = name.rsplit(".", 1)[-1]
        if _DEVICE_WORK.search(owner.removeprefix("self.")) or _DEVICE_WORK.fullmatch(callee):
            return True
        if any(f.name == "forward" for f in ctx.loops.callees(n, scope)):
            return True  # a module of this file called: its forward runs
    return False


def _waits_here(ctx: FileContext, stmt: ast.stmt, scope: Scope) -> bool:
    """``stmt`` itself (not under a test, nor in a conditional expression) waits: a wait, a
    call of a name bound to ``torch.cuda.synchronize`` or of a helper that only waits, or a
    read of a device value to the host (``logs = {"loss": loss.item()}``; not of a tensor the
    loader handed over on the host, which TP201 leaves alone too)."""
    if not isinstance(stmt, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return False
    conditional = {id(n) for e in walk([stmt]) if isinstance(e, ast.IfExp) for n in walk([e])}
    aliases = _aliases(ctx, "torch.cuda.synchronize")
    on_cpu = cpu_names(ctx)
    for n in walk([stmt]):
        if not isinstance(n, ast.Call) or id(n) in conditional:
            continue
        if (_sync_method(n) and not _plain_numpy(n)) or _copies_to_cpu(n, on_cpu):
            receiver = n.func.value  # type: ignore[attr-defined]
            if not ctx.tensors(scope).is_host(receiver):
                return True
        elif (
            _waits(ctx, n, ctx.names.qualname(n.func))
            or dotted(n.func) in aliases
            or _wait_helper(ctx, n)
        ):
            return True
    return False


# A test that only the main process passes: a barrier after such a block holds the other ranks
# until what it did (a save, a weight push) is done, which is what the barrier is for.
_MAIN_PROCESS = re.compile(r"rank|main_process|is_main|is_master|master_process", re.IGNORECASE)


def _after_main_process_work(ctx: FileContext, call: ast.Call) -> bool:
    """The statement before the barrier ``call`` is an ``if`` that only the main process enters
    (``if rank == 0: llm.load_weights(...)``, ``if accelerator.is_main_process: ...``)."""
    stmt = statement_of(ctx, call)
    block = block_of(ctx, stmt) if stmt is not None else None
    if not block:
        return False
    index = next(i for i, s in enumerate(block) if s is stmt)
    before = block[index - 1] if index else None
    return isinstance(before, ast.If) and _MAIN_PROCESS.search(ast.unparse(before.test)) is not None


def _copies_to_cpu(call: ast.Call, on_cpu: frozenset[str]) -> bool:
    """``x.to("cpu")``, ``x.to(loss_device)`` with a name the file binds only to the CPU: a
    blocking copy to the host, which waits for the device as ``.cpu()`` does."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "to" and len(call.args) == 1):
        return False
    target = call.args[0]
    return (isinstance(target, ast.Constant) and target.value == "cpu") or (
        isinstance(target, ast.Name) and target.id in on_cpu
    )


def statement_of(ctx: FileContext, node: ast.AST) -> ast.stmt | None:
    """The statement ``node`` is in (itself, if it is one)."""
    return next((a for a in [node, *ctx.ancestors(node)] if isinstance(a, ast.stmt)), None)


def block_of(ctx: FileContext, stmt: ast.AST) -> list[ast.stmt] | None:
    """The statement list of its parent that holds ``stmt``."""
    parent = ctx.parents.get(id(stmt))
    return next(
        (
            b
            for b in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody"))
            if isinstance(b, list) and any(s is stmt for s in b)
        ),
        None,
    )


def _on_the_cpu(ctx: FileContext, call: ast.Call) -> bool:
    """A helper handed a name the file binds only to the CPU (``sync(loss_device)`` with
    ``loss_device = torch.device("cpu")``): a guarded ``torch.cuda.synchronize(device)`` there
    waits for nothing."""
    on_cpu = cpu_names(ctx)
    return any(
        isinstance(a, ast.Name) and a.id in on_cpu
        for a in (*call.args, *(k.value for k in call.keywords))
    )


def _waited_since_work(ctx: FileContext, call: ast.Call, scope: Scope) -> bool:
    """Going back from ``call`` through the statements before it, up to the start of its loop's
    body or function, the host has already waited (:func:`_waits_here`) before any statement
    queues work (:func:`_works`): the device's queue and the ranks are already in step, and
    this wait adds an empty round trip (PixArt's ``synchronize()`` after the step's
    ``gather(loss).mean().item()``; lucidrains' second and third barriers of a step). A wait
    right before a read of the same queue (``torch.cuda.synchronize()`` then ``loss.item()``)
    is still reported: judges called Swin's and DINO's true, a step's two waits in one."""
    node: ast.AST | None = statement_of(ctx, call)
    while node is not None:
        parent = ctx.parents.get(id(node))
        block = block_of(ctx, node)
        if parent is None or block is None:
            return False
        for before in reversed(block[: next(i for i, s in enumerate(block) if s is node)]):
            if isinstance(before, ast.If) and is_cadence_gate(
                before.test, ctx.loops.cadence_helpers
            ):
                continue  # a save or a sample every N steps: on the other steps it runs nothing
            if _works(ctx, before, scope):
                return False
            if _waits_here(ctx, before, scope):
                return True
        if isinstance(parent, (*LOOPS, *NESTED_SCOPES, ast.Module)):
            return False
        node = parent
    return False


def _check_waits(ctx: FileContext) -> Iterator[Report]:
    """Every hot wait (:func:`_waits`), or call of a name bound to ``torch.cuda.synchronize``
    (:func:`_aliases`) or of a helper that only waits, reported where the loop makes it: a wait
    inside such a helper is reported at its callers."""
    hot = hot_calls(ctx, waits=True)
    if not hot:
        return
    aliases = _aliases(ctx, "torch.cuda.synchronize")
    wrappers: dict[int, bool] = {}
    for call, qual, scope in hot:
        if _waits(ctx, call, qual):
            if isinstance(scope, ast.FunctionDef) and scope in ctx.tree.body:
                if id(scope) not in wrappers:
                    wrappers[id(scope)] = _only_waits(ctx, scope)
                if wrappers[id(scope)]:
                    continue
            barrier = qual != "torch.cuda.synchronize"
            if not _waited_since_work(ctx, call, scope) and not (
                barrier and _after_main_process_work(ctx, call)
            ):
                yield Report(call)
            continue
        if qual is not None and qual.startswith("torch."):
            continue
        alias = dotted(call.func) in aliases
        if not alias and not (_wait_helper(ctx, call) and not _on_the_cpu(ctx, call)):
            continue
        if not _waited_since_work(ctx, call, scope) and (
            alias or not _after_main_process_work(ctx, call)
        ):
            yield Report(call)


SYNCHRONIZE_IN_LOOP = Rule(
    code="TP205",
    name="synchronize-in-training-loop",
    message="`torch.cuda.synchronize()` or a barrier stalls the host every step",
    technique="avoid-syncs",
    doc=f"""\
## What it does
Flags `torch.cuda.synchronize()` inside a training loop, and a barrier between processes
(`torch.distributed.barrier()`, Accelerate's `accelerator.wait_for_everyone()`, Fabric's
`fabric.barrier()`), unless a logging or checkpoint cadence gates it or an option for
diagnostics that is off by default (`if args.synchronize_step:` with a `store_true`, as timm
times its steps; TP201 lists the names). A name bound to the function
(`sync = torch.cuda.synchronize if cuda else noop`) counts as the function, and so does a call of
a helper of this or another project file that does nothing but wait (detectron2's
`comm.synchronize()`: return early on one process, else `dist.barrier()`; or a wait under a
test, `if dist.is_initialized(): dist.barrier()`): the call in the loop is
reported, not the helper, which is right where it runs once; not where it is handed a device
the file binds only to the CPU (`sync(loss_device)`). Not a wait after which the host has
already waited since the step's last work (backward, an optimizer step, gradient clipping, a call
of a model or of what its name says runs one, `model(x)`, `ema.update()`): an earlier wait, or a
read of a device value to the host not under a test (`logs = {{"loss": loss.item()}}`, then
`synchronize()`; not a read of the loader's host tensor, nor one in a conditional expression),
leaves nothing queued on this device, and the step's gradient all-reduce has already brought the
ranks together, so the second wait is an empty round trip; the first wait after the work is
reported. Nor a barrier right after a block only the main process runs (`if rank == 0:
llm.load_weights(...)`, `if accelerator.is_main_process:`): the other ranks wait for what it
did, which is what the barrier is for.

{WAITS_LEFT_ALONE_DOC}

{SMALL_MODELS_DOC}

## Why is this slow
The host stops queueing work until the device has finished all of it, so the device then waits
for the host to launch the next kernels. A barrier waits on the host as well, for every rank,
so the slowest rank's step sets everyone's. Training needs no explicit synchronisation: PyTorch
orders the work on a stream by itself, and DDP's gradient all-reduce keeps the ranks in step.

## Example
```python
loss.backward()
optimizer.step()
torch.cuda.synchronize()
```

## Use instead
```python
loss.backward()
optimizer.step()
```
To time steps, record `torch.cuda.Event(enable_timing=True)` pairs and read them rarely. Keep a
barrier where processes must agree: before one of them saves, or around evaluation.

## Fix safety
No fix: code that times steps with the host clock needs the synchronisation to be correct.

## References
{REFERENCES}.
""",
    check=_check_waits,
)

RULES = (
    HOST_SYNC_IN_LOOP,
    TENSOR_FORMATTED_IN_LOOP,
    DATA_DEPENDENT_SHAPE_IN_LOOP,
    TENSOR_BRANCH_IN_LOOP,
    SYNCHRONIZE_IN_LOOP,
)
