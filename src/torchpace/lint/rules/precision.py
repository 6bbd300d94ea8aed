"""TP3xx: precision. TorchScript (TP305) is in ``compilation``, cuDNN (TP303) in ``convs``."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from torchpace.findings import Edit, Fix
from torchpace.lint.device import moves_to_a_device, uses_cuda
from torchpace.lint.engine import PRECISION, is_notebook
from torchpace.lint.lightning import LIGHTNING_TRAINERS, lightning_gpu
from torchpace.lint.loops import (
    Scope,
    Step,
    assignments,
    binding_before,
    dotted,
    is_optimizer_class,
    method_calls,
    scope_stores,
    strip_moves,
    walk,
)
from torchpace.lint.rule import (
    FileContext,
    Report,
    Rule,
    argument,
    has_star_args,
    in_fallback,
    insert_before,
    is_const,
    keyword,
    parameter_names,
    passed_for,
    per_file,
    replace,
    start_of,
)
from torchpace.lint.rules.evaluation import called_models
from torchpace.lint.scale import (
    GRAPH_MODELS_DOC,
    SMALL_GRAPH_DOC,
    SMALL_MODELS_DOC,
    SMALL_STEPS_DOC,
    TINY_WEIGHTS,
    model_weights,
    step_runs,
    trains_on_small_graph,
)
from torchpace.lint.tree import subtree

_DEPRECATED_AMP = {"torch.cuda.amp.autocast": "autocast", "torch.cuda.amp.GradScaler": "GradScaler"}
# The torch release that added each `torch.amp` form (release notes: torch.amp.autocast with a
# device type in 1.10, torch.amp.GradScaler in 2.3).
_AMP_SINCE = {"autocast": "1.10", "GradScaler": "2.3"}


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
        needs_torch=_AMP_SINCE[attr],
    )


def _check_deprecated_amp(ctx: FileContext) -> Iterator[Report]:
    for call, name in ctx.calls:
        attr = _DEPRECATED_AMP.get(name or "")
        if attr is not None and not in_fallback(ctx, call):
            # in a try/except or version guard it is the fallback for an older torch
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
Off by default, as it costs no speed: select it with `--select TP301`.

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
Safe: the `torch.amp` forms with `"cuda"` behave the same. `torch.amp.GradScaler` needs torch
2.3 and `torch.amp.autocast("cuda")` 1.10: in a project that declares an older torch
(pyproject, requirements, setup.py, a Dockerfile's base image) the fix is unsafe and says why.
The fix applies only when the call is written as `torch.cuda.amp.X(...)` (any alias of
torch) and, for `autocast`, passes keywords only, because the positional parameters differ.
Names imported with `from torch.cuda.amp import ...` are reported without a fix.

## References
PyTorch Automatic Mixed Precision docs (`torch.amp`); PyTorch Performance Tuning Guide, "Use
mixed precision and AMP".
""",
    check=_check_deprecated_amp,
    # Off by default (issue 32): a deprecation costs no speed today, and on corpus 2's change
    # half its 20 findings were judged 0 true, 8 false, 12 debatable. `--select TP301` (or
    # `extend-select`) runs it, with its fix.
    default=False,
)

# Assignments that keep float32 matmuls or convolutions off TF32 Tensor Cores, by the value that
# does it. `allow_tf32` is the older switch; `fp32_precision` (as in torch 2.13) the newer one,
# where "ieee" means full float32 and "tf32" allows TF32 ("none" inherits the parent setting).
_TF32_OFF: dict[str, object] = {
    "torch.backends.cuda.matmul.allow_tf32": False,
    "torch.backends.cudnn.allow_tf32": False,
    "torch.backends.fp32_precision": "ieee",  # every backend
    "torch.backends.cuda.matmul.fp32_precision": "ieee",
    "torch.backends.cudnn.fp32_precision": "ieee",  # convolutions and RNNs
    "torch.backends.cudnn.conv.fp32_precision": "ieee",
    "torch.backends.cudnn.rnn.fp32_precision": "ieee",
}


