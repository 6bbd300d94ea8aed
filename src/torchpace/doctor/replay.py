"""Replaying recorded calls on fresh tensors after the run, and timing them: the shared pieces
of the precision estimate (precision.py) and the recurrent modules' twins (rnn_twin.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# Per call and precision: repeat until 20 ms or 20 calls, after one untimed warm-up call.
REPEAT_S = 0.02
REPEAT_MAX = 20
SLOW_CALL_S = 0.1  # five times REPEAT_S


@dataclass(frozen=True)
class Spec:
    """A tensor argument, rebuilt on replay with the same shape, strides and dtype."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype


def spec_of(value: Any) -> Any:
    """An op's arguments with each tensor as its Spec (lists become tuples: a key)."""
    if isinstance(value, torch.Tensor):
        return Spec(tuple(value.shape), tuple(value.stride()), value.dtype)
    if isinstance(value, (list, tuple)):
        return tuple(spec_of(v) for v in value)
    return value


def leaves(value: Any, kind: type) -> list[Any]:
    """The ``kind`` objects in an op's arguments (nested lists and tuples), in order."""
    if isinstance(value, kind):
        return [value]
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in leaves(v, kind)]
    return []


def build(value: Any, dtype: torch.dtype | None, device: torch.device) -> Any:
    """A fresh tensor for a Spec, with its strides (an expanded gradient has stride 0: it is
    built on a storage of the size the strides reach), floating ones in ``dtype`` if given."""
    if isinstance(value, Spec):
        size = 1 + sum((n - 1) * st for n, st in zip(value.shape, value.stride, strict=True))
        size = size if all(value.shape) else 0
        if value.dtype.is_floating_point:
            storage = torch.randn(size, device=device).to(dtype or value.dtype)
        else:
            storage = torch.zeros(size, dtype=value.dtype, device=device)
        return storage.as_strided(value.shape, value.stride)
    if isinstance(value, tuple):
        return [build(v, dtype, device) for v in value]
    return value


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def per_call(run: Callable[[], Any], device: torch.device) -> float:
    """Seconds per call: one warm-up call, then calls until REPEAT_S or REPEAT_MAX. On CUDA the
    device is synchronised around the repeats, so the time is the kernels', not the launches'.
    A warm-up call of over SLOW_CALL_S is its own measure on a CPU (set-up cannot dominate it):
    a CPU without native bf16 runs a model's convolution in seconds, and one such call is
    enough. Never on CUDA, where a first call can be cuDNN's autotuning (cudnn.benchmark tries
    every algorithm for a new shape) or a kernel's lazy load, not the call."""
    start = time.perf_counter()
    run()
    _sync(device)
    first = time.perf_counter() - start
    if first >= SLOW_CALL_S and device.type != "cuda":
        return first
    n, start = 0, time.perf_counter()
    while n < REPEAT_MAX and time.perf_counter() - start < REPEAT_S:
        run()
        n += 1
    _sync(device)
    return (time.perf_counter() - start) / n
