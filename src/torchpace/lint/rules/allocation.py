"""TP206-TP207: allocations and host-to-device copies inside a training loop.

Like the syncs rules, these report only hot code (see :mod:`torchpace.lint.loops`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.findings import Edit, Fix
from torchpace.lint.forwards import in_forwards
from torchpace.lint.loops import LOOPS, Scope, binding_before, bound_in, dotted, returned
from torchpace.lint.project import definition_of
from torchpace.lint.rule import (
    FileContext,
    Report,
    Rule,
    argument,
    end_of,
    has_star_args,
    keyword,
    parameter_names,
)
from torchpace.lint.rules.syncs import (
    REFERENCES,
    block_of,
    check_calls_to,
    hot_calls,
    statement_of,
)
from torchpace.lint.tensors import LEGACY_HOST_TYPES, RANDOM_FACTORIES, casts_only
from torchpace.lint.tree import subtree

# The moves of a tensor to another tensor's or a given device.
_MOVES = frozenset({"cuda", "to", "type_as"})
_EMPTY_CACHE = "torch.cuda.empty_cache"
_empty_cache_in_hot_code = check_calls_to(_EMPTY_CACHE, waits=False)


def _check_empty_cache(ctx: FileContext) -> Iterator[Report]:
    """In the hot code, and in a module's forward (:func:`_forward_calls`): YOLOX's loss,
    which its head's forward runs, empties the cache for every image of every step."""
    reported: set[int] = set()
    for report in _empty_cache_in_hot_code(ctx):
        reported.add(id(report.node))
        yield report
    for call, qual, _ in _forward_calls(ctx):
        if qual == _EMPTY_CACHE and id(call) not in reported:
            yield Report(call)


EMPTY_CACHE_IN_LOOP = Rule(
    code="TP206",
    name="empty-cache-in-training-loop",
    message="`torch.cuda.empty_cache()` returns cached memory that the next step allocates again",
    technique="avoid-empty-cache",
    doc=f"""\
## What it does
Flags `torch.cuda.empty_cache()` inside a training loop, unless a cadence gates it, and in a
module's `forward()` (and what it calls in its file; see TP207), which runs every step.

## Why is this slow
The caching allocator keeps freed blocks so the next step can reuse them without calling
`cudaMalloc`. Emptying the cache synchronises the device and makes every following allocation
go back to the driver, which is slow and itself synchronises. It frees no memory that tensors
still use.

## Example
```python
for x, y in loader:
    train_step(x, y)
    torch.cuda.empty_cache()
```

## Use instead
```python
for x, y in loader:
    train_step(x, y)
```
If memory is fragmented, set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`.

## Fix safety
No fix: a program that shares the device with another process may rely on it.

## References
{REFERENCES}; "7個提升PyTorch性能的技巧" (PyTorch Lightning team), on not calling
`torch.cuda.empty_cache()` needlessly.
""",
    check=_check_empty_cache,
)


# TP207 ------------------------------------------------------------------------------------------

_FACTORIES = frozenset(
    {
        f"torch.{f}"
        for f in (
            "tensor",
            "as_tensor",
            "zeros",
            "ones",
            "empty",
            "full",
            "rand",
            "randn",
            "randint",
            "randperm",
            "arange",
            "linspace",
            "logspace",
            "eye",
            "tril_indices",
            "triu_indices",
            "hann_window",
            "hamming_window",
            "blackman_window",
            "bartlett_window",
            "kaiser_window",
        )
    }
)


def _device_argument(ctx: FileContext, call: ast.Call) -> str | None:
    """The source text of the device a ``.cuda()`` / ``.to()`` call moves to, when exact."""
    func = call.func
    assert isinstance(func, ast.Attribute)
    extra = [k for k in call.keywords if k.arg not in {"device", "non_blocking"}]
    if extra or has_star_args(call):
        return None
    if func.attr == "cuda":
        return '"cuda"' if not call.args and keyword(call, "device") is None else None
    device = keyword(call, "device")
    if device is not None and not call.args:
        return ctx.segment(device.value)
    if device is None and len(call.args) == 1 and _looks_like_device(ctx, call.args[0]):
        return ctx.segment(call.args[0])
    return None