def _on_purpose(ctx: FileContext, node: ast.AST) -> bool:
    """Set under a condition, within its function (a branch for GPUs without TF32, ``if
    precision == "highest":``): the default run keeps TF32 (issue 32: the change set's two
    TP304 findings were such, and no judged finding was a default)."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (ast.If, ast.IfExp, ast.Match)):
            return True
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
    return False


_TF32_TEXT = re.compile(rb"tf32|fp32_precision|float32_matmul_precision")


def _trains_nothing(ctx: FileContext) -> bool:
    """No training loop and no optimizer built: a metric, inference or export script, which
    keeps float32 exact on purpose (StyleGAN2-ADA's ``calc_metrics.py``, issue 32)."""
    if any(is_optimizer_class(name) for _, name in ctx.calls):
        return False
    return not ctx.loops.training_loops()


def _check_tf32_disabled(ctx: FileContext) -> Iterator[Report]:
    if not _TF32_TEXT.search(ctx.source):
        return  # most files: no setting to read
    if _trains_nothing(ctx):
        return
    for node in ctx.of_type(ast.Assign):
        for target in node.targets:
            setting = ctx.names.qualname(target) or ""
            off = setting in _TF32_OFF and is_const(node.value, _TF32_OFF[setting])
            if off and not _on_purpose(ctx, node):
                yield Report(node)
    for call, name in ctx.calls:
        highest = is_const(argument(call, "precision", 0), "highest")
        if name == "torch.set_float32_matmul_precision" and highest and not _on_purpose(ctx, call):
            yield Report(call)


TF32_DISABLED = Rule(
    code="TP304",
    name="tf32-disabled",
    message="TF32 is turned off: float32 matmuls or convolutions cannot use Tensor Cores",
    technique="tf32",
    doc="""\
## What it does
Flags code that keeps float32 matrix products or convolutions in full float32 precision on CUDA:
`torch.backends.cuda.matmul.allow_tf32 = False`, `torch.backends.cudnn.allow_tf32 = False`,
`torch.set_float32_matmul_precision("highest")`, and the newer `fp32_precision = "ieee"` on
`torch.backends`, `torch.backends.cuda.matmul`, `torch.backends.cudnn` and its `conv` and `rnn`
parts. Values that are not literals are not flagged, nor settings made under a condition (a
branch for GPUs without TF32, an `if precision == "highest":`): the default run keeps TF32
there. Nor in a file that trains nothing (no training loop, no optimizer built): a metric,
inference or export script keeps float32 exact on purpose.

## Why is this slow
On Ampere and newer GPUs, Tensor Cores compute float32 matrix products in TensorFloat-32
(inputs rounded to a 10-bit mantissa, accumulation in float32) several times faster than the
float32 units. These settings forbid that, so every float32 matmul or convolution runs on the
slower path. PyTorch allows TF32 for cuDNN convolutions by default but not for matmuls, so the
cuDNN settings switch a default speed-up off, and the matmul ones spell out a default that
`torch.set_float32_matmul_precision("high")` would lift.

## Example
```python
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
```

## Use instead
```python
torch.set_float32_matmul_precision("high")  # float32 matmuls may use TF32
```
and leave `torch.backends.cudnn.allow_tf32` at its default (`True`). Mixed precision
(`torch.autocast`) reaches the Tensor Cores without TF32.

## Fix safety
No fix: TF32 keeps about three significant decimal digits of each input instead of about seven.
That is harmless for most training but not for numerically sensitive work, and an explicit
setting like these is often there on purpose (bit-exact comparisons with float32). Keep such a
line with `# noqa: TP304`.

## References
PyTorch CUDA semantics notes, "TensorFloat-32 (TF32) on Ampere (and later) devices";
`torch.set_float32_matmul_precision` docs. The guides predate TF32; the PyTorch Performance
Tuning Guide's "Use mixed precision and AMP" is about reaching the same Tensor Cores.
""",
    check=_check_tf32_disabled,
)

# The literal sizes each layer is checked for: (parameter, position).
_SIZES: dict[str, tuple[tuple[str, int], ...]] = {
    "torch.nn.Linear": (("in_features", 0), ("out_features", 1)),
    "torch.nn.Embedding": (("num_embeddings", 0), ("embedding_dim", 1)),
}
for _kind in ("Conv", "ConvTranspose"):
    for _dim in ("1d", "2d", "3d"):
        _SIZES[f"torch.nn.{_kind}{_dim}"] = (("in_channels", 0), ("out_channels", 1))
# Conv*d(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, ...) and
# ConvTranspose*d(in_channels, out_channels, kernel_size, stride, padding, output_padding, groups)
_GROUPS_POSITION = 6
# Sizes under 64 are left alone: rounding n up to a multiple of 8 adds up to 7/n of the layer's
# work (60% for 10 classes), such a layer is too small for its matmul to set the step time, and
# these sizes are mostly fixed by the data (1 or 3 image channels, a class count, one output).
_MIN_SIZE = 64


def _misaligned(call: ast.Call, name: str, position: int) -> ast.expr | None:
    """The literal size passed for ``name`` when it is at least 64 and not a multiple of 8."""
    if keyword(call, name) is None and any(
        isinstance(a, ast.Starred) for a in call.args[: position + 1]
    ):
        return None  # *args shifts the positions: cannot tell
    value = argument(call, name, position)
    if not isinstance(value, ast.Constant) or isinstance(value.value, bool):
        return None
    size = value.value
    if isinstance(size, int) and size >= _MIN_SIZE and size % 8:
        return value
    return None


def _check_sizes(ctx: FileContext) -> Iterator[Report]:
    for call, name in ctx.calls:
        params = _SIZES.get(name or "")
        if params is None:
            continue
        if "Conv" in (name or ""):
            groups = argument(call, "groups", _GROUPS_POSITION)
            if (groups is None and has_star_args(call)) or (
                groups is not None and not is_const(groups, 1)
            ):
                continue  # grouped: the size per group is what counts; or cannot tell
        for param, position in params:
            size = _misaligned(call, param, position)
            if size is not None:
                yield Report(size)


SIZE_NOT_MULTIPLE_OF_8 = Rule(
    code="TP306",
    name="size-not-multiple-of-8",
    message="Layer size is not a multiple of 8: Tensor Core kernels waste part of each tile or "
    "are not used",
    technique="sizes-multiple-of-8",
    doc="""\
## What it does
Flags literal sizes of 64 or more that are not multiples of 8 in `nn.Linear(in_features,
out_features)`, `nn.Embedding(num_embeddings, embedding_dim)` and the channel counts of
`nn.Conv1d/2d/3d` and `nn.ConvTranspose1d/2d/3d`. Sizes given by a name or an expression are not
flagged, nor are grouped convolutions (`groups=` other than 1), where the size per group is
what counts. Off by default: select it with `--select TP306`.

Sizes under 64 are not flagged: rounding `n` up to a multiple of 8 adds up to `7/n` of the
layer's work (60% for 10 classes), a layer that small is rarely what limits the step, and such
sizes are usually fixed by the data: 1 or 3 image channels, a class count, a single regression
output. The embedding's vocabulary size is flagged because the tuning guide names it: the same
number usually sizes the output layer, often with tied weights.

## Why is this slow
Tensor Cores work on fixed-size tiles, and cuBLAS and cuDNN use them best for 16-bit data when
the matrix dimensions are multiples of 8 (larger multiples such as 64 often do better still).
Other sizes leave part of each tile idle or fall back to kernels without Tensor Cores.

## Example
```python
tok_emb = nn.Embedding(50257, 768)
lm_head = nn.Linear(768, 50257, bias=False)
```

## Use instead
```python
vocab_size = 50304  # 50257 rounded up to a multiple of 64; the extra ids never occur
tok_emb = nn.Embedding(vocab_size, 768)
lm_head = nn.Linear(768, vocab_size, bias=False)
```

## Fix safety
No fix: a different size is a different model. Padded output logits must be masked or never
be targets, and checkpoints change shape.

## References
PyTorch Performance Tuning Guide, "Use mixed precision and AMP" ("set sizes to multiples of 8
(to map onto dimensions of Tensor Cores)"; "if layer size is derived from other parameters
rather than fixed, it can still be explicitly padded e.g. vocabulary size in NLP models");
NVIDIA Deep Learning Performance documentation, per layer type.
""",
    check=_check_sizes,
    default=False,
)


# TP302 ------------------------------------------------------------------------------------------

_AUTOCASTS = frozenset(
    {"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast"}
)
# The file runs in reduced precision some other way, or through a framework that may: cannot tell.
_OTHER_PRECISION_ATTRS = frozenset({"half", "bfloat16", "float16"})
# NVIDIA's apex: ``amp.initialize(model, optimizer, opt_level="O2")`` casts the model itself.
_FRAMEWORKS = ("accelerate", "lightning", "pytorch_lightning", "deepspeed", "apex")
# Transformers manages precision through its trainers (``TrainingArguments(bf16=True)``, also
# ``Seq2SeqTrainer``, TRL's ``SFTTrainer``); a loop of the file's own over a model loaded with
# ``from_pretrained`` runs in the dtype it was loaded in: float32 unless a keyword below says
# otherwise (issue 32: PEFT's examples' float32 fine-tuning loops went unreported).
_TRAINER_SUFFIXES = ("Trainer", "TrainingArguments")
_LOADED_REDUCED = frozenset({"load_in_8bit", "load_in_4bit", "quantization_config"})
_LOADED_DTYPE = frozenset({"torch_dtype", "dtype"})
_FLOAT32 = frozenset({"torch.float32", "torch.float"})
_REDUCED = frozenset({"torch.bfloat16", "torch.float16", "torch.half"})


_AUTOCAST_TEXT = re.compile(rb"autocast", re.I)


def _manages_precision(ctx: FileContext) -> bool:
    if _manages_outside_trainers(ctx):
        return True
    imported = ctx.names.bindings.values()
    return any(path.split(".")[0] == "transformers" for path in imported) and _trains_reduced(ctx)


def _manages_outside_trainers(ctx: FileContext) -> bool:
    """The file runs in reduced precision, or may, by a means other than a Transformers
    trainer's arguments: an autocast, a cast of the model, a default dtype, a framework."""
    imported = ctx.names.bindings.values()
    return _casts_itself(ctx) or any(path.split(".")[0] in _FRAMEWORKS for path in imported)


def _casts_itself(ctx: FileContext) -> bool:
    """The file's own code asks for reduced precision: an autocast (or a helper named for one),
    a cast of the model, a default dtype, a model built in a 16-bit or configured dtype, a call
    of the project's own 16-bit machinery (:func:`_named_for_reduced_precision`)."""
    named = _AUTOCAST_TEXT.search(ctx.source) is not None
    for node in ctx.nodes:
        if isinstance(node, ast.Attribute) and node.attr in _OTHER_PRECISION_ATTRS:
            return True
        if isinstance(node, ast.Call) and (ctx.names.qualname(node.func) or "").endswith(
            "set_default_dtype"
        ):
            return True  # torch's, or a framework's (torchtune.training.set_default_dtype)
        if _sets_reduced_tensor_type(ctx, node):
            return True
        if named and isinstance(node, ast.Call) and "autocast" in (dotted(node.func) or "").lower():
            return True  # a project's helper that picks the context (open_clip's get_autocast)
    if any(_builds_model_in_dtype(ctx, call) for call, _ in ctx.calls):
        return True
    if any(_named_for_reduced_precision(call.func) for call, _ in ctx.calls):
        return True
    return any(
        ctx.names.qualname(n) in _AUTOCASTS
        for n in ctx.nodes
        if isinstance(n, (ast.Name, ast.Attribute))
    )


# The words of a name that say it sets 16-bit precision up: ``convert_to_fp16``, ``to_bf16``;
# also ``MixedPrecisionTrainer``. Not "amp": an audio file's ``amp_to_db`` is an amplitude.
_REDUCED_WORDS = frozenset({"fp16", "f16", "bf16"})
# A name that starts so asks a question: ``is_bf16_supported``, ``has_fp16_weights``.
_QUESTIONS = frozenset({"is", "has", "can", "supports", "check"})


def _named_for_reduced_precision(func: ast.expr) -> bool:
    """A call of the project's own 16-bit machinery, by its name: OpenAI's diffusion trainers'
    ``self.model.convert_to_fp16()`` and ``MixedPrecisionTrainer(use_fp16=...)`` (a half copy
    of the model with float32 master weights and loss scaling), which a flag turns on."""
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if not isinstance(name, str):
        return False
    found = [w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)]
    if not found or found[0] in _QUESTIONS:
        return False  # ``torch.cuda.is_bf16_supported()`` asks, and sets nothing up
    words = set(found)
    return bool(words & _REDUCED_WORDS) or {"mixed", "precision"} <= words


