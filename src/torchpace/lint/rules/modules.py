"""TP406: a module with parameters built inside ``forward()``."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.lint.rule import FileContext, Report, Rule
from torchpace.lint.tree import subtree

# torch.nn modules that own parameters or buffers: built per call, each allocates and randomly
# initialises them, and none of them is ever trained.
_WITH_WEIGHTS = frozenset(
    f"torch.nn.{name}"
    for name in (
        "Linear",
        "Bilinear",
        "LazyLinear",
        "Conv1d",
        "Conv2d",
        "Conv3d",
        "ConvTranspose1d",
        "ConvTranspose2d",
        "ConvTranspose3d",
        "Embedding",
        "EmbeddingBag",
        "LayerNorm",
        "RMSNorm",
        "GroupNorm",
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "InstanceNorm1d",
        "InstanceNorm2d",
        "InstanceNorm3d",
        "LSTM",
        "GRU",
        "RNN",
        "LSTMCell",
        "GRUCell",
        "RNNCell",
        "MultiheadAttention",
        "TransformerEncoderLayer",
        "TransformerDecoderLayer",
        "Transformer",
        "PReLU",
    )
)


def _guarded(call: ast.Call, fn: ast.AST) -> bool:
    """Whether ``call`` is built once and kept: assigned to an attribute (``self.proj = ...``)
    under an ``if`` in ``forward`` (lazy initialisation on the first call)."""
    for branch in subtree(fn):
        if not isinstance(branch, ast.If):
            continue
        for stmt in subtree(branch):
            if (
                isinstance(stmt, ast.Assign)
                and any(isinstance(t, ast.Attribute) for t in stmt.targets)
                and any(n is call for n in subtree(stmt.value))
            ):
                return True
    return False


def _check_module_in_forward(ctx: FileContext) -> Iterator[Report]:
    for cls in ctx.of_type(ast.ClassDef):
        for fn in cls.body:  # type: ignore[attr-defined]
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if fn.name != "forward":
                continue
            for node in subtree(fn):
                if not isinstance(node, ast.Call):
                    continue
                if (ctx.names.qualname(node.func) or "") not in _WITH_WEIGHTS:
                    continue
                if not _guarded(node, fn):
                    yield Report(node)


MODULE_BUILT_IN_FORWARD = Rule(
    code="TP406",
    name="module-built-in-forward",
    message="A module with weights is built inside `forward()`: new random weights every call, "
    "never trained",
    technique="modules-built-once",
    doc="""\
## What it does
Flags a `torch.nn` module that owns parameters or buffers (`nn.Linear`, `nn.Conv2d`,
`nn.LayerNorm`, `nn.Embedding`, `nn.LSTM`, ...) constructed inside a module's `forward()`.
Not reported when the module is kept on an attribute under an `if` (lazy initialisation on
the first call: `if self.proj is None: self.proj = nn.Linear(...)`).

## Why is this slow
Each call allocates the layer's weights, on the host unless a device is passed, and runs its
random initialisation; the step then often copies them to the device. The optimizer never sees
these weights, so the layer does not learn: a per-call module is a bug as well as a cost.

## Example
```python
def forward(self, x):
    return nn.Linear(x.size(-1), self.d)(x)
```

## Use instead
```python
def __init__(self, d_in, d):
    super().__init__()
    self.proj = nn.Linear(d_in, d)

def forward(self, x):
    return self.proj(x)
```

## Fix safety
No fix: the layer's input size may only be known in `forward` (then `nn.LazyLinear` built in
`__init__` is the change), and moving it changes which weights the optimizer trains.

## References
PyTorch docs, "Building Models with PyTorch" (`nn.Module`: submodules are created in
`__init__` and registered).
""",
    check=_check_module_in_forward,
)

RULES = (MODULE_BUILT_IN_FORWARD,)