def _moves_to_device(ctx: FileContext, call: ast.Call, scope: Scope) -> bool:
    """A ``.to(...)`` that moves to a device: ``.to(device)``, ``.to("cuda")``, any ``device=``
    keyword (``.to(dtype=x.dtype, device=x.device)``), or a tensor of the step that is not
    known to be on the host, whose device and dtype it takes (``.to(sources)``, as
    ``.type_as``), whether or not the rule can rewrite it."""
    if call.args and _looks_like_device(ctx, call.args[0]):
        return True
    if len(call.args) == 1 and not call.keywords and ctx.tensors(scope).on_device(call.args[0]):
        return True
    device = keyword(call, "device")
    return device is not None and not (
        isinstance(device.value, ast.Constant) and device.value.value is None
    )


def _looks_like_device(ctx: FileContext, node: ast.expr) -> bool:
    """``device``, ``args.device``, ``x.device``, ``"cuda:0"``, ``torch.device(...)``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith(("cuda", "mps", "xpu"))
    if isinstance(node, ast.Call):
        return ctx.names.qualname(node.func) == "torch.device"
    name = dotted(node)
    return name is not None and "device" in name.rsplit(".", 1)[-1].lower()


# The pre-0.4 autograd wrapper: ``Variable(t)`` is ``t`` since PyTorch 0.4.
_VARIABLES = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
# Casts that keep a tensor where it is: ``torch.ones(n).long().to(device)`` still copies.
_CASTS = frozenset({"long", "float", "int", "bool", "half", "double", "byte", "short", "bfloat16"})
# Legacy typed constructors: ``torch.cuda.FloatTensor(np.random.normal(...))`` copies host data.
_CUDA_TYPES = frozenset(
    f"torch.cuda.{t}Tensor" for t in ("Float", "Long", "Int", "Double", "Half", "Byte", "Bool")
)


def _host_factory(ctx: FileContext, node: ast.expr) -> ast.Call | None:
    """The host factory call under ``node``, through dtype casts (``.long()``,
    ``.to(x.dtype)``) and the pre-0.4 ``Variable(...)`` wrapper (``Variable(torch.ones(n)).cuda()``,
    a GAN tutorial's labels); None if not one."""
    while isinstance(node, ast.Call):
        if ctx.names.qualname(node.func) in _VARIABLES and len(node.args) == 1:
            node = node.args[0]
        elif isinstance(node.func, ast.Attribute) and (
            (node.func.attr in _CASTS and not node.args) or casts_only(ctx.names, node)
        ):
            node = node.func.value
        else:
            break
    if not isinstance(node, ast.Call):
        return None
    name = ctx.names.qualname(node.func)
    if name in LEGACY_HOST_TYPES and node.args and _sizes_or_nothing(node):
        return node  # ``torch.LongTensor(range(n))``: what ``torch.arange(n, device=)`` makes
    if name not in _FACTORIES or has_star_args(node) or keyword(node, "device") is not None:
        return None
    if _handed_in(ctx, node):
        return None
    return node


# Factories given the data they hold.
_DATA_FACTORIES = frozenset({"torch.as_tensor", "torch.tensor"})


def _handed_in(ctx: FileContext, call: ast.Call) -> bool:
    """``torch.as_tensor(x)`` or ``torch.tensor(x)`` of data that changes with each call or
    pass: a parameter of the function built once a call, or a name bound anew in the loop
    around it (a batch's lengths, ``inputs, targets, lengths = batch``). What a caller hands
    may already be a tensor on the device, which ``as_tensor`` returns as it is (EDM's
    ``round_sigma(sigma)``); otherwise it is host data (a Python float read with ``.item()``,
    MAE's ``all_reduce_mean(loss_value)``; the list of lengths a collate function returns),
    which reaches the device by a copy however the tensor is made. The same data each pass (a
    parameter read in a loop of the function, demucs' source weights) is made once instead."""
    if ctx.names.qualname(call.func) not in _DATA_FACTORIES:
        return False
    data = argument(call, "data", 0)
    if not isinstance(data, ast.Name):
        return False
    scope = ctx.enclosing_scope(call)
    loop = next((a for a in ctx.ancestors(call) if isinstance(a, LOOPS) or a is scope), None)
    if loop is scope or loop is None:
        return data.id in parameter_names(scope)
    # bound anew in the loop: a loop's target, or an assignment of something other than a
    # literal (``class_weights = [1.0, 2.0]`` in the step is the same data each pass)
    targets = [
        t
        for n in subtree(loop)
        for t in (
            [n.target]
            if isinstance(n, (ast.For, ast.AsyncFor))
            else n.targets
            if isinstance(n, ast.Assign) and not _literal(n.value)
            else []
        )
    ]
    return any(
        isinstance(name, ast.Name) and name.id == data.id for t in targets for name in subtree(t)
    )


def _literal(node: ast.expr) -> bool:
    """A constant, or a list, tuple or set of constants: the same value each time it runs (an
    empty list is a buffer the pass fills: ``advantage_lst = []``, then ``.append(...)``)."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return bool(node.elts) and all(_literal(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _literal(node.operand)
    return isinstance(node, ast.Constant)


def _sizes_or_nothing(call: ast.Call) -> bool:
    """A legacy typed constructor given no data: sizes (``torch.FloatTensor(batch, steps,
    hidden)``: given more than one argument, each is a size, as only the one-argument form takes
    data) or arguments that hold none (:func:`_made_from_nothing`)."""
    if len(call.args) > 1 and not call.keywords:
        return not any(isinstance(a, ast.Starred) for a in call.args)
    return all(map(_made_from_nothing, call.args))


def _made_from_nothing(node: ast.expr) -> bool:
    """An argument of a legacy typed constructor that holds no data: ``range(...)``, a size
    (also another tensor's, ``torch.BoolTensor(x.size())``), or a literal list of numbers. Host
    data (a NumPy array, an environment's observation) is copied either way: ``device=`` would
    only move where the copy happens."""
    if isinstance(node, ast.Attribute):
        return node.attr == "shape"
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            return node.func.attr == "size" and not node.args and not node.keywords
        return isinstance(node.func, ast.Name) and node.func.id == "range"
    if isinstance(node, (ast.List, ast.Tuple)):
        return bool(node.elts) and all(isinstance(e, ast.Constant) for e in node.elts)
    return isinstance(node, ast.Constant) and type(node.value) is int


# Methods that make a new tensor from one, where it is: a host tensor stays on the host.
_TRANSFORMS = _CASTS | frozenset(
    {
        "unsqueeze", "squeeze", "repeat", "expand", "view", "reshape", "flatten", "flip", "t",
        "transpose", "permute", "contiguous", "clone", "exp", "log", "sqrt", "rsqrt", "sin",
        "cos", "pow", "mul", "add", "sub", "div", "cumsum", "tril", "triu", "neg", "abs",
        "reciprocal", "repeat_interleave", "to_dense", "expand_as", "view_as", "reshape_as",
        # in-place fills, which draw or write where the tensor is (the noise of a GAN's step:
        # ``torch.zeros(b, d).uniform_(-1, 1).to(device)``)
        "uniform_", "normal_", "random_", "bernoulli_", "exponential_", "fill_", "zero_",
    }
)  # fmt: skip
# torch functions that compute a tensor from their tensor arguments, on those tensors' device.
_POINTWISE = frozenset(
    f"torch.{f}"
    for f in (
        "exp", "log", "sqrt", "sin", "cos", "pow", "outer", "cat", "stack", "tril", "triu",
        "cumsum", "meshgrid", "cartesian_prod", "polar", "flip", "repeat_interleave", "where",
    )
)  # fmt: skip


# einops functions: they rearrange a tensor where it is.
_EINOPS = frozenset({"einops.rearrange", "einops.repeat", "einops.reduce"})


def _keeps_in_place(ctx: FileContext, value: ast.expr, name: str) -> bool:
    """``value`` is ``name`` rearranged where it is: a transform method of it, or an einops
    function of it (``img_ids = einops.repeat(img_ids, ...)``)."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if ctx.names.qualname(func) in _EINOPS:
        return bool(value.args) and dotted(value.args[0]) == name
    if isinstance(func, ast.Attribute) and func.attr in _TRANSFORMS and dotted(func.value) == name:
        return True
    # computed from itself on the host: SimCLR's ``labels = (labels.unsqueeze(0) ==
    # labels.unsqueeze(1)).float()``
    return "." not in name and _built_on_host(ctx, value, frozenset({name}))


def _returns_host_tensor(ctx: FileContext, call: ast.Call) -> bool:
    """``call`` calls a function of this file or of an imported project file whose every
    return is a tensor it builds on the host (kohya's ``prepare_img_ids``: ``torch.zeros``, item
    assignments, ``einops.repeat``, then ``return img_ids``): the caller's move copies it."""
    found = definition_of(ctx, call, ast.FunctionDef)
    if found is None:
        return False
    home, function = found
    values = returned(function)
    return bool(values) and all(
        _built_on_host(home, v)
        or (isinstance(v, ast.Name) and bool(_made_on_host(home, v.id, function)))
        for v in values
    )


def _operand_ok(ctx: FileContext, node: ast.expr, host: frozenset[str] = frozenset()) -> bool:
    """An operand that leaves a host computation on the host: a number, a name or attribute (a
    scalar, or a host tensor: mixing devices would raise), or itself built on the host."""
    if isinstance(node, ast.Constant) or _built_on_host(ctx, node, host):
        return True
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        return True  # a name, or a size read: ``x.shape[0]``
    if isinstance(node, ast.Call):
        func = node.func
        sized = isinstance(func, ast.Attribute) and func.attr in ("size", "numel", "dim")
        return sized or (isinstance(func, ast.Name) and func.id in ("len", "int", "max", "min"))
    if isinstance(node, ast.UnaryOp):
        return _operand_ok(ctx, node.operand, host)
    if isinstance(node, ast.BinOp):
        return _operand_ok(ctx, node.left, host) and _operand_ok(ctx, node.right, host)
    if isinstance(node, (ast.Tuple, ast.List)):  # sizes: ``.expand((b, n))``
        return all(_operand_ok(ctx, e, host) for e in node.elts)
    return False


def _built_on_host(ctx: FileContext, node: ast.expr, host: frozenset[str] = frozenset()) -> bool:
    """A tensor computed on the host from a host factory (issue 32): through methods that keep
    it there (``torch.arange(n).unsqueeze(0).repeat(b, 1)``), pointwise torch functions and
    arithmetic (``torch.exp(k * torch.arange(n))``) and comparisons (``torch.rand(b) < p``),
    when every other operand is a number or a name. A ``math`` function's result or the
    process's rank as an operand (a diffusion model's timestep frequencies, ``torch.exp(
    -math.log(p) * torch.arange(half) / half).to(t.device)``) was tried and taken back: its
    added findings were judged 0 true, 2 false, 9 debatable (128 floats a step beside a large
    model's kernels; inside ``torch.compile``, which makes the chain on the device). ``host``:
    names known to hold host tensors (a name rebound from itself, :func:`_keeps_in_place`)."""
    if _host_factory(ctx, node) is not None:
        return True
    if isinstance(node, ast.Name) and node.id in host:
        return True  # a name the caller knows is a host tensor
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        # the same host tensor made for each item, ``[torch.arange(b) for _ in views]``; not
        # one made of each item's data (``[torch.as_tensor(f(r)) for r in rows]``)
        bound = {
            n.id for g in node.generators for n in subtree(g.target) if isinstance(n, ast.Name)
        }
        reads = {n.id for n in subtree(node.elt) if isinstance(n, ast.Name)}
        return not bound & reads and _built_on_host(ctx, node.elt, host)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _TRANSFORMS
        and _built_on_host(ctx, node.func.value, host)
    ):
        return all(_operand_ok(ctx, a, host) for a in node.args)
    if isinstance(node, ast.Subscript) and _built_on_host(ctx, node.value, host):
        return True  # ``torch.eye(d)[None, :, :]``: indexing a host tensor keeps it there
    if (
        isinstance(node, ast.Call)
        and ctx.names.qualname(node.func) in _EINOPS
        and node.args
        and _built_on_host(ctx, node.args[0], host)
    ):
        return True  # ``einops.repeat(torch.zeros(h, w), "h w -> b h w", b=n)``
    if isinstance(node, ast.Call) and ctx.names.qualname(node.func) in _POINTWISE:
        args = [a for a in node.args if not isinstance(a, ast.Starred)]
        flat = [e for a in args for e in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])]
        return any(_built_on_host(ctx, a, host) for a in flat) and all(
            _operand_ok(ctx, a, host) for a in flat
        )
    if isinstance(node, ast.BinOp):
        sides = (node.left, node.right)
        return any(_built_on_host(ctx, x, host) for x in sides) and all(
            _operand_ok(ctx, x, host) for x in sides
        )
    if isinstance(node, ast.Compare) and len(node.comparators) == 1:
        # a mask drawn on the host (``torch.rand(b) < p``, DiT's label dropout)
        sides = (node.left, node.comparators[0])
        return any(_built_on_host(ctx, x, host) for x in sides) and all(
            _operand_ok(ctx, x, host) for x in sides
        )
    return False