def _sets_reduced_tensor_type(ctx: FileContext, node: ast.AST) -> bool:
    """``torch.set_default_tensor_type(torch.cuda.BFloat16Tensor)`` (also ``HalfTensor``, either
    under a condition, or named by its string): what the model builds after it is 16-bit already
    (Meta's and nano-llama31's Llama builders)."""
    if not (
        isinstance(node, ast.Call)
        and ctx.names.qualname(node.func) == "torch.set_default_tensor_type"
        and node.args
    ):
        return False
    return any(
        (dotted(n) or "").endswith(_HALF_TYPES)
        or (isinstance(n, ast.Constant) and str(n.value).endswith(_HALF_TYPES))
        for n in subtree(node.args[0])
    )


_HALF_TYPES = ("HalfTensor", "BFloat16Tensor")


def _builds_model_in_dtype(ctx: FileContext, call: ast.Call) -> bool:
    """A call that builds a model (its name says so: ``build_model``, ``init_model``,
    ``GPT(...)``) given the dtype of its parameters, other than float32: a 16-bit dtype, or a
    configuration's (nanotron's ``build_model(..., dtype=config.model.dtype)``, bfloat16 by
    default). The author chose the precision the model computes in."""
    name = (dotted(call.func) or "").rsplit(".", 1)[-1].lower()
    if "model" not in name:
        return False
    for node in call.keywords:
        if node.arg not in _LOADED_DTYPE:
            continue
        value = node.value
        if ctx.names.qualname(value) in _REDUCED:
            return True
        field = (dotted(value) or "").rsplit(".", 1)[-1]
        if "dtype" in field and ctx.names.qualname(value) not in _FLOAT32:
            return True  # ``config.model.dtype``, ``args.dtype``: the configuration's choice
    return False


