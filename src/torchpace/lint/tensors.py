"""Tell, statically and conservatively, whether an expression is a torch tensor.

Rules about printing, branching on or boolean-indexing a tensor must know the value is a tensor;
a Python float or a list would be fine. The evidence, per function:

- a name is a tensor when *every* assignment to it is a tensor expression (so ``running =
  loss.item()`` or ``total = 0.0`` alongside ``total += loss`` makes the name unknown);
- tensor expressions: calls into ``torch`` that build tensors, calls of ``nn`` modules or of
  file classes (``model(x)``, ``criterion(out, y)``), arithmetic and comparisons involving a
  tensor, tensor methods other than those that return Python values, items of a tensor, the
  batch names of ``for x, y in loader``, the elements of a loop over a tensor (``for d in
  done``, on its device), names ``.backward()`` is called on, and parameters annotated
  ``Tensor``.

Anything else is "cannot tell", and the rules stay quiet.

Some tensors are certainly on the host, where reading them waits for no device (:meth:`is_host`):
the batches of a DataLoader before anything moves them (a name bound only by ``for x, y in
loader``), tensors made from host memory (``torch.from_numpy``, ``torch.from_file``) or by a
factory without a ``device=`` (``torch.tensor([...])``, ``torch.empty_like(host)``), ``.cpu()``
results, and what tensor methods (a ``.to(torch.long)`` cast among them), indexing and arithmetic
make of host tensors alone. A name is
also on the host where the one binding that reaches a use is such a value: an assignment earlier
in the same block, with nothing between them binding the name (``loss = criterion(o, y).cpu()``,
then ``loss.item()``, though other code binds ``loss`` to device losses).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.lint.imports import Resolver
from torchpace.lint.loops import LoopFacts, Scope, dotted, returned, walk

# Attributes that are the tensor itself, where it is (``loss.data``, a transpose).
_SAME_STORAGE = frozenset({"data", "T", "mT", "real", "imag"})

# torch namespaces whose calls do not return tensors (or do not only return tensors).
_NOT_TENSOR_PREFIXES = (
    "torch.cuda.",
    "torch.backends.",
    "torch.distributed.",
    "torch.utils.",
    "torch.optim.",
    "torch.jit.",
    "torch.compile",
    "torch.autograd.",
    "torch.serialization.",  # checkpoint helpers: safe globals, file-like checks
    "torch.amp.",
    "torch.profiler.",
    "torch.nn.init.",
    "torch.nn.utils.",
    "torch.is_",
    "torch.get_",
    "torch.set_",
    "torch.manual_seed",
    "torch.device",
    "torch.no_grad",
    "torch.inference_mode",
    "torch.enable_grad",
    "torch.autocast",
    "torch.save",
    "torch.load",
    "torch.numel",
    "torch.Size",
    "torch.finfo",
    "torch.iinfo",
    "torch.use_deterministic_algorithms",
    "torch.allclose",  # these return Python bools
    "torch.equal",
)
# Calls under those prefixes that do return a tensor: the total norm (llm.c formats it per step).
_TENSOR_UTILS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.get_total_norm",
    }
)
# Tensor methods and attributes that give back Python values, sizes or metadata, not tensors.
_NOT_TENSOR_MEMBERS = frozenset(
    {
        "item",
        "tolist",
        "numpy",
        "size",
        "dim",
        "ndimension",
        "numel",
        "nelement",
        "element_size",
        "stride",
        "storage_offset",
        "data_ptr",
        "is_contiguous",
        "is_floating_point",
        "is_complex",
        "get_device",
        "shape",
        "dtype",
        "device",
        "ndim",
        "is_cuda",
        "is_leaf",
        "requires_grad",
        "layout",
        "names",
        "backward",
        "register_hook",
        "storage",
        "untyped_storage",
    }
)
_TENSOR_ANNOTATIONS = frozenset({"torch.Tensor", "Tensor", "torch.FloatTensor", "torch.LongTensor"})


# Factories that make a tensor on the host unless given ``device=``.
# Factories that draw random values (on the host unless given a device).
RANDOM_FACTORIES = frozenset({"torch.rand", "torch.randn", "torch.randint", "torch.randperm"})
_HOST_FACTORIES = frozenset(
    {
        "torch.from_numpy",
        "torch.from_file",
        "torch.frombuffer",
        "torch.tensor",
        "torch.as_tensor",
        "torch.zeros",
        "torch.ones",
        "torch.empty",
        "torch.full",
        "torch.arange",
        *RANDOM_FACTORIES,  # host draws unless given a device (nanoGPT's ``ix = torch.randint``)
    }
)
_LIKE_FACTORIES = frozenset({"torch.empty_like", "torch.zeros_like", "torch.ones_like"})
# The typed constructors of torch's first API, still in much public code: ``torch.LongTensor(n,
# m)`` makes a host tensor, ``torch.cuda.FloatTensor(...)`` one on the GPU; and ``Variable(x)``,
# which since torch 0.4 returns the tensor it is given.
_TYPES = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
LEGACY_HOST_TYPES = frozenset({"torch.Tensor", *(f"torch.{t}Tensor" for t in _TYPES)})
LEGACY_CUDA_TYPES = frozenset(f"torch.cuda.{t}Tensor" for t in _TYPES)
_VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
# Factories whose result has one dimension, and those given their sizes first.
_RANGES = frozenset({"torch.arange", "torch.linspace", "torch.logspace", "torch.randperm"})
_SIZED = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn"})
# Methods that move a tensor elsewhere: their result is not known to be on the host.
_MOVES = frozenset({"to", "cuda", "type", "type_as", "new_tensor", "new_zeros", "new_ones"})

# torch's dtypes: ``x.to(torch.long)`` casts where ``x`` is.
DTYPES = frozenset(
    f"torch.{t}"
    for t in (
        "float32", "float", "float64", "double", "float16", "half", "bfloat16", "int64", "long",
        "int32", "int", "int16", "int8", "uint8", "bool",
    )
)  # fmt: skip


def casts_only(names: Resolver, call: ast.Call) -> bool:
    """``.to(dtype)``, where what it is given is a dtype and nothing a device: ``torch.long``,
    ``x.dtype``, ``dtype=...`` alone (ogb's ``torch.zeros(n).to(edge_index.dtype)``): the
    tensor stays where it is."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "to"):
        return False
    if any(k.arg != "dtype" for k in call.keywords) or len(call.args) > 1:
        return False
    if not call.args:
        return bool(call.keywords)
    arg = call.args[0]
    name = dotted(arg) or ""
    return names.qualname(arg) in DTYPES or name.rsplit(".", 1)[-1] == "dtype"


class TensorFacts:
    """Which names of one scope hold tensors."""

    def __init__(self, facts: LoopFacts, scope: Scope) -> None:
        self.facts = facts
        self.scope = scope
        facts.tensor_cache[id(scope)] = self  # before solving: recursive calls find it
        self.names: set[str] = set()
        self.values: dict[str, list[ast.expr | None]] = {}  # every value bound to each name
        self._visiting: set[str] = set()
        self.host_names: set[str] = set()
        self._stores: dict[int, frozenset[str]] = {}
        self._places: dict[int, dict[int, tuple[str, int]]] = {}
        self._solve(scope)
        self._solve_host()

    def is_tensor(self, node: ast.AST) -> bool:
        """True only when ``node`` is certainly a tensor expression."""
        if isinstance(node, (ast.Name, ast.Attribute)):
            text = dotted(node)
            if text is not None and text in self.names:
                return True
            if isinstance(node, ast.Attribute):
                if node.attr in _NOT_TENSOR_MEMBERS:
                    return False
                return node.attr in {"grad", "data", "T", "mT", "real", "imag"} and self.is_tensor(
                    node.value
                )
            return False
        if isinstance(node, ast.Call):
            return self._is_tensor_call(node)
        if isinstance(node, ast.BinOp):
            return any(self.is_tensor(n) for n in _operands(node))
        if isinstance(node, ast.UnaryOp):
            return not isinstance(node.op, ast.Not) and self.is_tensor(node.operand)
        if isinstance(node, ast.Compare):
            if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
                return False
            return any(self.is_tensor(side) for side in (node.left, *node.comparators))
        if isinstance(node, ast.Subscript):
            return self.is_tensor(node.value)
        return False

    def _is_tensor_call(self, call: ast.Call) -> bool:
        func = call.func
        qual = self.facts.names.qualname(func)
        if qual is not None and qual.startswith("torch."):
            if qual in _TENSOR_UTILS or qual in LEGACY_HOST_TYPES or qual in LEGACY_CUDA_TYPES:
                return True
            if qual in _VARIABLE:
                return bool(call.args) and self.is_tensor(call.args[0])
            if qual.startswith(_NOT_TENSOR_PREFIXES):
                return False
            if qual.startswith("torch.nn.") and not qual.startswith("torch.nn.functional."):
                return False  # building a module, not running one
            return qual.rsplit(".", 1)[-1][:1].islower()  # torch.zeros, not torch.Generator
        target = dotted(func)
        if target is not None:
            owner = self.facts.instances.get(target)
            if owner is not None and _is_module_class(owner, self.facts):
                return True  # calling a module runs its forward
        if self._returns_tensor(call):
            return True
        if isinstance(func, ast.Attribute):
            if func.attr in _NOT_TENSOR_MEMBERS or _type_name(call):
                return False
            return self.is_tensor(func.value)
        return False

    def _returns_tensor(self, call: ast.Call) -> bool:
        """A call of a same-file function whose every ``return`` gives a tensor."""
        callees = self.facts.callees(call, self.scope)
        if not callees or any(id(f) in _SOLVING for f in callees):
            return False
        for function in callees:
            facts = self.facts.tensor_cache.get(id(function)) or TensorFacts(self.facts, function)
            returns = returned(function)
            _SOLVING.add(id(function))
            try:
                if not returns or not all(facts.is_tensor(r) for r in returns):
                    return False
            finally:
                _SOLVING.discard(id(function))
        return True

    def _solve(self, scope: Scope) -> None:
        """Names with evidence of holding a tensor and no binding that is certainly not one.

        A least fixed point: ``loss = loss / accum`` keeps a tensor a tensor, but
        ``batch = batch.to(device)`` alone never makes ``batch`` one.
        """
        for name, value in _bindings(scope, self.facts):
            self.values.setdefault(name, []).append(value)
        eligible = {
            n
            for n, vs in self.values.items()
            if not any(v is not None and self.is_not_tensor(v) for v in vs)
        }
        changed = True
        while changed:
            changed = False
            for name in eligible - self.names:
                if any(
                    v is _EVIDENCE or v is _BATCH or (v is not None and self.is_tensor(v))
                    for v in self.values[name]
                ):
                    self.names.add(name)
                    changed = True

    def _solve_host(self) -> None:
        """Names whose every binding is a host tensor (a least fixed point): also local names
        not yet known as tensors, whose bindings say so themselves (``correct =
        pred.eq(y).cpu().sum()``, then ``correct.item()`` reads host memory). Not an attribute
        the scope does not know as a tensor: code it calls may bind it again (kohya's
        ``noise_scheduler.alphas_cumprod``, moved to the device by ``add_noise``)."""
        local = {name for name in self.values if "." not in name}
        changed = True
        while changed:
            changed = False
            for name in (self.names | local) - self.host_names:
                values = self.values[name]
                # assumed on the host while its own bindings are read: ``data = data.long()``
                # keeps a host batch on the host (a move, ``data = data.to(device)``, does not)
                self.host_names.add(name)
                if all(v is _BATCH or (v is not None and self.is_host(v)) for v in values):
                    changed = True
                else:
                    self.host_names.discard(name)

    def is_host(self, node: ast.AST) -> bool:
        """True only when ``node`` is certainly a tensor in host memory (module doc)."""
        if isinstance(node, (ast.Name, ast.Attribute)):
            if dotted(node) in self.host_names:
                return True
            if isinstance(node, ast.Attribute):
                return node.attr in _SAME_STORAGE and self.is_host(node.value)  # ``loss.data``
            value = self._reaching_value(node)
            return value is _BATCH or (value is not None and self.is_host(value))
        if isinstance(node, ast.Subscript):
            return self.is_host(node.value)
        if isinstance(node, (ast.BinOp, ast.Compare, ast.UnaryOp)):
            parts = (
                _operands(node)
                if isinstance(node, ast.BinOp)
                else [node.operand]
                if isinstance(node, ast.UnaryOp)
                else [node.left, *node.comparators]
            )
            if any(self._host_array(n) for n in parts):
                return True  # with a tensor on a device it would raise: the result is the host's
            # a host tensor beside numbers: a literal, a config's field not known as a tensor
            # (``config.warmup_tokens``) or a constant's name (``IGNORE_INDEX``); not what a call
            # returns, which may be a device tensor (a CPU scalar tensor combines with one)
            return any(self.is_host(n) for n in parts) and all(
                self.is_host(n) or isinstance(n, ast.Constant) or self._number_like(n)
                for n in parts
            )
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        qual = self.facts.names.qualname(func)
        placed = any(k.arg == "device" for k in node.keywords)
        if qual in _HOST_FACTORIES or qual in LEGACY_HOST_TYPES:
            return not placed
        if qual in _VARIABLE:
            return bool(node.args) and self.is_host(node.args[0])
        if qual in _LIKE_FACTORIES:
            return not placed and bool(node.args) and self.is_host(node.args[0])
        if isinstance(func, ast.Attribute) and qual is None:
            if func.attr == "cpu":
                return True
            if casts_only(self.facts.names, node):
                return self.is_host(func.value)  # ``x.cpu().sum(1).to(torch.long)``
            return func.attr not in _MOVES and self.is_host(func.value)
        return False

    def _reaching_value(self, name: ast.Name) -> ast.expr | None:
        """The value of the one binding of ``name`` that reaches this use of it: an assignment
        earlier in the same block, with no statement between them binding the name (a
        Fashion-MNIST handbook's ``loss = criterion(out, y).cpu()``, then ``loss.data.item()``
        two lines on, where the notebook binds ``loss`` to device losses in other cells); at the
        start of a loop's body, the loop's target. None where the block does not say."""
        parents = self.facts.parents  # the file's map (FileContext.parents)
        node: ast.AST = name
        while not isinstance(node, ast.stmt):
            up = parents.get(id(node))
            if up is None:
                return None
            node = up
        owner = parents.get(id(node))
        place = self._place(owner, node) if owner is not None else None
        if owner is None or place is None:
            return None
        field, at = place
        block = getattr(owner, field)
        for statement in reversed(block[:at]):
            if name.id not in self._stored_in(statement):
                continue
            if (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and statement.targets[0].id == name.id
            ):
                return statement.value
            return None  # bound there some other way, or only on some paths
        if isinstance(owner, (ast.For, ast.AsyncFor)) and field == "body":
            # the loop's own target, at the start of each pass (a loader's batch before the
            # body moves it: ``torch.unique(y)``, then ``y = y.to(device)``)
            values = [v for n, v in _node_bindings(owner, self.facts) if n == name.id]
            return values[0] if len(values) == 1 else None
        return None

    def _place(self, owner: ast.AST, statement: ast.stmt) -> tuple[str, int] | None:
        """The block of ``owner`` that holds ``statement`` and its index there (each block of
        an owner indexed once)."""
        if id(owner) not in self._places:
            self._places[id(owner)] = {
                id(s): (f, i)
                for f in ("body", "orelse", "finalbody")
                if isinstance(body := getattr(owner, f, None), list)
                for i, s in enumerate(body)
            }
        return self._places[id(owner)].get(id(statement))

    def _stored_in(self, statement: ast.stmt) -> frozenset[str]:
        """The names ``statement`` binds anywhere in it (read once per statement)."""
        stored = self._stores.get(id(statement))
        if stored is None:
            stored = self._stores[id(statement)] = frozenset(
                n.id
                for n in ast.walk(statement)
                if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
            )
        return stored

    def _host_array(self, node: ast.AST) -> bool:
        """A host tensor with at least one dimension, made here: ``torch.arange(n)``,
        ``torch.zeros(b, d)``, ``torch.tensor([...])`` without ``device=``. An operation with a
        tensor on a device raises (only 0-dim host tensors mix with those), so what it computes
        with anything is in host memory (kohya's ``torch.arange(len(tokenizer)) < token_id``)."""
        if not isinstance(node, ast.Call) or any(k.arg == "device" for k in node.keywords):
            return False
        qual = self.facts.names.qualname(node.func)
        if qual in _RANGES:
            return True
        if qual == "torch.tensor":
            return bool(node.args) and isinstance(node.args[0], (ast.List, ast.ListComp))
        if qual in _SIZED:
            first = node.args[0] if node.args else None
            empty = isinstance(first, (ast.Tuple, ast.List)) and not first.elts
            return first is not None and not isinstance(first, ast.Starred) and not empty
        return False

    def on_device(self, node: ast.AST) -> bool:
        """A tensor, and not certainly on the host: reading it may wait for a device."""
        return self.is_tensor(node) and not self.is_host(node)

    def _number_like(self, node: ast.expr) -> bool:
        """A field of a config not known as a tensor (``config.warmup_tokens``), or a name
        written as a constant (``IGNORE_INDEX``, upper case)."""
        if self.is_tensor(node):
            return False
        if isinstance(node, ast.Name):
            return node.id.isupper()
        return isinstance(node, ast.Attribute) and dotted(node) is not None

    def is_not_tensor(self, node: ast.expr) -> bool:
        """True when ``node`` certainly is not a tensor: a literal, a container, ``.item()``."""
        if node is _EVIDENCE or node is _BATCH:
            return False
        if isinstance(node, (ast.Constant, ast.JoinedStr, *_CONTAINERS)):
            return True
        if isinstance(node, ast.Attribute):
            return node.attr in _NOT_TENSOR_MEMBERS
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Name) and func.id in _PYTHON_VALUES) or _type_name(node):
                return True
            if isinstance(func, ast.Attribute) and func.attr in _NOT_TENSOR_MEMBERS:
                return True
            if (
                isinstance(func, ast.Name)
                and func.id in self.facts.functions
                and func.id not in self._visiting
            ):
                self._visiting.add(func.id)  # recursion guard
                returns = [r for f in self.facts.functions[func.id] for r in returned(f)]
                result = bool(returns) and all(self.is_not_tensor(r) for r in returns)
                self._visiting.discard(func.id)
                return result
        return False