def _values_besides_moves(name: str, scope: ast.AST) -> list[ast.expr]:
    """What ``name`` is assigned in ``scope``, leaving out the moves of itself (``z = z.cuda()``,
    ``z = z.to(device)``, ``z = z.type_as(x)``)."""
    values = [
        node.value
        for node in subtree(scope)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and dotted(node.targets[0]) == name
    ]
    return [v for v in values if not _moves_itself(v, name)]


def _moves_itself(value: ast.expr, name: str) -> bool:
    """``z.cuda()``, ``z.to(device)``, also through casts and further moves
    (pretrain-gnns' ``self_loop_attr.to(edge_attr.device).to(edge_attr.dtype)``) and after
    transforms on the host (MAR's ``drop_latent_mask.unsqueeze(-1).cuda().to(x.dtype)``)."""
    moved = False
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _MOVES | _CASTS | (_TRANSFORMS if moved else frozenset())
    ):
        moved = moved or value.func.attr in _MOVES
        value = value.func.value
    return moved and dotted(value) == name


def _made_on_host(ctx: FileContext, name: str, scope: ast.AST) -> list[ast.expr]:
    """The host factories ``name`` is bound to in ``scope``, when it is bound only to them (also
    filled or transformed on the host, ``mask = torch.BoolTensor(x.size()).fill_(0)``) and to
    moves of itself (``z = torch.randn(n, d)`` then ``z = z.type_as(imgs)``); else none."""
    rest = _values_besides_moves(name, scope)
    made = [v for v in rest if _host_factory(ctx, v) is not None or _built_on_host(ctx, v)]
    kept = [v for v in rest if v not in made and _keeps_in_place(ctx, v, name)]
    return made if made and len(made) + len(kept) == len(rest) else []