def _function_name(ctx: FileContext, node: ast.AST) -> str | None:
    """The name of the module-level function ``node`` is in."""
    outer = None
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            outer = ancestor
    return outer.name if outer is not None and outer in ctx.tree.body else None


def _trains_reduced(ctx: FileContext) -> bool:
    """A file that uses Transformers trains in reduced precision, or may: it hands training to
    a trainer, or loads a model quantized or in a dtype other than float32 (``"auto"`` and a
    dtype from an option included)."""
    for path in ctx.names.bindings.values():
        if path.startswith(("transformers.", "trl.")) and path.endswith(_TRAINER_SUFFIXES):
            if not _float32_arguments(ctx):
                return True
            break
    return _loads_reduced(ctx)


# What asks a Transformers trainer for 16-bit training.
_TRAINER_PRECISION = frozenset({"fp16", "bf16", "half_precision_backend", "fp16_full_eval"})


def _transformers_calls(ctx: FileContext, suffix: str) -> list[ast.Call]:
    """The calls of the file to a Transformers or TRL name ending in ``suffix``:
    ``TrainingArguments`` (also ``Seq2SeqTrainingArguments``), ``Trainer`` (``SFTTrainer``)."""
    return [
        call
        for call, name in ctx.calls
        if (name or "").startswith(("transformers.", "trl.")) and (name or "").endswith(suffix)
    ]


def _float32_arguments(ctx: FileContext) -> bool:
    """Every ``TrainingArguments`` the file builds (there is one at least) leaves ``fp16`` and
    ``bf16`` at their default, False: its trainers train in float32, and so does a loop of the
    file's own beside them (a textbook's chapter that fine-tunes DistilBERT by hand, then with
    the Trainer). Arguments read from the command line (``HfArgumentParser``), ``**kwargs``
    or positional ones beyond the output directory may ask for 16 bits: not this."""
    built = _transformers_calls(ctx, "TrainingArguments")
    if not built or any(
        (name or "").startswith("transformers.") and (name or "").endswith("HfArgumentParser")
        for _, name in ctx.calls
    ):
        return False
    return all(
        len(call.args) <= 1
        and not has_star_args(call)
        and all(
            k.arg is not None and (k.arg not in _TRAINER_PRECISION or is_const(k.value, False))
            for k in call.keywords
        )
        for call in built
    )


# FSDP's mixed precision (``fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=
# torch.bfloat16))``, FSDP1's ``MixedPrecision``): the sharded model computes in that dtype.
_FSDP_PRECISION = frozenset({"MixedPrecisionPolicy", "MixedPrecision"})


def _fsdp_precision(nodes: Iterable[ast.AST]) -> bool:
    return any(
        isinstance(n, ast.Call) and (dotted(n.func) or "").rsplit(".", 1)[-1] in _FSDP_PRECISION
        for n in nodes
    )


def _shards_in_mixed_precision(ctx: FileContext) -> bool:
    """The file, or a function of another project file it calls, builds an FSDP
    mixed-precision policy (Meta Lingua's ``parallelize_model`` in ``lingua/distributed.py``)."""
    from torchpace.lint.project import defined_in, find_module

    if _fsdp_precision(ctx.nodes):
        return True
    called = {c.func.id for c, _ in ctx.calls if isinstance(c.func, ast.Name)}
    for node in ctx.of_type(ast.ImportFrom):
        names = {a.asname or a.name: a.name for a in node.names if (a.asname or a.name) in called}
        if not names or not ctx.path:
            continue
        path = find_module(node.module or "", Path(ctx.path), node.level)
        try:
            if path is None or b"MixedPrecision" not in path.read_bytes():
                continue  # most imported modules: no parse needed
        except OSError:
            continue
        for name in names.values():
            found = defined_in(path, name)
            if found is not None and _fsdp_precision(subtree(found[1])):
                return True
    return False


# What runs a Transformers trainer on the CPU (``TrainingArguments(no_cuda=True)``, later
# ``use_cpu=True``).
_TRAINER_ON_CPU = frozenset({"no_cuda", "use_cpu"})


def _float32_trainer_run(ctx: FileContext) -> ast.AST | None:
    """Where a file hands training to a Transformers (or TRL) trainer in float32
    (:func:`_float32_arguments`): the ``TrainingArguments(...)`` a trainer that is trained
    (``trainer.train()``) is given, else that trainer. The trainer puts the model on the GPU
    itself and never enables autocast, so its whole run is float32 (a textbook's DistilBERT
    fine-tuned with the ``Trainer``). None where the arguments put it on the CPU, or where the
    model is loaded quantized or in a 16-bit dtype, or the file casts it some other way."""
    if not _float32_arguments(ctx) or _loads_reduced(ctx) or _manages_outside_trainers(ctx):
        return None
    built = _transformers_calls(ctx, "TrainingArguments")
    if any(
        k.arg in _TRAINER_ON_CPU and not is_const(k.value, False) for c in built for k in c.keywords
    ):
        return None
    trainers = _transformers_calls(ctx, "Trainer")
    trained = sorted(
        (trainer for trainer in trainers if method_calls(ctx, trainer, "train")),
        key=lambda c: c.lineno,
    )
    if not trained:
        return None
    given = argument(trained[0], "args", 1)
    value = binding_before(ctx, given, trained[0]) if isinstance(given, ast.Name) else given
    return value if any(value is call for call in built) else trained[0]