def _type_name(call: ast.Call) -> bool:
    """``x.type()`` with no argument: the tensor's type as a string (``'torch.cuda.FloatTensor'``;
    KAIR's SSIM loss compares two), not a cast."""
    return (
        isinstance(call.func, ast.Attribute)
        and call.func.attr == "type"
        and not call.args
        and not call.keywords
    )


_CONTAINERS = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
# Builtins whose result is a Python value, never a tensor.
_PYTHON_VALUES = frozenset(
    {"float", "int", "bool", "str", "len", "round", "list", "dict", "tuple", "range", "repr"}
)


# Functions whose returns are being examined, so that recursion ends.
_SOLVING: set[int] = set()

# A marker value: the name is bound to a tensor by an annotation or by ``.backward()``.
_EVIDENCE = ast.Constant(value=None)
# A marker value: the name is bound to a batch of a loop over a loader: a host tensor.
_BATCH = ast.Constant(value=None)


def _operands(node: ast.BinOp) -> list[ast.expr]:
    """The leaves of a chain of binary operations, iteratively: ``a + b + ... + z`` nests as
    deep as it is long, and recursing on it overflowed the stack (issue 17). A ``"%s" % x``
    string formatting is a leaf that is no tensor."""
    leaves: list[ast.expr] = []
    stack: list[ast.expr] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.BinOp) and not (
            isinstance(item.op, ast.Mod) and isinstance(item.left, ast.Constant)
        ):
            stack += [item.right, item.left]
        elif not isinstance(item, ast.BinOp):
            leaves.append(item)
    return leaves