def _transformed_from_host(ctx: FileContext, node: ast.expr, scope: ast.AST) -> list[ast.expr]:
    """The host factories of the name that ``node`` transforms, when ``node`` is a chain of
    transforms (:data:`_TRANSFORMS`) of a name made on the host in ``scope`` (``seq_range =
    torch.arange(n).long()``, then ``seq_range.unsqueeze(0).expand(b, n)``): the chain runs on
    the host. Else none."""
    steps = 0
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _TRANSFORMS
        and all(_operand_ok(ctx, a) for a in node.args)
    ):
        node, steps = node.func.value, steps + 1
    if steps == 0 or not isinstance(node, ast.Name):
        return []
    return _made_on_host(ctx, node.id, scope)


def _derived_on_host(ctx: FileContext, name: str, scope: ast.AST) -> list[ast.expr]:
    """The host factories behind ``name``, when it is bound in ``scope`` only to transforms of a
    name made on the host and to moves of itself (wavenet_vocoder's ``sequence_mask``:
    ``seq_range_expand = seq_range.unsqueeze(0).expand(b, n)``, then ``seq_range_expand =
    seq_range_expand.cuda()``, every step)."""
    rest = _values_besides_moves(name, scope)
    roots = [_transformed_from_host(ctx, v, scope) for v in rest]
    return roots[0] if roots and all(roots) else []


