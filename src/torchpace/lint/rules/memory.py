"""TP4xx: memory and graph."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.findings import Fix
from torchpace.lint.rule import (
    FileContext,
    Report,
    Rule,
    argument,
    end_of,
    has_star_args,
    insert_after,
    is_const,
    keyword,
    replace,
)

_CONVS = {f"torch.nn.Conv{d}" for d in ("1d", "2d", "3d")}
_NORMS = {f"torch.nn.BatchNorm{d}" for d in ("1d", "2d", "3d")}
# Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, ...)
_BIAS_POSITION = 7


def _conv_bias_fix(call: ast.Call) -> tuple[bool, Fix | None]:
    """Whether the conv has a bias, and the fix that removes it when exact."""
    if has_star_args(call):
        return False, None  # **kwargs may set bias=False: cannot tell
    bias = argument(call, "bias", _BIAS_POSITION)
    if bias is None:
        if not call.args and not call.keywords:
            return False, None
        last = max([*call.args, *call.keywords], key=end_of)
        return True, Fix("Pass `bias=False`", "safe", (insert_after(last, ", bias=False"),))
    if is_const(bias, True):
        return True, Fix("Pass `bias=False`", "safe", (replace(bias, "False"),))
    return False, None  # False, or an expression whose value we cannot tell


def _same_channels(conv: ast.Call, norm: ast.Call) -> bool:
    out = argument(conv, "out_channels", 1)
    features = argument(norm, "num_features", 0)
    return out is not None and features is not None and ast.dump(out) == ast.dump(features)


def _check_conv_bias_before_bn(ctx: FileContext) -> Iterator[Report]:
    names = {id(call): name for call, name in ctx.calls}
    for call, name in ctx.calls:
        if name != "torch.nn.Sequential":
            continue
        for conv, norm in zip(call.args, call.args[1:], strict=False):
            if not (isinstance(conv, ast.Call) and isinstance(norm, ast.Call)):
                continue
            if names.get(id(conv)) not in _CONVS or names.get(id(norm)) not in _NORMS:
                continue
            has_bias, fix = _conv_bias_fix(conv)
            if has_bias and _same_channels(conv, norm):
                yield Report(conv, fix)


CONV_BIAS_BEFORE_BATCHNORM = Rule(
    code="TP401",
    name="conv-bias-before-batchnorm",
    message="Convolution has a bias that the BatchNorm right after it cancels",
    technique="conv-bias-before-bn",
    doc="""\
## What it does
Flags a convolution with a bias directly followed by a BatchNorm over the same channels inside
an `nn.Sequential(...)` literal.

## Why is this slow
BatchNorm subtracts the per-channel mean, which removes any constant added per channel, so the
bias is computed, stored and updated for nothing.

## Example
```python
block = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU())
```

## Use instead
```python
block = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
```

## Fix safety
Safe: the model computes the same function. A checkpoint saved with the bias no longer loads
with `strict=True`; load it with `strict=False` or retrain. Convs whose `bias` is an expression,
or that take `**kwargs`, are not reported.

## References
PyTorch Performance Tuning Guide, "Disable bias for convolutions directly followed by a batch
norm".
""",
    check=_check_conv_bias_before_bn,
)


def _check_zero_grad_to_zero(ctx: FileContext) -> Iterator[Report]:
    for call, _ in ctx.calls:
        if isinstance(call.func, ast.Attribute) and call.func.attr == "zero_grad":
            arg = keyword(call, "set_to_none")
            value = arg.value if arg is not None else (call.args[0] if call.args else None)
            if is_const(value, False):
                yield Report(value)  # type: ignore[arg-type]


ZERO_GRAD_TO_ZERO = Rule(
    code="TP402",
    name="zero-grad-set-to-zero",
    message="`zero_grad(set_to_none=False)` fills every gradient with zeros instead of freeing it",
    technique="grad-set-to-none",
    doc="""\
## What it does
Flags `zero_grad(set_to_none=False)` on an optimizer or a module. `zero_grad()` with no argument
sets gradients to None on torch >= 2.0 and is fine.

## Why is this slow
Writing zeros into every gradient is one memory-bound kernel per parameter each step, and the
next backward then adds into them instead of writing them.

## Example
```python
optimizer.zero_grad(set_to_none=False)
```

## Use instead
```python
optimizer.zero_grad()
```

## Fix safety
No fix: code that reads `.grad` after `zero_grad` and expects a tensor would get None.

## References
PyTorch Performance Tuning Guide, "Use parameter.grad = None instead of model.zero_grad()".
""",
    check=_check_zero_grad_to_zero,
)

# Adam(params, lr, betas, eps, weight_decay, ...)
_WEIGHT_DECAY_POSITION = 4


def _check_adam_weight_decay(ctx: FileContext) -> Iterator[Report]:
    for call, name in ctx.calls:
        if name != "torch.optim.Adam":
            continue
        decay = argument(call, "weight_decay", _WEIGHT_DECAY_POSITION)
        if (
            isinstance(decay, ast.Constant)
            and isinstance(decay.value, (int, float))
            and not isinstance(decay.value, bool)
            and decay.value != 0
        ):
            yield Report(decay)


ADAM_WITH_WEIGHT_DECAY = Rule(
    code="TP404",
    name="adam-with-weight-decay",
    message="Adam adds weight decay to the gradient (L2), not decoupled; use AdamW",
    technique="adamw",
    doc="""\
## What it does
Flags `torch.optim.Adam` created with a literal non-zero `weight_decay`.

## Why is this slow
Adam folds weight decay into the gradient, where the adaptive scaling weakens it; AdamW decays
the weights directly, which regularises as intended and usually reaches a given loss in fewer
steps at the same cost per step.

## Example
```python
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=0.01)
```

## Use instead
```python
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
```

## Fix safety
No fix: AdamW changes the optimisation, so the weight decay value usually needs retuning.

## References
Loshchilov and Hutter, "Decoupled Weight Decay Regularization"; `torch.optim.AdamW` docs.
""",
    check=_check_adam_weight_decay,
)

RULES = (CONV_BIAS_BEFORE_BATCHNORM, ZERO_GRAD_TO_ZERO, ADAM_WITH_WEIGHT_DECAY)
