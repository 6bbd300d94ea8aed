"""Does a file put its work on a CUDA device? A static, whole-file answer for the rules.

Several techniques only pay off on CUDA (pinned memory, the cuDNN auto-tuner), so their rules
first ask :func:`uses_cuda`. The answer is True when the file moves tensors or modules to a CUDA
device, creates them there, or picks CUDA as its device:

- ``x.cuda()`` / ``model.cuda(rank)``: any method call named ``cuda``;
- ``x.to("cuda")``, ``x.to("cuda:0")``, ``x.to(device="cuda")``, ``x.to(torch.device("cuda"))``;
- ``torch.device("cuda")``, and a ``device=`` or ``map_location=`` keyword of any call holding a
  CUDA device (``torch.zeros(3, device="cuda")``, ``torch.load(f, map_location="cuda:0")``);
- a CUDA device assigned to a name, attribute or item (``device = "cuda"``, ``DEVICE = "cuda" if
  torch.cuda.is_available() else "cpu"``, ``device = f"cuda:{rank}"``), given as an option's
  ``default=`` (``parser.add_argument("--device", default="cuda")``) or as the default of a
  function's device parameter (``def train(n_epoch=100, device="cuda:1"):``), or compared with
  (``if device.type == "cuda":``);
- ``torch.accelerator.current_accelerator()`` (the device idiom of torch 2.6+: the CUDA device
  on a GPU machine), ``torch.accelerator.set_device_index(...)``, and PEFT's
  ``peft.utils.infer_device()``, the same idiom;
- ``torch.cuda.set_device(...)``, and ``torch.distributed.init_process_group("nccl")`` (NCCL
  runs on CUDA devices only);
- ``DistributedDataParallel(model, device_ids=[...])``: device ids are CUDA devices (a CPU
  module's must be None).

A CUDA device is the string ``"cuda"`` or ``"cuda:N"``, an f-string or ``+``/``%`` expression that
starts with ``"cuda:"``, ``torch.device`` of one of these, or a conditional expression
(``a if c else b``, ``a or b``) either branch of which is one.

Not enough on their own: ``torch.cuda.is_available()`` (a script that checks for a GPU may never
use one), and autocast or GradScaler for CUDA in any spelling (``torch.cuda.amp.GradScaler()``,
``torch.autocast("cuda")``): they set precision, not placement, and without a GPU they warn and
do nothing. Nor a CUDA device bound to a name, or to a field of a settings object
(``self.device = "cuda" if ... else "cpu"``), that the file only prints or formats, or that a
notebook never reads: nothing is handed to it. Nor what runs only under ``if device == "cuda":``
where the file binds ``device`` only to the CPU (``device = 'cpu'``, the CUDA line commented
out), nor that comparison itself: a branch the file never takes.

The analysis is flow-insensitive. Across files it follows one thing: ``device = helper()`` where
``helper`` is imported from a project file that returns a CUDA device
(:func:`torchpace.lint.project.device_helper_gives_cuda`); devices read from configuration
files are not seen.
"""

from __future__ import annotations

import ast
import re

from torchpace.lint.imports import Resolver
from torchpace.lint.rule import FileContext, argument, per_file

_CUDA = re.compile(r"cuda(:\d+)?")
# Keywords whose value says where tensors go; `default=` is an option's (argparse, click).
_DEVICE_KEYWORDS = frozenset({"device", "map_location", "default"})
_INIT_PROCESS_GROUP = "torch.distributed.init_process_group"
# Calls that place work on the accelerator whatever else the file says.
_PLACING_CALLS = frozenset(
    {
        "torch.cuda.set_device",
        "torch.accelerator.current_accelerator",
        "torch.accelerator.set_device_index",
        "torch.accelerator.set_device_idx",
        # PEFT's accelerator idiom: "cuda" on a GPU machine (xpu, npu, mps or cpu elsewhere)
        "peft.utils.infer_device",
        "peft.utils.other.infer_device",
    }
)