def _cuda_typed(ctx: FileContext, func: ast.expr) -> bool:
    """``torch.cuda.FloatTensor``, or a name bound to it (``Tensor = torch.cuda.FloatTensor if
    cuda else torch.FloatTensor``, as PyTorch-GAN writes)."""
    if ctx.names.qualname(func) in _CUDA_TYPES:
        return True
    name = dotted(func)
    for node in ctx.of_type(ast.Assign):
        if len(node.targets) == 1 and dotted(node.targets[0]) == name:
            value = node.value
            branches = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
            if any(ctx.names.qualname(b) in _CUDA_TYPES for b in branches):
                return True
    return False


def _host_data(ctx: FileContext, node: ast.expr) -> bool:
    """Data built on the host: a numpy call (``np.random.normal(...)``) or a list."""
    if isinstance(node, (ast.List, ast.ListComp)):
        return True
    return isinstance(node, ast.Call) and (ctx.names.qualname(node.func) or "").startswith("numpy.")


_READ_IN_FORWARDS = _MOVES | {"empty_cache"}


def _forward_calls(ctx: FileContext) -> list[tuple[ast.Call, str | None, Scope]]:
    """The calls of modules' forwards (:mod:`torchpace.lint.forwards`) that TP207 and TP206
    read: a move, a legacy typed constructor, ``empty_cache``."""
    qualname = ctx.names.qualname
    return [
        (node, qualname(node.func), scope)
        for node, scope in in_forwards(ctx, _read_in_forwards)
        if isinstance(node, ast.Call)
    ]


def _read_in_forwards(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr in _READ_IN_FORWARDS) or "Tensor" in (
        dotted(func) or ""
    )