def _loads_reduced(ctx: FileContext) -> bool:
    """A model loaded quantized or in a dtype other than float32 (``from_pretrained``; the
    dtype keyword of any other call, ``torch.tensor(ids, dtype=torch.long)``, says nothing)."""
    for call, _ in ctx.calls:
        loads = isinstance(call.func, ast.Attribute) and call.func.attr == "from_pretrained"
        for node in call.keywords:
            if node.arg in _LOADED_REDUCED and not is_const(node.value, False):
                return True
            if (
                loads
                and node.arg in _LOADED_DTYPE
                and not (
                    ctx.names.qualname(node.value) in _FLOAT32 or is_const(node.value, "float32")
                )
            ):
                return True
    return False


# Lightning's names for its default, 32-bit training (ControlNet's ``precision=32``).
_LIGHTNING_32 = frozenset({32, "32", "32-true"})


def _float32_lightning_run(ctx: FileContext) -> ast.Call | None:
    """The first Lightning ``Trainer(...)`` the file builds for the GPU (``accelerator="gpu"``,
    ``gpus=1``) with no ``precision``, or 32-bit named: Lightning's default, so every op of the
    fit it runs (``trainer.fit(model)``) is float32. None where the keywords come from elsewhere
    (``**vars(args)``, ``from_argparse_args``) or the model the fit trains is small
    (:mod:`torchpace.lint.scale`)."""
    trainers = sorted(
        (call for call, name in ctx.calls if name in LIGHTNING_TRAINERS), key=lambda c: c.lineno
    )
    if not trainers or _casts_itself(ctx) or _shards_in_mixed_precision(ctx):
        return None  # a hook of the module may cast it (``configure_model`` sharding it in bf16)
    for call in trainers:
        if call.args or has_star_args(call):
            continue
        given = {k.arg: k.value for k in call.keywords}
        precision = given.get("precision")
        if not lightning_gpu(given, ctx) or not (
            precision is None
            or (isinstance(precision, ast.Constant) and precision.value in _LIGHTNING_32)
        ):
            continue
        fitted = _fitted_models(ctx, call)
        if fitted and not any(_small_model(ctx, model) for model in fitted):
            return call
    return None


def _fitted_models(ctx: FileContext, trainer: ast.Call) -> list[ast.expr]:
    """What ``.fit(...)`` on this trainer trains: its first argument or ``model=`` (a second
    trainer built under the same name only to test is not this one)."""
    fits = (argument(call, "model", 0) for call in method_calls(ctx, trainer, "fit"))
    return [model for model in fits if model is not None]


def _small_model(ctx: FileContext, model: ast.expr) -> bool:
    target = dotted(model)
    if target is None:
        return False
    weights = model_weights(ctx, target, ctx.enclosing_scope(model), graphs=True)
    return weights is not None and weights <= TINY_WEIGHTS


def _check_float32(ctx: FileContext) -> Iterator[Report]:
    yield from _check_cuda_loop_without_autocast(ctx)
    for run in (_float32_trainer_run(ctx), _float32_lightning_run(ctx)):
        if run is not None:
            yield Report(run)


def _check_cuda_loop_without_autocast(ctx: FileContext) -> Iterator[Report]:
    training = ctx.loops.training_loops()
    if (
        not training
        or _manages_precision(ctx)
        or not uses_cuda(ctx)
        or _shards_in_mixed_precision(ctx)
    ):
        return
    if ctx.env_bound:
        # Reinforcement learning: the network is small and the step time is the
        # environment's (lint.environment); autocast would not make such a run faster.
        return
    if trains_on_small_graph(ctx):
        return  # a graph of a few thousand nodes: no matrix product big enough to pay
    # Functions another project file runs in reduced precision (lint.project): under its
    # autocast, or with a model it wrapped in a mixed-precision policy.
    handed = {e.removeprefix(PRECISION) for e in ctx.entries if e.startswith(PRECISION)}
    if handed:
        training = [loop for loop in training if _function_name(ctx, loop) not in handed]
    # A model small enough that its step is kernel launches, or a narrow graph net (lint.scale):
    # casts only add some.
    # A model of embeddings alone: autocast has no matmul or convolution to cast.
    training = [
        loop
        for loop in training
        if id(loop) not in ctx.little_tensor_work
        and not _embeddings_only(ctx, loop)
        and id(loop) not in ctx.small_steps
    ]
    if not training:
        return
    # One finding per file, on the first training loop the file puts on a device: the fix is
    # one change. A notebook that trains on the CPU first and on CUDA later (issue 32: four
    # false findings on a tutorial's CPU cells) is told by its later loop; a file that shows no
    # device for any loop keeps its first.
    placed = [loop for loop in training if on_a_device(ctx, loop)]
    if not placed and is_notebook(ctx.path):
        # A notebook's cells are separate runs: CUDA in a demo cell (``t.rand(10).cuda(0)``)
        # says nothing of a loop that trains host tensors (a textbook's linear regression).
        return
    yield Report(min(placed or training, key=lambda loop: loop.lineno))


# Models that are embedding tables and nothing else: their loss is lookups, dot products and
# sums, none of which autocast runs in lower precision (torch.amp's op lists). PyG's random-walk
# embeddings (their ``loss()`` is a sigmoid of row-wise dot products), and torch.nn's tables.
_EMBEDDING_MODELS = frozenset(
    {
        *("torch.nn.Embedding", "torch.nn.EmbeddingBag"),
        *("torch_geometric.nn.Node2Vec", "torch_geometric.nn.models.Node2Vec"),
        *("torch_geometric.nn.MetaPath2Vec", "torch_geometric.nn.models.MetaPath2Vec"),
    }
)


# What a training loop reads besides its models: torch's other objects (optimizers, devices,
# loaders, scalers), and the loggers and progress bars of the usual libraries.
_NOT_MODELS = ("torch.", "tensorboardX.", "wandb.", "logging.", "tqdm.", "numpy.", "argparse.")


