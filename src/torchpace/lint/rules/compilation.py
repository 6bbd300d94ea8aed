"""TP305: TorchScript used for speed, where ``torch.compile`` is the maintained path."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.lint.rule import FileContext, Report, Rule, is_const

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
        Report(call.func) for call, name in ctx.calls if name in _JIT and not _exported(ctx, call)
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
file that also calls `torch.compile` (TorchScript is then an option beside it), and a module
scripted or traced to be saved (`.save(...)`, `torch.jit.save`), which is export, not speed.

## Why is this slow
TorchScript fuses a few pointwise operations and is no longer developed. `torch.compile`
captures the whole graph, fuses far more (including into generated Triton or C++ kernels) and
handles Python control flow by graph breaks instead of failing.

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
)


RULES = (TORCHSCRIPT_FOR_SPEED,)