def _check_host_created_then_moved(ctx: FileContext) -> Iterator[Report]:
    hot = hot_calls(ctx, waits=False)  # a copy costs a small step too
    ids = {id(c) for c, _, _ in hot}
    for call, _, scope in [*hot, *(c for c in _forward_calls(ctx) if id(c[0]) not in ids)]:
        func = call.func
        if _cuda_typed(ctx, func) and call.args and _host_data(ctx, call.args[0]):
            yield Report(call)  # numpy data copied into a CUDA tensor on every step
            continue
        if _copied_into_device_tensor(ctx, call, scope):
            yield Report(call)  # drawn on the host, copied into a tensor on the device
            continue
        if not (isinstance(func, ast.Attribute) and func.attr in _MOVES):
            continue
        factory = func.value
        direct = isinstance(factory, ast.Call) and ctx.names.qualname(factory.func) in _FACTORIES
        if (
            direct
            and isinstance(factory, ast.Call)
            and (
                has_star_args(factory)
                or keyword(factory, "device") is not None
                or _handed_in(ctx, factory)
            )
        ):
            continue
        if not direct:
            # through a cast (``torch.ones(n).long().to(device)``), or a name made on the host
            # earlier (``z = torch.randn(n, d); z = z.type_as(imgs)``): reported, not fixed
            name = dotted(factory)
            made = _made_on_host(ctx, name, scope) if name is not None else []
            to_device = func.attr != "to" or _moves_to_device(ctx, call, scope)
            if to_device and _host_factory(ctx, factory) is not None:
                yield Report(call)
            elif to_device and made:
                yield Report(made[0])  # at the factory, where `device=` belongs
            elif to_device and _built_on_host(ctx, factory):
                yield Report(call)  # made on the host, transformed, then moved: reported
            elif to_device and isinstance(factory, ast.Call) and _returns_host_tensor(ctx, factory):
                yield Report(call)  # a helper builds it on the host, the step moves it
            elif to_device and (
                root := _transformed_from_host(ctx, factory, scope)
                or (_derived_on_host(ctx, name, scope) if name is not None else [])
            ):
                yield Report(root[0])  # a host tensor's name, transformed, then moved
            elif to_device and isinstance(factory, ast.Name) and _host_just_before(ctx, factory):
                yield Report(call)  # the lines just before built it on the host
            continue
        if func.attr == "type_as":
            yield Report(call)  # follows its argument's device: reported, not rewritten
            continue
        assert isinstance(factory, ast.Call)
        device = _device_argument(ctx, call)
        if device is None:
            if func.attr == "cuda" or _moves_to_device(ctx, call, scope):
                yield Report(call)  # a move to a device, but not one we can rewrite exactly
            continue
        yield Report(call, _device_fix(factory, call, device, ctx.names.qualname(factory.func)))


def _host_just_before(ctx: FileContext, name: ast.Name, depth: int = 0) -> bool:
    """What ``name`` holds where it is read was built on the host by the statements just before
    it, in the same block (the name bound again later in the scope): SimCLR's ``labels =
    torch.cat([torch.arange(b) for _ in views])``, ``labels = (labels.unsqueeze(0) ==
    labels.unsqueeze(1)).float()``, then ``labels = labels.to(device)`` every step."""
    value = binding_before(ctx, name, name)
    if value is None or depth > 3:
        return False
    bound, reading = statement_of(ctx, value), statement_of(ctx, name)
    if bound is None or reading is None or not _one_block(ctx, bound, reading):
        return False
    if _reads_a_math_scalar(ctx, value):
        return False  # a diffusion model's timestep frequencies: see _built_on_host
    if _converts_data(ctx, value):
        return False  # host data (a replay buffer's batch): it reaches the device by a copy
    if _built_on_host(ctx, value):
        return True
    if not _built_on_host(ctx, value, frozenset({name.id})):
        return False
    # computed from its own earlier value: what that was, just before
    return any(
        _host_just_before(ctx, n, depth + 1)
        for n in subtree(value)
        if isinstance(n, ast.Name) and n.id == name.id
    )


def _reads_a_math_scalar(ctx: FileContext, value: ast.expr) -> bool:
    """``value`` reads a name bound just before to a ``math`` function's result or the
    process's rank (``emb = math.log(10000) / (half - 1)``, then ``torch.exp(torch.arange(half)
    * -emb)``): the class :func:`_built_on_host` leaves out."""
    for node in subtree(value):
        if not isinstance(node, ast.Name):
            continue
        before = binding_before(ctx, node, node)
        if before is not None and any(
            isinstance(c, ast.Call)
            and ((q := ctx.names.qualname(c.func) or "").startswith("math.") or q.endswith("rank"))
            for c in subtree(before)
        ):
            return True
    return False


