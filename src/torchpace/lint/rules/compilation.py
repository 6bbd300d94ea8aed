"""TP305: TorchScript used for speed, where ``torch.compile`` is the maintained path."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import PurePath

from torchpace.lint.rule import FileContext, Report, Rule, is_const
from torchpace.lint.tree import subtree

_JIT = ("torch.jit.script", "torch.jit.trace")


def _exported(ctx: FileContext, call: ast.Call) -> bool:
    """``torch.jit.trace(m, x).save(path)`` or ``ts = torch.jit.script(m)`` ... ``ts.save(...)`` /
    ``torch.jit.save(ts, ...)``, or handed straight to another call (a TensorBoard graph):
    TorchScript as an export format, not for speed."""
    parent = ctx.parents.get(id(call))
    if isinstance(parent, ast.Attribute) and parent.attr == "save":
        return True
    if isinstance(parent, ast.Call) and call in parent.args:
        return True  # handed straight to a tool: ``tb.add_graph(torch.jit.trace(m, x))`` (YOLOv5)
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1):
        return False
    name = ctx.segment(parent.targets[0])
    for other, other_name in ctx.calls:
        func = other.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "save"
            and ctx.segment(func.value) == name
        ):
            return True
        if other_name == "torch.jit.save" and other.args and ctx.segment(other.args[0]) == name:
            return True
    return False


# Words in a file's path or an enclosing function's name that say the code exports, serves or
# runs inference (issue 32: TorchScript for export and serving flagged as a training-speed
# problem): `tools/deploy/export_model.py`, `def convert_to_torchscript`, `serve.py`.
_NOT_TRAINING = re.compile(
    r"(?<![a-z])(export|deploy|serve|serving|server|infer|inference|onnx|convert|freeze|"
    r"predict|demo|mobile|benchmark)",
    re.IGNORECASE,
)
# What turns a scripted module into an artefact for inference.
_FOR_INFERENCE = frozenset(
    {
        "torch.jit.freeze",
        "torch.jit.optimize_for_inference",
        "torch.onnx.export",
        "torch.utils.mobile_optimizer.optimize_for_mobile",
        "torch.jit.save",
    }
)


def _for_inference(ctx: FileContext, call: ast.Call) -> bool:
    """TorchScript made to export, serve or run inference: in a file or function named for it,
    under ``no_grad``/``inference_mode``, of a module put in ``eval()`` mode, or handed to
    ``torch.jit.freeze``, ``optimize_for_inference``, ``torch.onnx.export`` or the mobile
    optimizer."""
    if _NOT_TRAINING.search(PurePath(ctx.path).as_posix()):
        return True
    for ancestor in ctx.ancestors(call):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)) and _NOT_TRAINING.search(
            ancestor.name
        ):
            return True
        if isinstance(ancestor, (ast.With, ast.AsyncWith)) and any(
            (ctx.names.qualname(i.context_expr.func) if isinstance(i.context_expr, ast.Call)
             else None) in ("torch.no_grad", "torch.inference_mode")
            for i in ancestor.items
        ):  # fmt: skip
            return True
    first = call.args[0] if call.args else None
    if first is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "eval"
        for n in subtree(first)
    ):
        return True
    parent = ctx.parents.get(id(call))
    if isinstance(parent, ast.Call) and ctx.names.qualname(parent.func) in _FOR_INFERENCE:
        return True
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        name = ctx.segment(parent.targets[0])
        return any(
            qual in _FOR_INFERENCE and other.args and ctx.segment(other.args[0]) == name
            for other, qual in ctx.calls
        )
    return False


def _offers_compile(ctx: FileContext) -> bool:
    """The file calls ``torch.compile``, a ``.compile(...)`` method (``nn.Module.compile``,
    timm's ``task.compile``) or checks ``hasattr(torch, "compile")``."""
    for call, name in ctx.calls:
        if name == "torch.compile":
            return True
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "compile" and name is None:
            return True
        if (
            isinstance(func, ast.Name)
            and func.id == "hasattr"
            and len(call.args) == 2
            and is_const(call.args[1], "compile")
        ):
            return True
    return False


def _check_jit(ctx: FileContext) -> Iterator[Report]:
    found = [
        Report(call.func)
        for call, name in ctx.calls
        if name in _JIT and not _exported(ctx, call) and not _for_inference(ctx, call)
    ]
    # A bare decorator `@torch.jit.script` is not a call.
    for node in ctx.of_type(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        for deco in node.decorator_list:
            if not isinstance(deco, ast.Call) and ctx.names.qualname(deco) in _JIT:
                found.append(Report(deco))
    if found and not _offers_compile(ctx):  # beside torch.compile, TorchScript is an option
        yield from found


TORCHSCRIPT_FOR_SPEED = Rule(
    code="TP305",
    name="torchscript-for-speed",
    message="TorchScript (`torch.jit.script`/`trace`) is in maintenance; `torch.compile` fuses "
    "more",
    technique="torch-compile",
    doc="""\
## What it does
Flags `torch.jit.script` and `torch.jit.trace`, called or used as a decorator. Not flagged: a
file that also calls `torch.compile` (TorchScript is then an option beside it), and TorchScript
made for export, serving or inference, not training speed: a module scripted or traced to be
saved (`.save(...)`, `torch.jit.save`), frozen, optimised for inference or mobile, or exported
to ONNX; one traced in `eval()` mode or under `no_grad`/`inference_mode`; and any in a file or
function whose name says export, deploy, serve, inference, convert or benchmark.

## Why is this slow
Off by default: select it with `--select TP305`. TorchScript fuses a few pointwise operations and is
no longer developed. `torch.compile` captures the whole graph, fuses far more (including into
generated Triton or C++ kernels) and handles Python control flow by graph breaks instead of failing.

## Example
```python
model = torch.jit.script(model)
```

## Use instead
```python
model = torch.compile(model)
```

## Fix safety
No fix: TorchScript is also used to export models for C++ and mobile, which `torch.compile`
does not do. Keep it where export is the purpose.

## References
PyTorch Performance Tuning Guide, "Fuse pointwise operations"; the `torch.compile` tutorial.
""",
    check=_check_jit,
    # Off by default (issue 32): TorchScript today is mostly export and serving, and where it is
    # used for speed (a scripted pointwise op) moving to torch.compile is a trade-off. Judged on
    # both lint corpora: 0 true of the 9 findings judged. `--select TP305` runs it.
    default=False,
)


RULES = (TORCHSCRIPT_FOR_SPEED,)
