"""TP6xx: debugging APIs left on."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import PurePath

from torchpace.lint.loops import walk
from torchpace.lint.rule import (
    FileContext,
    Report,
    Rule,
    argument,
    has_star_args,
    is_const,
    keyword,
)
from torchpace.lint.values import option_default


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
    for node in ctx.of_type(ast.Assign):
        # os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
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


_GRADCHECKS = ("torch.autograd.gradcheck", "torch.autograd.gradgradcheck")
_TEST_FILE = re.compile(r"test_.*\.py|.*_test\.py|conftest\.py")
_TEST_FRAMEWORKS = ("pytest", "unittest")


def _is_test_file(ctx: FileContext) -> bool:
    """A pytest-style file name, or a file that imports pytest or unittest."""
    if _TEST_FILE.fullmatch(PurePath(ctx.path).name):
        return True
    return any(dotted.split(".")[0] in _TEST_FRAMEWORKS for dotted in ctx.names.bindings.values())


def _in_test(ctx: FileContext, node: ast.AST) -> bool:
    """Inside a ``test*`` function or a ``Test*`` class."""
    return any(
        (isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef)) and a.name.startswith("test"))
        or (isinstance(a, ast.ClassDef) and a.name.startswith("Test"))
        for a in ctx.ancestors(node)
    )


def _check_gradcheck(ctx: FileContext) -> Iterator[Report]:
    calls = [call for call, name in ctx.calls if name in _GRADCHECKS]
    if not calls or _is_test_file(ctx):
        return
    for call in calls:
        if not _in_test(ctx, call):
            yield Report(call.func)


GRADCHECK_OUTSIDE_TESTS = Rule(
    code="TP603",
    name="gradcheck-outside-tests",
    message="`gradcheck` evaluates the function twice per input element; it belongs in tests",
    technique="disable-debug-apis",
    doc="""\
## What it does
Flags `torch.autograd.gradcheck` and `torch.autograd.gradgradcheck` (however imported) called
outside tests. A file counts as a test when its name is `test_*.py`, `*_test.py` or
`conftest.py`, or when it imports `pytest` or `unittest`; calls inside a `test*` function or a
`Test*` class are not flagged either. The directory is not looked at, so a helper module under
`tests/` that imports neither framework is still checked.

## Why is this slow
`gradcheck` compares the analytical gradient with finite differences: it runs the function
twice per input element, in float64, and `gradgradcheck` does the same for second derivatives.
Left in a training script or a module's import path, it can cost more than the training step.

## Example
```python
loss_fn = MyLoss()
torch.autograd.gradcheck(loss_fn, (x.double().requires_grad_(),))
```

## Use instead
```python
# tests/test_my_loss.py
def test_my_loss_gradient():
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(MyLoss(), (x,))
```

## Fix safety
No fix: where the check belongs is the author's call; moving it to a test changes files.

## References
PyTorch Performance Tuning Guide, "Disable debugging APIs" (autograd `gradcheck` and
`gradgradcheck` are among the APIs it names).
""",
    check=_check_gradcheck,
)

# TP602 ------------------------------------------------------------------------------------------

_PROFILERS = frozenset(
    {
        "torch.profiler.profile",
        "torch.autograd.profiler.profile",
        "torch.autograd.profiler.emit_nvtx",
    }
)


def _check_profiler_without_schedule(ctx: FileContext) -> Iterator[Report]:
    if not any(name in _PROFILERS for _, name in ctx.calls):
        return
    facts = ctx.loops
    step_loops = {id(loop) for loop in facts.step_loops}
    for node in ctx.of_type(ast.With, ast.AsyncWith):
        scope = ctx.enclosing_scope(node)
        wraps_training = any(
            id(n) in step_loops
            or (
                isinstance(n, ast.Call)
                and any(facts.function_has_step_loop(f) for f in facts.callees(n, scope))
            )
            for n in walk(node.body)
        )
        if not wraps_training:
            continue
        for item in node.items:
            call = item.context_expr
            if not isinstance(call, ast.Call) or ctx.names.qualname(call.func) not in _PROFILERS:
                continue
            if has_star_args(call) or keyword(call, "schedule") is not None:
                continue
            if _off_unless_asked(ctx, call):
                continue
            yield Report(call)


def _off_unless_asked(ctx: FileContext, call: ast.Call) -> bool:
    """The autograd profiler's or NVTX's ``enabled`` is ``False``, or an option off by default
    (``profile(args.enable_profiling)`` with ``--enable-profiling`` a ``store_true``: DLRM's):
    an opt-in debug run, not the default one."""
    if ctx.names.qualname(call.func) == "torch.profiler.profile":
        return False  # no such switch: it records when entered
    enabled = argument(call, "enabled", 0)
    return enabled is not None and (
        is_const(enabled, False) or is_const(option_default(ctx, enabled), False)
    )


PROFILER_WITHOUT_SCHEDULE = Rule(
    code="TP602",
    name="profiler-around-whole-training",
    message="A profiler records every step of the training loop (no `schedule`)",
    technique="disable-debug-apis",
    doc="""\
## What it does
Flags `torch.profiler.profile(...)` without a `schedule`, and `torch.autograd.profiler.profile`
or `emit_nvtx`, used as a `with` block around a whole training loop. Not where the latter two
are off unless asked for: `enabled=False`, or an option whose default is off
(`profile(args.enable_profiling)` with a `store_true` flag).

## Why is this slow
The profiler records every operator of every step, which slows each step and grows memory
until the loop ends. A schedule profiles a few steps after a warm-up and records nothing
otherwise.

## Example
```python
with torch.profiler.profile() as prof:
    for x, y in loader:
        train_step(x, y)
```

## Use instead
```python
schedule = torch.profiler.schedule(wait=5, warmup=2, active=3, repeat=1)
with torch.profiler.profile(schedule=schedule) as prof:
    for x, y in loader:
        train_step(x, y)
        prof.step()
```

## Fix safety
No fix: which steps to record is the author's choice.

## References
PyTorch Performance Tuning Guide, "Disable debugging APIs"; PyTorch docs,
`torch.profiler.schedule`.
""",
    check=_check_profiler_without_schedule,
)

RULES = (
    ANOMALY_DETECTION,
    PROFILER_WITHOUT_SCHEDULE,
    GRADCHECK_OUTSIDE_TESTS,
    CUDA_LAUNCH_BLOCKING,
)