def _converts_data(ctx: FileContext, value: ast.expr) -> bool:
    """``value`` makes a tensor of data (``torch.as_tensor(buffer.obs[idx])``,
    ``torch.tensor(np.stack(rows))``), not of literal numbers: the data exists on the host."""
    for call in subtree(value):
        if isinstance(call, ast.Call) and ctx.names.qualname(call.func) in _DATA_FACTORIES:
            data = argument(call, "data", 0)
            if data is not None and not _made_from_nothing(data):
                return True
    return False


def _one_block(ctx: FileContext, first: ast.stmt, second: ast.stmt) -> bool:
    """``first`` and ``second`` are statements of one block, ``first`` before ``second`` with
    nothing between them that binds in a loop or a branch (straight-line code)."""
    block = block_of(ctx, first)
    if block is None or not any(s is second for s in block):
        return False
    at, to = block.index(first), block.index(second)
    return at < to and all(
        isinstance(s, (ast.Assign, ast.AnnAssign, ast.Expr)) for s in block[at + 1 : to]
    )


def _copied_into_device_tensor(ctx: FileContext, call: ast.Call, scope: Scope) -> bool:
    """``noise.copy_(torch.randn(b, nz))`` (also ``noise.data.copy_(...)``) where the scope moved
    ``noise`` to a device or made it there: a host factory's tensor copied into a device tensor
    every step (a DCGAN drawing its noise on the host), where the factory or an in-place draw
    (``noise.normal_()``) could fill it on the device."""
    func = call.func
    if not (
        isinstance(func, ast.Attribute)
        and func.attr == "copy_"
        and len(call.args) == 1
        and _host_factory(ctx, call.args[0]) is not None
    ):
        return False
    target = func.value
    if isinstance(target, ast.Attribute) and target.attr == "data":
        target = target.value
    name = dotted(target)
    where = ctx.enclosing_scope(call)
    bound = bound_in(ctx, name, where) if name is not None and "." not in name else None
    return bool(bound) and all(_made_or_moved_to_device(ctx, value, scope) for value in bound or ())


def _made_or_moved_to_device(ctx: FileContext, value: ast.expr, scope: Scope) -> bool:
    """``value`` is moved to a device (``x.to(device)``, ``x.cuda()``) or made on one
    (``torch.zeros(n, device="cuda")``)."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr == "cuda":
        return True
    if isinstance(func, ast.Attribute) and func.attr == "to":
        return _moves_to_device(ctx, value, scope)
    device = keyword(value, "device")
    return device is not None and _looks_like_device(ctx, device.value)


def _device_fix(factory: ast.Call, move: ast.Call, device: str, name: str | None) -> Fix:
    given: list[ast.expr | ast.keyword] = [*factory.args, *factory.keywords]
    if given:
        line, col = max(end_of(n) for n in given)
        text = f", device={device}"
    else:
        line, col = end_of(factory)
        col -= 1  # before the closing parenthesis
        text = f"device={device}"
    factory_end, move_end = end_of(factory), end_of(move)
    return Fix(
        "Create the tensor on the device with `device=`",
        # a random factory draws from another generator on the device: the values change
        "unsafe" if name in RANDOM_FACTORIES else "safe",
        (
            Edit(line, col, line, col, text),
            Edit(*factory_end, *move_end, ""),
        ),
    )


HOST_TENSOR_MOVED = Rule(
    code="TP207",
    name="host-tensor-moved-to-device",
    message="The tensor is built in host memory and then copied to the device",
    technique="create-on-device",
    doc="""\
