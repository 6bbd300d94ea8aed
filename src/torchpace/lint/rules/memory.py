"""TP4xx: memory and the optimizer. Conv-before-BatchNorm (TP401) lives in ``convs``."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from torchpace.catalog import FUSED_KERNELS
from torchpace.lint.device import uses_cuda
from torchpace.lint.rule import FileContext, Report, Rule, argument, is_const, keyword
from torchpace.lint.values import option_default


def adds_into_grads(nodes: Iterable[ast.AST]) -> bool:
    """``p.grad += g`` or ``p.grad.add_(g)`` among ``nodes``: the file needs gradients that
    exist, as zeros (pytorch/examples' RPC parameter server, issue 16). The one test of it: lint's
    TP402 stays silent on such a file and apply's set_to_none edit leaves it as written (issue
    31: apply made the edit, and the script failed with ``None += Tensor``)."""
    for node in nodes:
        if isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Attribute) and node.target.attr == "grad":
                return True
        elif isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in {"add_", "copy_", "mul_", "sub_"}
                and isinstance(func.value, ast.Attribute)
                and func.value.attr == "grad"
            ):
                return True
    return False


def _check_zero_grad_to_zero(ctx: FileContext) -> Iterator[Report]:
    if adds_into_grads(ctx.of_type(ast.AugAssign, ast.Call)):
        return
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
sets gradients to None on torch >= 2.0 and is fine. A file that adds into gradients in place
(`p.grad += g`, `p.grad.add_(g)`) needs them to exist and is not flagged.

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


def _nonzero_number(node: ast.expr | None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
        and node.value != 0
    )


def _check_adam_weight_decay(ctx: FileContext) -> Iterator[Report]:
    for call, name in ctx.calls:
        if name != "torch.optim.Adam":
            continue
        decay = argument(call, "weight_decay", _WEIGHT_DECAY_POSITION)
        if _nonzero_number(decay) or _nonzero_number(option_default(ctx, decay)):
            yield Report(decay)  # type: ignore[arg-type]


ADAM_WITH_WEIGHT_DECAY = Rule(
    code="TP404",
    name="adam-with-weight-decay",
    message="Adam adds weight decay to the gradient (L2), not decoupled; use AdamW",
    technique="adamw",
    doc="""\
## What it does
Flags `torch.optim.Adam` created with a non-zero `weight_decay`: a literal, or an option of
the same file, or of the project file its options object comes from, whose `default=` is one
(`weight_decay=args.wd` with `parser.add_argument("--wd", type=float, default=5e-4)`).

Off by default: select it with `--select TP404`. It changes what training computes, not how
fast a step runs: the gain is in steps to a given loss, and only after the decay is retuned.

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
    # Off by default (issue 32): judged on both public corpora (benchmarks/realworld), 45 of its
    # 48 findings were real but a trade-off ("changes the optimisation, needs retuning"), one was
    # true and two false: a run that keeps Adam is not slower per step, so by default it is noise.
    default=False,
)


# Optimizers with a fused kernel on every device (the catalogue's table): lint does not know the
# device. Adagrad's is CPU-only, and Adagrad is often used for sparse gradients, which the fused
# kernel does not take.
_FUSABLE = {
    f"torch.optim.{name}"
    for name, devices in FUSED_KERNELS.items()
    if {"cpu", "cuda"} <= set(devices)
}


def differentiable(call: ast.Call) -> bool:
    """The optimizer call asks for ``differentiable=`` (anything but a literal ``False``):
    fused kernels are not differentiable, and ``fused=True`` beside it raises."""
    given = keyword(call, "differentiable")
    return given is not None and not is_const(given.value, False)


def _check_fused(ctx: FileContext) -> Iterator[Report]:
    found: list[Report] = []
    for call, name in ctx.calls:
        if name not in _FUSABLE or any(k.arg is None for k in call.keywords):
            continue  # fused= is keyword-only: only **kwargs could hide it
        fused, foreach = keyword(call, "fused"), keyword(call, "foreach")
        if differentiable(call):
            continue  # fused kernels are not differentiable
        if foreach is not None and not isinstance(foreach.value, ast.Constant):
            continue  # the implementation is chosen elsewhere
        if fused is None:
            found.append(Report(call))
        elif is_const(fused.value, False) or is_const(fused.value, None):
            found.append(Report(fused.value))
    if found and uses_cuda(ctx):
        yield from found


OPTIMIZER_WITHOUT_FUSED = Rule(
    code="TP405",
    name="optimizer-without-fused",
    message="Optimizer updates parameters with many small kernels (no `fused=True`)",
    technique="fused-optimizer",
    doc="""\
## What it does
Flags `torch.optim.Adam`, `AdamW` and `SGD` created without `fused=True`, or with
`fused=False`, in a file that uses a CUDA device (`.cuda()`, `.to("cuda")`, `device="cuda"`, a
device such as `"cuda" if torch.cuda.is_available() else "cpu"` that is used, not only printed).
Calls that pass `**kwargs`, choose `foreach=` by an expression, or ask for `differentiable=`
are not flagged. Off by default and informational: select it with `--select TP405`.

## Why is this slow
Without `fused`, a CUDA optimizer runs the multi-tensor `foreach` path: each elementwise step of
the update (moment updates, bias correction, the parameter write) is a separate kernel over all
parameters, reading and writing the optimizer state several times. `fused=True` does the whole
update in one pass over many tensors. Fused kernels pay off on CPU too, where the default is a
for-loop over parameters (the catalogue measured fused AdamW at 5.6x that default on a 2-core
AMX Xeon, torch 2.13), but this rule reports only files that use CUDA.

## Example
```python
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
```

## Use instead
```python
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
```

## Fix safety
No fix: fused kernels need floating-point parameters on a supported device (CPU, CUDA, MPS for
Adam and AdamW), cannot be combined with `foreach=True`, and round differently from the for-loop
version. When forward and backward dominate the step, the saving is small: measure.

## References
"Рекомендации по ускорению тренировок на одной GPU" (FusedAdam from apex; the built-in
`Adam(fused=...)`); PyTorch Performance Tuning Guide, "Fuse pointwise operations" (optimizers are
among its examples); `torch.optim` docs on the for-loop, foreach and fused implementations.
""",
    check=_check_fused,
    default=False,
    level="info",
)

RULES = (ZERO_GRAD_TO_ZERO, ADAM_WITH_WEIGHT_DECAY, OPTIMIZER_WITHOUT_FUSED)