def _is_module_class(owner: str, facts: LoopFacts) -> bool:
    if owner in facts.classes:
        return any(
            isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "forward"
            for n in facts.classes[owner].body
        )
    last = owner.rsplit(".", 1)[-1]
    return (
        owner.startswith("torch.nn.")
        and not owner.startswith("torch.nn.functional.")
        and (last[:1].isupper())
    )


def _bindings(scope: Scope, facts: LoopFacts) -> Iterator[tuple[str, ast.expr | None]]:
    """(name, value) for each way a name is bound in ``scope``; value None when unknown."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = scope.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            annotation = dotted(arg.annotation) if arg.annotation is not None else None
            yield arg.arg, (_EVIDENCE if annotation in _TENSOR_ANNOTATIONS else None)
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                yield extra.arg, None
    for node in walk(scope.body):
        yield from _node_bindings(node, facts)


def _node_bindings(node: ast.AST, facts: LoopFacts) -> Iterator[tuple[str, ast.expr | None]]:
    """(name, value) for each name ``node`` itself binds (:func:`_bindings`)."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _bind(target, node.value)
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        yield from _bind(node.target, node.value)
    elif isinstance(node, ast.AugAssign):
        text = dotted(node.target)
        if text is not None:
            yield text, ast.BinOp(left=node.target, op=node.op, right=node.value)
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        params = _parameters(node.iter, node.target)
        if params is not None:
            yield params, _EVIDENCE  # ``for p in model.parameters()``: parameters
            if isinstance(node.target, ast.Tuple) and isinstance(node.target.elts[0], ast.Name):
                # ``for name, p in model.named_parameters()``: the name is a string
                yield node.target.elts[0].id, ast.Constant("")
            return
        if isinstance(node.target, ast.Name) and _counts(node.iter):
            # ``for t in range(1000)``: an int, whatever ``t`` held before (a notebook's
            # earlier ``t = torch.linspace(...)`` is not what the loop prints)
            yield node.target.id, ast.Constant(0)
            return
        zipped = _zipped(node.iter, node.target)
        if zipped is not None:
            # ``for data, iteration in zip(loader, range(start, max_iter))`` (detectron2):
            # each name from its own iterable, the counter an int
            for element, source in zipped:
                if isinstance(element, ast.Name) and _counts(source):
                    yield element.id, ast.Constant(0)
                else:
                    yield from _bind_loop_target(element, source, batch=facts.is_loader(source))
            return
        batch = facts.is_loader(node.iter)
        iterable = node.iter
        if _enumerates(facts, iterable, set()):
            # ``for it, (x, y) in pbar`` with ``pbar = tqdm(enumerate(loader))``: ``it`` counts
            iterable = ast.Call(
                func=ast.Name("enumerate", ast.Load()), args=[iterable], keywords=[]
            )
        yield from _bind_loop_target(node.target, iterable, batch=batch)
    elif isinstance(node, ast.comprehension) and isinstance(node.target, ast.Name):
        # ``[label.tolist() for label in target]``: each element is what indexing the
        # iterable gives, as in ``for d in done`` (a batch's host tensors stay on the host)
        yield (
            node.target.id,
            ast.Subscript(value=node.iter, slice=ast.Constant(0), ctx=ast.Load()),
        )
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        for item in node.items:
            if item.optional_vars is not None:
                yield from _bind(item.optional_vars, None)
    elif isinstance(node, ast.NamedExpr):
        yield node.target.id, node.value
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            yield (alias.asname or alias.name).split(".")[0], None
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "backward"
        # ``accelerator.backward(loss)``, ``fabric.backward(loss)``: a framework object
        # given the loss; a tensor's own backward takes no positional loss
        and not node.args
    ):
        text = dotted(node.func.value)
        if text is not None:
            yield text, _EVIDENCE