def _starts_with_cuda_index(node: ast.expr) -> bool:
    """``"cuda:" + ...``, ``"cuda:%d" % ...`` or ``f"cuda:{...}"``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left = node.left
        return isinstance(left, ast.Constant) and str(left.value).startswith("cuda:")
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        return isinstance(first, ast.Constant) and str(first.value).startswith("cuda:")
    return False


def is_cuda_device(node: ast.expr | None, names: Resolver) -> bool:
    """True when ``node`` certainly names a CUDA device in at least one of its branches."""
    if node is None:
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and _CUDA.fullmatch(node.value) is not None
    if isinstance(node, ast.IfExp):
        return is_cuda_device(node.body, names) or is_cuda_device(node.orelse, names)
    if isinstance(node, ast.BoolOp):
        return any(is_cuda_device(v, names) for v in node.values)
    if isinstance(node, ast.Call) and names.qualname(node.func) == "torch.device":
        return is_cuda_device(argument(node, "type", 0), names)
    return _starts_with_cuda_index(node)


# DistributedDataParallel's device_ids are CUDA device indices: "For single-device modules,
# device_ids can contain exactly one device id"; for CPU modules they must be None (torch docs).
_DDP = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
    }
)


def _given(node: ast.expr | None) -> bool:
    return node is not None and not (isinstance(node, ast.Constant) and node.value is None)


def _call_uses_cuda(call: ast.Call, name: str | None, names: Resolver) -> bool:
    if name in _PLACING_CALLS:
        return True
    if name in _DDP and _given(argument(call, "device_ids", 1)):
        return True  # device_ids name CUDA devices; a CPU module must leave them None
    if name == _INIT_PROCESS_GROUP:
        backend = argument(call, "backend", 0)
        return isinstance(backend, ast.Constant) and backend.value == "nccl"
    if isinstance(call.func, ast.Attribute):
        # A method of a tensor or module: `.cuda()` moves it, `.to(...)` may.
        if call.func.attr == "cuda":
            return True
        if call.func.attr == "to" and call.args and is_cuda_device(call.args[0], names):
            return True
    if name == "torch.device" and is_cuda_device(call, names):
        return True
    return any(k.arg in _DEVICE_KEYWORDS and is_cuda_device(k.value, names) for k in call.keywords)


def _from_device_helper(ctx: FileContext, node: ast.Assign) -> bool:
    """``device = get_device()`` where a project file defines ``get_device`` to return a CUDA
    device (looked up only for names that say "device"; also as one element of a tuple
    assignment)."""
    from torchpace.lint.project import device_helper_gives_cuda

    value = node.value
    pairs = [(t, value) for t in node.targets]
    for target in node.targets:  # ``lr, epochs, device = 0.01, 5, d2l.try_gpu()``
        if (
            isinstance(target, ast.Tuple)
            and isinstance(value, ast.Tuple)
            and len(target.elts) == len(value.elts)
        ):
            pairs += zip(target.elts, value.elts, strict=True)
    for target, given in pairs:
        if not isinstance(given, ast.Call) or "device" not in _last_name(target).lower():
            continue
        name = ctx.names.qualname(given.func)
        if (
            name is not None
            and not name.startswith("torch.")
            and device_helper_gives_cuda(ctx, given)
        ):
            return True
    return False


def _last_name(node: ast.expr) -> str:
    """``device`` for ``device`` or ``self.device``; "" otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def moves_to_a_device(node: ast.AST, names: Resolver) -> bool:
    """``x.cuda()``, or ``x.to(d)`` where ``d`` names a CUDA device or says "device" or "cuda"
    (``device``, ``batch.device``, ``get_device()``, ``f"cuda:{rank}"``; not ``torch.long``): a
    move off the host, as far as the file shows. The one reading of a move for every rule."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    if node.func.attr == "cuda":
        return True
    if node.func.attr != "to":
        return False
    target = argument(node, "device", 0)
    if target is None:
        return False
    text = ast.unparse(target)
    return "device" in text.lower() or "cuda" in text or is_cuda_device(target, names)


def framework_on_cpu(ctx: FileContext) -> bool:
    """The file runs its framework on the CPU: ``Trainer(accelerator="cpu")``,
    ``Fabric(accelerator="cpu")``, ``Accelerator(cpu=True)`` (Lightning's RL templates, whose
    ``.cuda()`` branches then never run)."""
    for call, _ in ctx.calls:
        for k in call.keywords:
            if (
                k.arg == "accelerator"
                and isinstance(k.value, ast.Constant)
                and k.value.value == "cpu"
            ) or (k.arg == "cpu" and isinstance(k.value, ast.Constant) and k.value.value is True):
                return True
    return False


@per_file
def uses_cuda(ctx: FileContext) -> bool:
    """True when the file moves or creates tensors or modules on a CUDA device (see module doc).

    One pass over the file's nodes; call it after cheaper checks have found a candidate.
    """
    if "@cuda" in ctx.entries:  # a CUDA file hands its device to this one (lint.project)
        return True
    if framework_on_cpu(ctx):
        return False
    names = ctx.names
    on_cpu = cpu_names(ctx)  # ``device = 'cpu'``: ``if device == 'cuda':`` is never taken
    for call, name in ctx.calls:
        if (
            _call_uses_cuda(call, name, names)
            and not _unused_device(ctx, call, name)
            and not (on_cpu and _only_on_cuda(ctx, call, on_cpu))
        ):
            return True
    for function in ctx.of_type(ast.FunctionDef, ast.AsyncFunctionDef):
        if _cuda_parameter_default(function, names):
            return True
    for node in ctx.of_type(ast.Assign, ast.AnnAssign, ast.Compare):
        if on_cpu and _only_on_cuda(ctx, node, on_cpu):
            continue
        if isinstance(node, ast.Compare) and any(
            isinstance(side, ast.Name) and side.id in on_cpu
            for side in (node.left, *node.comparators)
        ):
            continue  # ``device == 'cuda'`` of a name bound only to the CPU: a test never true
        if (
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and is_cuda_device(node.value, names)
            and not _only_shown(ctx, node)
        ):
            return True
        if isinstance(node, ast.Assign) and _from_device_helper(ctx, node):
            return True
        if isinstance(node, ast.Compare) and any(
            is_cuda_device(side, names) for side in (node.left, *node.comparators)
        ):
            return True
    return _lightning_on_a_gpu(ctx)


def _lightning_on_a_gpu(ctx: FileContext) -> bool:
    """A Lightning ``Trainer`` the file builds for the GPU (``accelerator="gpu"``, ``gpus=2``,
    also through a module constant, BYOL's ``gpus=NUM_GPUS``): the fit runs on CUDA."""
    if b"lightning" not in ctx.source:
        return False
    from torchpace.lint.lightning import LIGHTNING_TRAINERS, lightning_gpu

    return any(
        name in LIGHTNING_TRAINERS and lightning_gpu({k.arg: k.value for k in call.keywords}, ctx)
        for call, name in ctx.calls
    )


def _cuda_parameter_default(
    function: ast.FunctionDef | ast.AsyncFunctionDef, names: Resolver
) -> bool:
    """A parameter named for a device whose default is a CUDA device (minDiffusion's
    ``def train_cifar10(n_epoch: int = 100, device: str = "cuda:1")``)."""
    from torchpace.lint.loops import parameter_defaults

    return any(
        "device" in name.lower() and is_cuda_device(default, names)
        for name, default in parameter_defaults(function).items()
    )


# Frameworks that place the model and batches on a device for the script.
_PLACING_FRAMEWORKS = (
    "lightning",
    "pytorch_lightning",
    "accelerate",
    "deepspeed",
    "transformers",
    "ignite",
    "colossalai",
)
# torch.cuda calls that run fine without a GPU, or only set precision.
_CUDA_QUERIES = frozenset(
    {
        "torch.cuda.is_available",
        "torch.cuda.device_count",
        "torch.cuda.amp.autocast",
        "torch.cuda.amp.GradScaler",
        "torch.cuda.is_bf16_supported",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
    }
)
_DTYPE_ONLY = re.compile(
    r"(torch\.)?(float|double|half|bfloat|int|long|short|bool|uint|complex)\w*$"
)


@per_file
def cpu_names(ctx: FileContext) -> frozenset[str]:
    """Names the file binds, every time, to the CPU (``device = torch.device("cpu")``, ``device
    = "cpu"``) and never takes as a parameter: a demo that plays a trained policy on the CPU
    (``model.to(device)``) shows no device by them."""
    if b"cpu" not in ctx.source:
        return frozenset()  # most files: no CPU device named at all
    bound: dict[str, bool] = {}  # every assignment of the name is to the CPU
    assigned: dict[str, int] = {}
    for node in ctx.of_type(ast.Assign):
        value = node.value
        on_cpu = (isinstance(value, ast.Constant) and value.value == "cpu") or (
            isinstance(value, ast.Call)
            and ctx.names.qualname(value.func) == "torch.device"
            and len(value.args) == 1
            and isinstance(value.args[0], ast.Constant)
            and value.args[0].value == "cpu"
        )
        for target in node.targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    bound[leaf.id] = bound.get(leaf.id, True) and on_cpu
                    assigned[leaf.id] = assigned.get(leaf.id, 0) + 1
    parameters = {a.arg for a in ctx.of_type(ast.arg)}
    # every store of the name is one of those assignments: not also a loop's target, ``with
    # ... as``, an annotated or augmented assignment, a walrus (``device: str = pick()``)
    stores: dict[str, int] = {}
    for n in ctx.of_type(ast.Name):
        if isinstance(n.ctx, ast.Store):
            stores[n.id] = stores.get(n.id, 0) + 1
    return frozenset(
        n
        for n, cpu in bound.items()
        if cpu and n not in parameters and stores.get(n, 0) == assigned[n]
    )


def _to_a_cpu_name(call: ast.Call, cpu: frozenset[str]) -> bool:
    """``x.to(device)`` with ``device`` one of :func:`_cpu_names`."""
    first = call.args[0] if call.args else None
    return (
        isinstance(call.func, ast.Attribute)
        and call.func.attr == "to"
        and isinstance(first, ast.Name)
        and first.id in cpu
    )


def _moves_somewhere(call: ast.Call) -> bool:
    """``.cuda()``, ``.to(device)``, ``.to("cuda")`` but not ``.to(torch.float64)``."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "cuda":
        return True
    if func.attr != "to":
        return False
    if any(k.arg == "device" for k in call.keywords):
        return True
    first = call.args[0] if call.args else None
    if first is None:
        return False
    text = ast.unparse(first)
    return not (
        _DTYPE_ONLY.match(text) or (isinstance(first, ast.Constant) and first.value == "cpu")
    )


# Names whose ``.device`` is a setting, not where a tensor is.
_SETTINGS = frozenset({"args", "opt", "opts", "config", "cfg", "hparams", "accelerator", "fabric"})


def _device_of_a_tensor(node: ast.expr) -> bool:
    """``x.device`` of a plain name: where a tensor already is (not ``self.device`` nor
    ``args.device``, a device the code chose, nor ``model.device``, where a model was put)."""
    if not (
        isinstance(node, ast.Attribute)
        and node.attr == "device"
        and isinstance(node.value, ast.Name)
    ):
        return False
    name = node.value.id
    lowered = name.lower()
    return name not in _SETTINGS | {"self", "cls"} and not any(
        word in lowered for word in ("model", "net", "module")
    )


def _follows_a_tensor(call: ast.Call) -> bool:
    """``y.to(x.device)``, ``y.to(device=x.device)``: a move to where another tensor is."""
    given = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "device")]
    return bool(given) and all(_device_of_a_tensor(g) for g in given)


@per_file
def may_use_accelerator(ctx: FileContext) -> bool:
    """False for a file that shows it runs on the CPU only: nothing is moved or created on a
    device (no ``.cuda()``, no ``.to(x)`` other than a dtype, ``"cpu"`` or a name the file binds
    only to the CPU (:func:`_cpu_names`), no ``device=`` but
    ``"cpu"``, no ``torch.device`` but ``"cpu"``; in a file that trains, neither
    ``device=x.device`` nor ``.to(x.device)``, which follow the file's own tensors) and nothing
    is imported from a framework that places work (Lightning, accelerate, DeepSpeed, ...). A
    host-device sync needs a device: the sync rules stay silent on such files (pytorch/examples'
    regression and RL scripts, issue 16)."""
    if uses_cuda(ctx):
        return True
    if framework_on_cpu(ctx):
        return False
    if any(path.startswith(_PLACING_FRAMEWORKS) for path in ctx.names.bindings.values()):
        return True  # a Lightning module, an accelerate script: the framework places the work

    # Following a tensor's own device (``torch.zeros(1, device=values.device)``) shows a device
    # in a model's file, whose inputs come from elsewhere; a file that trains makes its own
    # tensors, so there it shows nothing (learn2learn's RL examples, CPU-only: issue 32).
    def trains() -> bool:  # asked only of a call that follows a tensor: the facts cost
        return bool(ctx.loops.step_loops or ctx.loops.step_functions)

    on_cpu = cpu_names(ctx)
    for call, name in ctx.calls:
        if on_cpu and _only_on_cuda(ctx, call, on_cpu):
            continue  # ``if device == 'cuda': torch.cuda.manual_seed_all(777)`` with ``device =
            # 'cpu'``: a branch the file never takes
        if (
            _moves_somewhere(call)
            and not (_follows_a_tensor(call) and trains())
            and not _to_a_cpu_name(call, on_cpu)
        ):
            return True
        for k in call.keywords:
            if k.arg in {"device", "map_location"} and not (
                (isinstance(k.value, ast.Constant) and k.value.value == "cpu")
                or (_device_of_a_tensor(k.value) and trains())
                or (isinstance(k.value, ast.Name) and k.value.id in on_cpu)
            ):
                return True
        if (name or "").startswith("torch.cuda.") and name not in _CUDA_QUERIES:
            return True  # torch.cuda.synchronize(), empty_cache(), Stream(): a GPU run
        if name in {"torch.device", "torch.cuda.set_device"} or (name or "").startswith(
            "torch.accelerator."
        ):
            arg = call.args[0] if call.args else None
            cpu = isinstance(arg, ast.Constant) and arg.value == "cpu"
            if not cpu and not _unused_device(ctx, call, name):
                return True
    return False


def _only_on_cuda(ctx: FileContext, call: ast.AST, on_cpu: frozenset[str]) -> bool:
    """``call`` runs only under ``if device == "cuda":`` (``!=`` in its ``else``) where the
    file binds ``device`` only to the CPU."""
    node: ast.AST = call
    for parent in ctx.ancestors(call):
        if isinstance(parent, ast.If) and isinstance(parent.test, ast.Compare):
            test = parent.test
            sides = [test.left, *test.comparators]
            if len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
                names = [s for s in sides if isinstance(s, ast.Name) and s.id in on_cpu]
                cuda = [
                    s
                    for s in sides
                    if isinstance(s, ast.Constant)
                    and isinstance(s.value, str)
                    and s.value.startswith("cuda")
                ]
                if names and cuda:
                    taken = parent.body if isinstance(test.ops[0], ast.Eq) else parent.orelse
                    if any(node is stmt for stmt in taken):
                        return True
        node = parent
    return False


# Calls that show a value, and do nothing else with it.
_SHOWS = frozenset({"print", "logging.info", "logging.debug", "logging.warning"})


def _unused_device(ctx: FileContext, call: ast.Call, name: str | None) -> bool:
    """``device = torch.device(...)`` with the device :func:`_only_shown`."""
    assign = ctx.parents.get(id(call))
    return name == "torch.device" and isinstance(assign, ast.Assign) and _only_shown(ctx, assign)


def _only_shown(ctx: FileContext, assign: ast.Assign | ast.AnnAssign) -> bool:
    """The device that ``assign`` binds to a name (or to an attribute, ``self.device``: then any
    read of an attribute so named counts) is never used, only shown: every read of the name in
    the file formats or prints it, or a notebook never reads it (a course's set-up cell,
    ``device = "cuda" if torch.cuda.is_available() else "cpu"`` and ``print(f"Using device:
    {device}")``, before notebooks that never move anything to it). Nothing runs on a device
    nobody hands on."""
    targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
    if len(targets) != 1:
        return False
    target = targets[0]
    reads: list[ast.expr]
    if isinstance(target, ast.Name):
        name = target.id
        reads = [n for n in ctx.of_type(ast.Name) if n.id == name and isinstance(n.ctx, ast.Load)]
    elif isinstance(target, ast.Attribute):
        # a settings object's field (``self.device = "cuda" if ... else "cpu"`` in a notebook's
        # ``ExperimentParams``): any read of an attribute of that name, of any object, is a use
        reads = [
            n
            for n in ctx.of_type(ast.Attribute)
            if n.attr == target.attr and isinstance(n.ctx, ast.Load)
        ]
    else:
        return False
    for node in reads:
        parent = ctx.parents.get(id(node))
        if isinstance(parent, ast.FormattedValue):
            continue
        if (
            isinstance(parent, ast.Call)
            and node in parent.args
            and ctx.names.qualname(parent.func) in _SHOWS
        ):
            continue
        return False
    # A device never read at all: in a module, one that others may import; a notebook's is
    # read by no one.
    return bool(reads) or ctx.path.endswith(".ipynb")