def _embeddings_only(ctx: FileContext, loop: Step) -> bool:
    """Every model the loop uses is embedding tables alone (``model = Node2Vec(...)``, then
    ``model.loss(pos_rw, neg_rw)`` each step; ogb's TransE in a model file of the project):
    every name the loop reads, or a function of this file it calls reads (a course's
    ``calc_sent_loss(sent)``, which runs the model), that the file binds to something built is
    such a model, an optimizer or scheduler, a loss, or a class of the project that is not a
    module (a logger); and any model :func:`called_models` finds by its name is one of them."""
    facts = ctx.loops
    read = {
        (dotted(node) or "").split(".")[0]
        for node in walk(loop.body)
        if isinstance(node, (ast.Name, ast.Attribute))
    }
    for nodes, scope, _ in step_runs(ctx, loop)[1:]:
        # a callee's own names (a loss's ``res``, its parameters) are not the file's models
        params = parameter_names(scope)
        stores = scope_stores(ctx, scope) if scope is not None else ()
        read |= {
            name
            for node in nodes
            if isinstance(node, (ast.Name, ast.Attribute))
            and (name := (dotted(node) or "").split(".")[0]) not in params
            and name not in stores
        }
    embedding = set()
    for name in read:
        owner = facts.instances.get(name)
        if owner is None:
            continue
        if (
            owner in _EMBEDDING_MODELS
            or _builds_matmul_free(ctx, name)
            or _sequence_of_embeddings(ctx, name)
        ):
            embedding.add(name)
        elif owner.startswith(_NOT_MODELS) and not owner.startswith("torch.nn."):
            continue  # an optimizer, a device, a loader, a writer
        elif "Loss" in owner or _not_a_module(ctx, name):
            continue
        else:
            return False  # a layer, a model class, or something lint cannot read
    if not embedding:
        return False
    # what called_models takes for a model by its name, unless it is a function of this file
    # (``save_model(kge_model, ...)``) or a loss module (word2vec's
    # ``SigmoidBinaryCrossEntropyLoss()``, called on the predictions)
    models = {
        t
        for t in called_models(ctx, loop)
        if t not in facts.functions and "Loss" not in (facts.instances.get(t) or "")
    }
    return all(t.split(".")[0] in embedding for t in models)


def _sequence_of_embeddings(ctx: FileContext, name: str) -> bool:
    """``name`` is bound, everywhere the file binds it, to an ``nn.Sequential`` of embedding
    tables alone (word2vec's ``nn.Sequential(nn.Embedding(...), nn.Embedding(...))``, used as
    ``net[0]`` and ``net[1]``)."""
    calls = _built(ctx, name)
    return bool(calls) and all(
        ctx.names.qualname(call.func) == "torch.nn.Sequential"
        and bool(call.args)
        and all(
            isinstance(a, ast.Call) and ctx.names.qualname(a.func) in _EMBEDDING_MODELS
            for a in call.args
        )
        for call in calls
    )


def _not_a_module(ctx: FileContext, name: str) -> bool:
    """``name`` is built, everywhere the file binds it, from a class of this or a project file
    that derives from no ``nn.Module`` (ogb's ``Logger``: `lint.project.plain_class`)."""
    from torchpace.lint.project import definition_of, plain_class

    calls = _built(ctx, name)
    for call in calls:
        found = definition_of(ctx, call, ast.ClassDef)
        if found is None or not plain_class(*found):
            return False
    return bool(calls)


def _built(ctx: FileContext, name: str) -> list[ast.Call]:
    """The calls ``name`` is assigned from (``model = Net().to(device)``: ``Net()``)."""
    moved = (strip_moves(v) for t, v in assignments(ctx.of_type(ast.Assign)) if t == name)
    return [value for value in moved if isinstance(value, ast.Call)]


def _builds_matmul_free(ctx: FileContext, name: str) -> bool:
    """``name`` is bound, everywhere the file binds it, to a model class of this or a project
    file with no matrix product or convolution in it (`lint.project.matmul_free`)."""
    from torchpace.lint.project import matmul_free

    owner = ctx.loops.instances.get(name)
    if owner is None or owner.startswith("torch."):
        return False
    calls = _built(ctx, name)
    return bool(calls) and all(matmul_free(ctx, call) for call in calls)


def on_a_device(ctx: FileContext, loop: Step) -> bool:
    """The loop moves something to a device (also in a function of this file it calls: a
    course's ``calc_loss_batch(x, y, model, device)``), or a model it calls or a name it reads
    is moved to one in this file (``model_1.to(device)``, ``model = Net().cuda()``, a style
    transfer's ``target = content.clone().requires_grad_(True).to(device)``). Worked out once
    per loop: TP302, TP101, TP104 and the sync rules all ask."""
    known = _shown_devices(ctx)
    if id(loop) not in known:
        known[id(loop)] = _shows_a_device(ctx, loop)
    return known[id(loop)]


@per_file
def _shown_devices(ctx: FileContext) -> dict[int, bool]:
    """:func:`on_a_device`'s answers for the file's loops, by ``id``."""
    return {}


@per_file
def host_training_loops(ctx: FileContext) -> frozenset[int]:
    """``id`` of each training loop of a notebook that trains on the host (:func:`on_a_device`
    says no): a notebook's cells are separate runs, and a cell that only prints the CUDA device
    puts nothing on it. None where the file is no notebook, or imports a framework that places
    the model and batches itself (Accelerate, Fabric, DeepSpeed): TP101, TP104 and the sync
    rules leave these loops alone, as TP302 does."""
    if not is_notebook(ctx.path) or places_through_a_framework(ctx):
        return frozenset()
    return frozenset(id(loop) for loop in ctx.loops.training_loops() if not on_a_device(ctx, loop))


