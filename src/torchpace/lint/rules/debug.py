"""TP6xx: debugging APIs left on."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.lint.rule import FileContext, Report, Rule, argument, is_const


def _check_anomaly(ctx: FileContext) -> Iterator[Report]:
    for call, name in ctx.calls:
        # detect_anomaly() is on whatever it is given; set_detect_anomaly only with True.
        on = name == "torch.autograd.detect_anomaly" or (
            name == "torch.autograd.set_detect_anomaly"
            and is_const(argument(call, "mode", 0), True)
        )
        if on:
            yield Report(call.func)


ANOMALY_DETECTION = Rule(
    code="TP601",
    name="anomaly-detection-enabled",
    message="Autograd anomaly detection is on: every backward op is checked and traced",
    technique="disable-debug-apis",
    doc="""\
## What it does
Flags `torch.autograd.set_detect_anomaly(True)` and `torch.autograd.detect_anomaly()`.

## Why is this slow
Anomaly mode records a Python stack trace for every operation in the forward pass and checks
every backward output for NaN, which costs a host-device sync per operation.

## Example
```python
torch.autograd.set_detect_anomaly(True)
```

## Use instead
Remove it from training runs; turn it on only while hunting a NaN, for a few steps.

## Fix safety
No fix: it may be there on purpose while debugging.

## References
PyTorch Performance Tuning Guide, "Disable debugging APIs".
""",
    check=_check_anomaly,
)


def _is_launch_blocking(key: ast.AST, value: ast.AST | None) -> bool:
    return is_const(key, "CUDA_LAUNCH_BLOCKING") and is_const(value, "1")


def _check_launch_blocking(ctx: FileContext) -> Iterator[Report]:
    for node in ctx.nodes:
        # os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and ctx.names.qualname(target.value) == "os.environ"
                    and _is_launch_blocking(target.slice, node.value)
                ):
                    yield Report(node)
    # os.environ.setdefault("CUDA_LAUNCH_BLOCKING", "1"), os.putenv(...)
    for call, name in ctx.calls:
        if (
            name in ("os.environ.setdefault", "os.putenv")
            and len(call.args) == 2
            and _is_launch_blocking(call.args[0], call.args[1])
        ):
            yield Report(call)


CUDA_LAUNCH_BLOCKING = Rule(
    code="TP604",
    name="cuda-launch-blocking",
    message="`CUDA_LAUNCH_BLOCKING=1` makes every CUDA kernel launch wait for the kernel",
    technique="disable-debug-apis",
    doc="""\
## What it does
Flags `os.environ["CUDA_LAUNCH_BLOCKING"] = "1"` (and `os.environ.setdefault` / `os.putenv` with
the same values) in code.

## Why is this slow
CUDA launches kernels asynchronously so the host can queue the next ones while the device runs.
With launch blocking on, the host waits for each kernel to finish: the device idles between
kernels and the host cannot run ahead.

## Example
```python
os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
```

## Use instead
Remove it; set it in the shell for a debugging run only (`CUDA_LAUNCH_BLOCKING=1 python
train.py`), to get exact error positions.

## Fix safety
No fix: it may be there on purpose while debugging.

## References
PyTorch Performance Tuning Guide, "Disable debugging APIs"; CUDA environment variables docs.
""",
    check=_check_launch_blocking,
)

RULES = (ANOMALY_DETECTION, CUDA_LAUNCH_BLOCKING)