def _zipped(iterable: ast.expr, target: ast.expr) -> list[tuple[ast.expr, ast.expr]] | None:
    """The (target, iterable) pairs of ``for a, b in zip(x, y)``; None for any other loop."""
    if not (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id == "zip"
        and isinstance(target, ast.Tuple)
        and len(target.elts) == len(iterable.args)
        and not any(isinstance(a, ast.Starred) for a in iterable.args)
    ):
        return None
    return list(zip(target.elts, iterable.args, strict=True))


def _counts(iterable: ast.expr) -> bool:
    """``range(...)``: a loop over ints."""
    return (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id == "range"
    )


def _parameters(iterable: ast.expr, target: ast.expr) -> str | None:
    """The name bound to each parameter by ``for p in m.parameters()`` or ``for name, p in
    m.named_parameters()`` (DINO's gradient clipping); None for any other loop."""
    if not (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute)):
        return None
    if iterable.func.attr == "parameters" and isinstance(target, ast.Name):
        return target.id
    if (
        iterable.func.attr == "named_parameters"
        and isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and isinstance(target.elts[1], ast.Name)
    ):
        return target.elts[1].id
    return None


def _bind(target: ast.expr, value: ast.expr | None) -> Iterator[tuple[str, ast.expr | None]]:
    text = dotted(target)
    if text is not None:
        yield text, value
    elif isinstance(target, (ast.Tuple, ast.List)):
        # ``x, y = a, b`` pairs up; ``images, labels = data`` unpacks a name as indexing it
        # would (a loader's host batch gives host tensors); a call's result stays unknown.
        pairs = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
        named = isinstance(value, ast.Name) and not any(
            isinstance(e, ast.Starred) for e in target.elts
        )
        for i, element in enumerate(target.elts):
            if pairs:
                yield from _bind(element, value.elts[i])  # type: ignore[union-attr]
            elif named and value is not None:
                yield from _bind(element, ast.Subscript(value=value, slice=ast.Constant(i)))
            else:
                yield from _bind(element, None)
    elif isinstance(target, ast.Starred):
        yield from _bind(target.value, None)