def _shows_a_device(ctx: FileContext, loop: Step) -> bool:
    runs = step_runs(ctx, loop)  # the body and the functions of this file it calls
    if any(
        isinstance(n, ast.Call) and moves_to_a_device(n, ctx.names)
        for nodes, _, _ in runs
        for n in nodes
    ):
        return True
    # A name another function binds for itself is not the loop's: a helper file's CPU trainer
    # ``train_ch3(net, ...)`` does not train the ``net`` that ``train_ch5`` moves with ``net =
    # net.to(device)``.
    loop_scope = ctx.loops.scope_of[id(loop)]
    models = called_models(ctx, loop)
    # what the loop's function is given, where it is bound; also what the functions around it
    # are given, that it reads as a closure (the original transformer's notebook:
    # ``get_train_val_loop(baseline_transformer, ...)`` returns the loop's ``train_val_loop``)
    handed: set[tuple[str, Scope]] = set()
    scope: Scope = loop_scope
    while isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        handed |= _handed(ctx, scope)
        scope = ctx.enclosing_scope(scope)
    for call, _ in ctx.calls:
        if moves_to_a_device(call, ctx.names):
            owner = dotted(call.func.value)  # type: ignore[attr-defined]  # a method call
            where = ctx.enclosing_scope(call)
            if owner in models and _same_binding(ctx, owner, where, loop_scope):
                return True
            if owner is not None and (owner, _binding_scope(ctx, owner, where)) in handed:
                return True
    read = {
        dotted(n)
        for nodes, _, _ in runs
        for n in nodes
        if isinstance(n, ast.Name | ast.Attribute) and isinstance(n.ctx, ast.Load)
    }
    moved, unmoved = _moved_names(ctx)
    if any((name, _binding_scope(ctx, name, where)) in handed for name, where in moved):
        return True  # ``model = Net().to(device)``, then ``fit(10, model, ...)``
    some = {name for name, where in moved if _same_binding(ctx, name, where, loop_scope)}
    other = {name for name, where in unmoved if _same_binding(ctx, name, where, loop_scope)}
    # a model it calls, moved where it is bound (``model = Net().cuda()``); or a tensor it reads
    # that the file binds to moved values alone (a notebook binds a name again from cell to
    # cell: a demo's ``b = t.rand(10).cuda(0)`` is not the regression's ``b``)
    return bool(models & some) or bool((read & some) - other)


def _binding_scope(ctx: FileContext, name: str, scope: Scope) -> Scope:
    """The scope whose binding of ``name`` ``scope`` reads: ``scope`` itself where it binds it
    (a parameter, an assignment, a loop's target), else the function around it, and so on out
    to the module. An attribute (``self.model``) lives on its object, not in a scope, and a
    name a function declares ``global`` is the module's."""
    if "." in name:
        return ctx.tree
    while not isinstance(scope, ast.Module):
        if name in _declared_global(ctx, scope):
            return ctx.tree
        if name in parameter_names(scope) or name in scope_stores(ctx, scope):
            return scope
        scope = ctx.enclosing_scope(scope)
    return scope


def _declared_global(ctx: FileContext, scope: Scope) -> frozenset[str]:
    """The names ``scope`` declares ``global`` (read once per scope and file)."""
    index: dict[int, frozenset[str]] = ctx.__dict__.setdefault("_tp_globals", {})
    found = index.get(id(scope))
    if found is None:
        found = index[id(scope)] = frozenset(
            name
            for n in walk(scope.body)  # type: ignore[union-attr]
            if isinstance(n, ast.Global)
            for name in n.names
        )
    return found


# Frameworks that put the model and its batches on the device themselves (Accelerate's
# ``prepare``, Fabric's ``setup``, ``deepspeed.initialize``): a notebook that trains through
# one shows no move of its own.
_PLACING_FRAMEWORKS = frozenset({"accelerate", "lightning", "lightning_fabric", "deepspeed"})


def places_through_a_framework(ctx: FileContext) -> bool:
    """The file imports a framework that places the model and batches on the device."""
    return any(path.split(".")[0] in _PLACING_FRAMEWORKS for path in ctx.names.bindings.values())


def _handed(ctx: FileContext, scope: Scope) -> set[tuple[str, Scope]]:
    """What the file's calls of the function ``scope`` pass for its parameters, as (name,
    binding scope) pairs: a notebook's ``fit(10, model, ...)`` hands ``model`` to ``net``."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    out: set[tuple[str, Scope]] = set()
    for parameter in parameter_names(scope):
        for value in passed_for(ctx, scope, parameter) or ():
            name = dotted(value) if value is not None else None
            if name is not None and value is not None:
                out.add((name, _binding_scope(ctx, name, ctx.enclosing_scope(value))))
    return out


def _same_binding(ctx: FileContext, name: str, here: Scope, there: Scope) -> bool:
    """``name`` in ``here`` may hold what it holds in the loop's scope ``there``: the same
    binding, or one of the file's (what a notebook's ``fit(epochs, model, ...)`` is handed),
    not another function's own (``net = net.to(device)`` in a sibling trainer)."""
    bound = _binding_scope(ctx, name, here)
    return bound is _binding_scope(ctx, name, there) or isinstance(bound, ast.Module)


@per_file
def _moved_names(
    ctx: FileContext,
) -> tuple[frozenset[tuple[str, Scope]], frozenset[tuple[str, Scope]]]:
    """The names an assignment of the file binds to a moved value (``model = Net().cuda()``,
    also through a function or class of the file that moves what it is given: a course's
    ``to_device(data, device)``, its ``DeviceDataLoader`` yielding moved batches), and the
    names an assignment binds to anything else; each with the scope it is assigned in."""
    moving = {
        n.name
        for n in ctx.of_type(ast.FunctionDef, ast.ClassDef)
        if any(isinstance(c, ast.Call) and moves_to_a_device(c, ctx.names) for c in subtree(n))
    }
    some: set[tuple[str, Scope]] = set()
    other: set[tuple[str, Scope]] = set()
    for node in ctx.of_type(ast.Assign):
        value = node.value
        placed = isinstance(value, ast.Call) and (
            moves_to_a_device(value, ctx.names) or dotted(value.func) in moving
        )
        for target in node.targets:
            name = dotted(target)
            if name is not None:
                (some if placed else other).add((name, ctx.enclosing_scope(node)))
    return frozenset(some), frozenset(other)


