"""TP206-TP207: allocations and host-to-device copies inside a training loop.

Like the syncs rules, these report only hot code (see :mod:`torchpace.lint.loops`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.findings import Edit, Fix
from torchpace.lint.loops import dotted
from torchpace.lint.rule import FileContext, Report, Rule, end_of, has_star_args, keyword
from torchpace.lint.rules.syncs import REFERENCES, check_calls_to, hot_calls

EMPTY_CACHE_IN_LOOP = Rule(
    code="TP206",
    name="empty-cache-in-training-loop",
    message="`torch.cuda.empty_cache()` returns cached memory that the next step allocates again",
    technique="avoid-empty-cache",
    doc=f"""\
## What it does
Flags `torch.cuda.empty_cache()` inside a training loop, unless a cadence gates it.

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
    check=check_calls_to("torch.cuda.empty_cache"),
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


def _looks_like_device(ctx: FileContext, node: ast.expr) -> bool:
    """``device``, ``args.device``, ``x.device``, ``"cuda:0"``, ``torch.device(...)``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith(("cuda", "mps", "xpu"))
    if isinstance(node, ast.Call):
        return ctx.names.qualname(node.func) == "torch.device"
    name = dotted(node)
    return name is not None and "device" in name.rsplit(".", 1)[-1].lower()


def _check_host_created_then_moved(ctx: FileContext) -> Iterator[Report]:
    for call, _, _ in hot_calls(ctx):
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in {"cuda", "to"}):
            continue
        factory = func.value
        if not isinstance(factory, ast.Call) or ctx.names.qualname(factory.func) not in _FACTORIES:
            continue
        if has_star_args(factory) or keyword(factory, "device") is not None:
            continue
        device = _device_argument(ctx, call)
        if device is None:
            if func.attr == "cuda" or (call.args and _looks_like_device(ctx, call.args[0])):
                yield Report(call)  # a move to a device, but not one we can rewrite exactly
            continue
        yield Report(call, _device_fix(factory, call, device))


def _device_fix(factory: ast.Call, move: ast.Call, device: str) -> Fix:
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
        "safe",
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
Flags a tensor factory (`torch.tensor`, `zeros`, `ones`, `rand`, `randn`, `arange`, ...) whose
result is immediately moved with `.cuda()` or `.to(device)`, inside a training loop.

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
Safe: the tensor has the same shape, dtype and device. Random factories then draw from the
device's generator instead of the host's, so the sampled values differ from run to run of the
old code (their distribution does not). Only `.cuda()` with no argument and `.to(device)` with
a single device argument (plus `non_blocking`) are rewritten; other moves are reported only.

## References
PyTorch Performance Tuning Guide, "Create tensors directly on the target device";
"7個提升PyTorch性能的技巧" (PyTorch Lightning team), "直接在GPUs上構建張量".
""",
    check=_check_host_created_then_moved,
)

RULES = (EMPTY_CACHE_IN_LOOP, HOST_TENSOR_MOVED)
