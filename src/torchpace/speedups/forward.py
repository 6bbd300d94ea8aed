"""Run a model's forward under contexts (autocast, an attention backend) without changing the
user's loop: the root module's forward is wrapped in place, as accelerate does for autocast.

Floating-point outputs leave autocast in float32, so a loss computed outside the model (often
the case in users' loops) is not computed in bf16/fp16.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from torchpace.speedups.applied import Applied, done, skipped
from torchpace.speedups.precision import Precision

_WRAPPED = "_torchpace_forward_contexts"  # names of the contexts already around forward
BACKENDS = ("default", "math", "flash", "efficient")


def _to_float32(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.float() if out.is_floating_point() and out.dtype != torch.float64 else out
    if isinstance(out, tuple) and not hasattr(out, "_fields"):
        return tuple(_to_float32(o) for o in out)
    if isinstance(out, list):
        return [_to_float32(o) for o in out]
    if isinstance(out, dict):
        return {k: _to_float32(v) for k, v in out.items()}
    return out


def _wrap(
    model: nn.Module,
    name: str,
    context: Callable[[], contextlib.AbstractContextManager[object]],
    *,
    float32_out: bool,
) -> bool:
    """Wrap ``model.forward`` in ``context``; False if a context of this name is already there."""
    wrapped: tuple[str, ...] = getattr(model, _WRAPPED, ())
    if name in wrapped:
        return False
    inner = model.forward

    @functools.wraps(inner)
    def forward(*args: Any, **kwargs: Any) -> Any:
        with context():
            out = inner(*args, **kwargs)
        return _to_float32(out) if float32_out else out

    model.forward = forward  # type: ignore[method-assign]
    object.__setattr__(model, _WRAPPED, (*wrapped, name))
    return True


def autocast_forward(model: nn.Module, *, precision: Precision) -> Applied:
    """Run ``model``'s forward under ``precision``'s autocast, returning float32 outputs."""
    technique = "amp-fp16" if precision.dtype is torch.float16 else "amp-bf16"
    if precision.dtype is None:
        return Applied(technique, False, (), "float32: no autocast")
    if not _wrap(model, "autocast", precision.autocast, float32_out=True):
        return done(technique, [], reason="forward already runs under autocast")
    return done(technique, [f"forward under autocast({precision.device_type}, {precision.name})"])


def attention_backend(name: str) -> contextlib.AbstractContextManager[object]:
    """The ``sdpa_kernel`` context selecting one scaled-dot-product-attention backend."""
    if name not in BACKENDS:
        raise ValueError(f"attention backend must be one of {', '.join(BACKENDS)}; got {name!r}")
    if name == "default":
        return contextlib.nullcontext()
    from torchpace.measure.compat import sdpa_kernel

    return sdpa_kernel(name)  # type: ignore[no-any-return]


def use_attention_backend(model: nn.Module, *, backend: str) -> Applied:
    """Run ``model``'s forward with one attention backend.

    On the 2-core AMX Xeon (torch 2.13), ``math`` under bf16 autocast ran the lm workload's
    step 1.25x faster than fp32, where the default (flash) backend ran 0.75x: its bf16 backward
    is about 4.5x slower than fp32 there (benchmarks/README.md). The math backend's memory grows
    with the square of the sequence length, so it suits short windows.
    """
    if backend == "default":
        return Applied("attention-backend", False, (), "the default backend choice")
    if backend == "efficient" and not any(p.device.type == "cuda" for p in model.parameters()):
        return skipped("attention-backend", "the efficient backend runs on CUDA only")
    if not _wrap(model, "attention", lambda: attention_backend(backend), float32_out=False):
        return done("attention-backend", [], reason="forward already has an attention backend")
    return done("attention-backend", [f"forward under sdpa_kernel({backend})"])
