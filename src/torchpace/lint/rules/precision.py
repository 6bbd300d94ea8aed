"""TP3xx: precision and compilation."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.findings import Edit, Fix
from torchpace.lint.rule import FileContext, Report, Rule, insert_before, replace, start_of

_DEPRECATED_AMP = {"torch.cuda.amp.autocast": "autocast", "torch.cuda.amp.GradScaler": "GradScaler"}


def _amp_fix(ctx: FileContext, call: ast.Call, attr: str) -> Fix | None:
    """Rewrite ``torch.cuda.amp.X(...)`` as ``torch.amp.X("cuda", ...)``, only when exact."""
    func = call.func
    # Only a plain chain `<name>.cuda.amp.X`, with `<name>` bound to torch and written without
    # spaces or line breaks: then replacing it is exact.
    if not (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Attribute)
        and isinstance(func.value.value, ast.Attribute)
        and isinstance(func.value.value.value, ast.Name)
        and ctx.names.bindings.get(func.value.value.value.id) == "torch"
    ):
        return None
    torch_name = func.value.value.value.id
    if ctx.segment(func) != f"{torch_name}.cuda.amp.{attr}":
        return None
    # torch.cuda.amp.autocast(enabled, dtype, ...) has no device argument; torch.amp.autocast
    # takes (device_type, dtype, enabled, ...), so a positional argument would change meaning.
    if attr == "autocast" and call.args:
        return None
    first = min(
        [*call.args, *call.keywords],
        key=start_of,
        default=None,
    )
    if first is None:
        # The closing parenthesis is the call's last character.
        line, col = call.end_lineno, call.end_col_offset
        assert line is not None and col is not None
        insert = Edit(line, col - 1, line, col - 1, '"cuda"')
    else:
        insert = insert_before(first, '"cuda", ')
    return Fix(
        title=f'Use `torch.amp.{attr}("cuda", ...)`',
        safety="safe",
        edits=(replace(func, f"{torch_name}.amp.{attr}"), insert),
    )


def _check_deprecated_amp(ctx: FileContext) -> Iterator[Report]:
    for call, name in ctx.calls:
        attr = _DEPRECATED_AMP.get(name or "")
        if attr is not None:
            yield Report(call.func, _amp_fix(ctx, call, attr))


DEPRECATED_CUDA_AMP = Rule(
    code="TP301",
    name="deprecated-cuda-amp",
    message='`torch.cuda.amp` is deprecated; use `torch.amp` with the device `"cuda"`',
    technique="amp-fp16",
    doc="""\
## What it does
Flags `torch.cuda.amp.autocast(...)` and `torch.cuda.amp.GradScaler(...)`.

## Why is this slow
It is not slower today, but these entry points are deprecated and warn on every call; the
`torch.amp` forms work for every device, so a CPU run can use bf16 autocast with the same code.

## Example
```python
scaler = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast(dtype=torch.float16):
    loss = model(x)
```

## Use instead
```python
scaler = torch.amp.GradScaler("cuda")
with torch.amp.autocast("cuda", dtype=torch.float16):
    loss = model(x)
```

## Fix safety
Safe: the `torch.amp` forms with `"cuda"` behave the same. The fix applies only when the call is
written as `torch.cuda.amp.X(...)` (any alias of torch) and, for `autocast`, passes keywords
only, because the positional parameters differ. Names imported with `from torch.cuda.amp
import ...` are reported without a fix.

## References
PyTorch Automatic Mixed Precision docs (`torch.amp`); PyTorch Performance Tuning Guide, "Use
mixed precision and AMP".
""",
    check=_check_deprecated_amp,
)

_JIT = ("torch.jit.script", "torch.jit.trace")


def _check_jit(ctx: FileContext) -> Iterator[Report]:
    for call, name in ctx.calls:
        if name in _JIT:
            yield Report(call.func)
    # A bare decorator `@torch.jit.script` is not a call.
    for node in ctx.nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for deco in node.decorator_list:
                if not isinstance(deco, ast.Call) and ctx.names.qualname(deco) in _JIT:
                    yield Report(deco)


TORCHSCRIPT_FOR_SPEED = Rule(
    code="TP305",
    name="torchscript-for-speed",
    message="TorchScript (`torch.jit.script`/`trace`) is in maintenance; `torch.compile` fuses "
    "more",
    technique="torch-compile",
    doc="""\
## What it does
Flags `torch.jit.script` and `torch.jit.trace`, called or used as a decorator.

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

RULES = (DEPRECATED_CUDA_AMP, TORCHSCRIPT_FOR_SPEED)