## What it does
Flags a tensor factory (`torch.tensor`, `zeros`, `ones`, `rand`, `randn`, `arange`, the window
functions such as `hann_window`, ...) whose result is moved with `.cuda()`, `.to(device)`,
`.type_as(x)` or `.to(x)` (a tensor of the step, whose device it takes), inside a training loop:
immediately, after a dtype cast (`torch.ones(n).long().to(device)`, `.to(x.dtype).to(x.device)`) or
the pre-0.4 wrapper (`Variable(torch.ones(n)).cuda()`), or through a name bound only to it (`z =
torch.randn(n, d)` then `z = z.type_as(imgs)`), through methods, pointwise functions, arithmetic,
comparisons and einops that keep it on the host, where every other operand is a number, a name or a
size, also a tuple of them (a dropout mask `torch.rand(b) < p` then `.cuda()`;
`torch.arange(l).unsqueeze(0).expand((b, l)).to(dev)`; an index of one, `torch.eye(d)[None, :, :]`
then `.cuda()`; also under another name bound only to them: `r = torch.arange(n).long()`, then `m =
r.unsqueeze(0).expand(b, n)`, then `m = m.cuda()`; also by the statements just before the move in
one block, the name bound again later, SimCLR's `labels = torch.cat([torch.arange(b) for _ in
views])`, `labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()`, then `labels =
labels.to(device)`, though not where a `math` result or the rank is an operand), or returned by a
function of this file or of an imported project file that builds it so (`prepare_img_ids(b, h,
w).to(device)`), also filled on the host under a name bound only to it (`mask =
torch.BoolTensor(x.size()).fill_(0)`, then `mask = mask.cuda()`; a graph layer's `a = torch.zeros(n,
2)`, `a[:, 0] = 4`, then `a = a.to(e.device).to(e.dtype)`). A legacy typed constructor counts where
it is given no data, only a `range`, sizes (several of them, `torch.FloatTensor(batch, steps,
hidden)`, as only the one-argument form takes data; also another tensor's, `x.size()`, `x.shape`) or
a literal list of numbers (`torch.LongTensor(range(n)).to(device)`, what `torch.arange(n,
device=device)` makes); given host data (a NumPy array, an observation), it is a copy either way.
`torch.as_tensor(x)` or `torch.tensor(x)` of data that changes with each call or pass is not one
either: a parameter of the function built once a call, or a name the loop around it binds anew
(`inputs, targets, lengths = batch`, then `torch.as_tensor(lengths).to(device)`). What the caller
hands may already be a tensor on the device, which `as_tensor` returns as it is; otherwise it is
host data (a Python float read with `.item()`, MAE's `all_reduce_mean(loss_value)`; the lengths a
collate function returns) that reaches the device by a copy however the tensor is made. The same
data each pass (a parameter read in a loop of the function) is reported: build it before the loop.
Also numpy data copied into a legacy CUDA tensor type
(`torch.cuda.FloatTensor(np.random.normal(...))`, or a name bound to such a type), and a factory's
tensor copied into a tensor the function moved to a device or made there
(`noise.data.copy_(torch.randn(b, nz, 1, 1))` after `noise = torch.randn(b, nz, 1, 1).to(device)`:
`noise.normal_()` draws it on the device).

Also in a module's `forward()` (and the methods of its class and the functions of its file it
calls), in a file that moves something to a device, whether or not a training loop lint can
follow calls the model: a model's forward runs on every training step, and a model is often
built by a factory or kept in a dict of models. Not what only evaluation runs there (the
`else` of `if self.training:`, also of another module's flag), what is built once and kept
(`if self.rel is None:`), an error's handler (`except RuntimeError:`), nor a `forward` under
`@torch.no_grad()` or one that puts the model it wraps in eval mode (`self.model.eval()`, an
explainer attributing a trained model's prediction, also where another file's loop calls it), nor
an autograd `Function` with an ONNX `symbolic` (a stub traced for
export), nor the modules of a file or folder named for exporting or serving (`onnxexport/`);
where a training loop of the project does call the model, only the branches
that loop takes. The functions and classes of another file of the project that such a forward
calls (a mask helper, `get_mask_from_lengths(lengths)` of `utils/tools.py`; a mask class whose
`__init__` builds it), or that the step code of a model or helper file a training loop calls
calls in a further file (`commons.rand_slice_segments(x)`), are read the same way in their file.

## Why is this slow
The values are written in host memory, then copied over the bus, then the host copy is freed,
on every step. Created with `device=`, the tensor is allocated and filled by a kernel on the
device with no copy.

## Example
```python
noise = torch.randn(images.shape).to(device)
```

## Use instead
```python
noise = torch.randn(images.shape, device=device)
```

## Fix safety
Safe for the deterministic factories (`zeros`, `ones`, `full`, `arange`, `tensor`, ...): the
tensor has the same values, shape, dtype and device. Unsafe for the random ones (`rand`,
`randn`, `randint`, `randperm`): they then draw from the device's generator instead of the
host's, so a seeded run samples other values than before (with the same distribution). Only
`.cuda()` with no argument and `.to(device)` with a single device argument (plus
`non_blocking`) right after the factory are rewritten; other moves are reported only.

## References
PyTorch Performance Tuning Guide, "Create tensors directly on the target device";
"7個提升PyTorch性能的技巧" (PyTorch Lightning team), "直接在GPUs上構建張量".
""",
    check=_check_host_created_then_moved,
)

RULES = (EMPTY_CACHE_IN_LOOP, HOST_TENSOR_MOVED)