CUDA_LOOP_WITHOUT_AUTOCAST = Rule(
    code="TP302",
    name="cuda-training-without-autocast",
    message="The CUDA training loop runs every op in float32 (no autocast)",
    technique="amp-bf16",
    doc=f"""\
## What it does
Flags the first training loop of a file that trains on CUDA and never uses `torch.autocast`
(nor `.half()` / `.bfloat16()` / float16 dtypes, nor a framework that manages precision:
Accelerate, Lightning, DeepSpeed, NVIDIA's apex, Transformers' trainers (`Trainer`,
`TrainingArguments`, TRL's `SFTTrainer`; but where every `TrainingArguments` the file builds
leaves `fp16` and `bf16` off, its loops are reported: the trainer trains in float32 too); nor a
Transformers model loaded quantized
(`load_in_8bit`, `quantization_config`) or in a dtype other than float32 (`torch_dtype=`,
`"auto"` included): a loop of the file's own over a model `from_pretrained` loads in float32
is reported; nor a call of a helper named
for autocast, such as open_clip's `get_autocast(args.precision)`, or of the project's own 16-bit
machinery, named for it (OpenAI's diffusion trainers' `model.convert_to_fp16()` and
`MixedPrecisionTrainer(use_fp16=...)`: the words fp16, f16 or bf16, or mixed precision, in
its name); nor a call that builds the
model (its name says so) given the dtype of its parameters other than float32, a 16-bit dtype
or a configuration's (`build_model(..., dtype=config.model.dtype)`); nor a 16-bit default tensor
type (`torch.set_default_tensor_type(torch.cuda.BFloat16Tensor)` or `HalfTensor`, as Llama
builders set before building the model); nor FSDP's mixed-precision
policy, `MixedPrecisionPolicy(param_dtype=...)` or `MixedPrecision(...)`, built in the file or
in a project function it calls, such as a `parallelize_model()`; nor in a function another
project file runs in reduced precision: calls inside `with torch.autocast(...)`, or hands a
model wrapped with a mixed-precision policy, `FSDP(model, mixed_precision=policy)`). Not
in a file that steps an environment (reinforcement learning): there the step time is the
environment's and the network that picks actions is small. Nor where every model the loop
runs, itself or through a function of this file it calls, is embedding tables alone
(`nn.Embedding`, PyG's `Node2Vec` and `MetaPath2Vec`, or an
`nn.Module` class of the project that builds only parameters, embeddings and submodules of
such classes, and computes with no matrix product or convolution, as knowledge-graph
embeddings and dot-product recommenders do; a class derived from `nn.Embedding` with no product
of its own is a table; an `nn.Sequential` of tables alone, word2vec's centre and context
embeddings; a loss module the loop calls is not a model): their loss is lookups,
elementwise math and reductions, which autocast does not cast.

In a notebook, whose cells are run one by one, a CUDA cell elsewhere (a demo of `.cuda()`)
says nothing of a loop that shows no device: one that moves nothing, in its body or the
functions of the notebook it calls, runs no model the notebook moves to a device, and reads
no name the notebook binds to moved values alone (a textbook's linear regression on host
tensors) is left alone. In any file, the loop flagged is the first one that shows a device, where
one does; a name another function binds for itself (a parameter, a local) is not the loop's,
so a helper module's CPU trainer `train_ch3(net, ...)` is not taken for the chapter-5 trainer
that moves its own `net`.

A run a framework trains in float32 is flagged too, at what sets it up: the `TrainingArguments(...)`
(else the trainer) of a Transformers or TRL trainer whose `.train()` the file calls, where every
`TrainingArguments` leaves `fp16` and `bf16` off and neither `no_cuda` nor `use_cpu` is set (the
trainer moves the model to the GPU itself), unless the file loads the model quantized or in another
dtype or casts it; and a Lightning `Trainer(...)` built for the GPU (`accelerator="gpu"` or
`"cuda"`, `gpus=N`, also through a module constant, `gpus=NUM_GPUS` with `NUM_GPUS = 2`, or
chosen where a GPU is available: `"gpu" if torch.cuda.is_available() else "cpu"`; not an option a
run may leave off; such a Trainer also makes the file a CUDA run for the other rules) with no
`precision` (Lightning's default is
32-bit) or with `precision=32`,
whose `.fit(model)` trains a model not known to be small. Keywords from elsewhere (`**kwargs`,
`HfArgumentParser`, `from_argparse_args`) are not read: they may ask for 16 bits.

{SMALL_MODELS_DOC} {SMALL_STEPS_DOC} {GRAPH_MODELS_DOC}
{SMALL_GRAPH_DOC}

## Why is this slow
Tensor cores run bfloat16 and float16 matrix multiplies and convolutions many times faster
than float32, and half-width activations halve the memory traffic. Without autocast every op
runs in float32.

## Example
```python
for x, y in loader:
    loss = loss_fn(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
```

## Use instead
```python
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
```
On GPUs without bfloat16 (before Ampere), use `dtype=torch.float16` with a
`torch.amp.GradScaler("cuda")`. A framework's run asks for it in its settings:
`TrainingArguments(..., bf16=True)` (`fp16=True` before Ampere), Lightning's
`Trainer(..., precision="bf16-mixed")` (`"16-mixed"`).

## Fix safety
No fix: reduced precision changes the numerics; check that training still converges (`torchpace
tune` does).

## References
PyTorch Performance Tuning Guide, "Use mixed precision and AMP"; "Techniques to make PyTorch
code run faster on GPUs", mixed precision with `autocast` and `GradScaler`.
""",
    check=_check_float32,
)

RULES = (DEPRECATED_CUDA_AMP, CUDA_LOOP_WITHOUT_AUTOCAST, TF32_DISABLED, SIZE_NOT_MULTIPLE_OF_8)