def _inside_progress_bars(node: ast.expr) -> ast.expr:
    """What ``node`` wraps in progress bars: ``enumerate(loader)`` of
    ``tqdm(enumerate(loader))``."""
    while (
        isinstance(node, ast.Call)
        and node.args
        and (dotted(node.func) or "").rsplit(".", 1)[-1] == "tqdm"
    ):
        node = node.args[0]
    return node


def _enumerates(facts: LoopFacts, node: ast.expr, seen: set[str]) -> bool:
    """``node`` names a loader's wrapper that enumerates it (``pbar = enumerate(loader)``,
    then ``pbar = tqdm(pbar, total=nb)``: YOLO's), as any of its bindings says."""
    name = dotted(node)
    if name is None or name in seen:
        return False
    seen.add(name)
    for wrapper in facts.loader_wrappers.get(name, []):
        inner = _inside_progress_bars(wrapper)
        if isinstance(inner, ast.Call) and dotted(inner.func) == "enumerate":
            return True
        if _enumerates(facts, inner, seen):
            return True
    return False


def _bind_loop_target(
    target: ast.expr, iterable: ast.expr, *, batch: bool
) -> Iterator[tuple[str, ast.expr | None]]:
    """``for x, y in loader`` makes x and y tensors; ``for i, (x, y) in enumerate(loader)`` too,
    also inside a progress bar (``tqdm(enumerate(loader))``: ``i`` is still the count)."""
    inner = _inside_progress_bars(iterable)
    enumerated = (
        isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Name)
        and inner.func.id == "enumerate"
    )
    if enumerated and isinstance(target, ast.Tuple) and len(target.elts) == 2:
        yield from _bind(target.elts[0], None)
        target = target.elts[1]
    if batch and isinstance(target, ast.Tuple):
        for element in target.elts:
            if isinstance(element, ast.Name):
                yield element.id, _BATCH
            else:
                yield from _bind(element, None)
    elif batch and isinstance(target, ast.Name):
        # ``for i, data_ in enumerate(loader)``: a batch that is one tensor (a language
        # model's token block), or a tuple or dict of them (``batch[0]``, ``batch["x"]``)
        yield target.id, _BATCH
    elif not batch and not enumerated and isinstance(target, ast.Name):
        # ``for d in done``: each element is what indexing the iterable gives, a tensor (on
        # the device the iterable is on) when the iterable is one, else unknown
        yield target.id, ast.Subscript(value=iterable, slice=ast.Constant(0), ctx=ast.Load())
    else:
        yield from _bind(target, None)
