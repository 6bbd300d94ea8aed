"""Pre-allocation: one forward and backward at the worst-case batch before training starts.

On CUDA the caching allocator keeps the blocks it has handed out; reserving the largest ones
first lets the variable-length steps that follow split them instead of going back to
``cudaMalloc`` (slow) or fragmenting into an out-of-memory error. On CPU there is no caching
allocator to prime, so the pass only warms up (kernel selection, lazy initialisation).

The pass must not change anything training would see: parameters' ``.grad``, every buffer
(BatchNorm running statistics, ``num_batches_tracked``) and the torch RNG states (CPU, and CUDA
where it is initialised) are put back as they were, and no optimizer is involved.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from torchpace.speedups.applied import Applied, done

TECHNIQUE = "fixed-shapes"
_MIB = 2**20


def preallocate(
    model: nn.Module, *, loss_fn: Callable[[nn.Module, Any], torch.Tensor], max_batch: Any
) -> Applied:
    """Run ``loss_fn(model, max_batch).backward()`` once, then restore grads, buffers and RNG.

    ``loss_fn`` follows the recipe protocol (``recipe.loss``); ``max_batch`` is the largest batch
    training will see (the longest sequences, the full batch size), already on the device.
    Call it before wrapping the model in DDP or registering gradient hooks that act (an
    optimizer-in-backward hook would step): hooks run during this backward like any other.
    An out-of-memory error here is raised as is: training would meet it at the worst case.
    """
    device = _device_of(model)
    grads = {p: p.grad for p in model.parameters()}
    buffers = [
        (module, name, buf, buf.clone())
        for module in model.modules()
        for name, buf in module.named_buffers(recurse=False)
    ]
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()  # never initialise CUDA
    rng_devices = list(range(torch.cuda.device_count())) if cuda else []
    with torch.random.fork_rng(devices=rng_devices, device_type="cuda"):
        try:
            for p in grads:
                # Start from None so backward allocates fresh grads and never writes into ones
                # the caller holds (accumulated grads would otherwise be added to in place).
                p.grad = None
            loss = loss_fn(model, max_batch)
            _check_loss(loss)
            loss.backward()
            del loss
        finally:
            with torch.no_grad():
                for module, name, buf, saved in buffers:
                    buf.copy_(saved)
                    setattr(module, name, buf)  # in case forward replaced the buffer object
            for p, grad in grads.items():
                p.grad = grad
    changes = [
        f"one forward and backward at the worst-case batch on {device}; grads, "
        f"{len(buffers)} buffers and the RNG state restored",
        _peak_memory(device),
    ]
    reason = "" if device.type == "cuda" else _NOT_CUDA.format(device=device.type)
    return done(TECHNIQUE, changes, reason=reason)


_NOT_CUDA = (
    "{device} has no caching allocator to reserve blocks in; the pass only warmed up kernels"
)


def _check_loss(loss: object) -> None:
    if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ValueError(f"loss_fn must return a scalar loss tensor, got {shape}")
    if not loss.requires_grad:
        raise ValueError(
            "loss_fn returned a loss that does not require grad: call preallocate with grad "
            "enabled (outside torch.no_grad / inference_mode) on a model with trainable parameters"
        )


def _device_of(model: nn.Module) -> torch.device:
    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    return torch.device("cpu")


def _peak_memory(device: torch.device) -> str:
    if device.type == "cuda":
        reserved = torch.cuda.max_memory_reserved(device) / _MIB
        allocated = torch.cuda.max_memory_allocated(device) / _MIB
        return (
            f"peak on {device}: {reserved:.1f} MiB reserved, {allocated:.1f} MiB allocated "
            "(since the process started or the peak statistics were last reset)"
        )
    try:
        import resource
    except ImportError:  # Windows has no resource module
        return f"peak memory on {device}: not applicable (no caching allocator to prime)"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # ru_maxrss is in KiB on Linux and in bytes on macOS.
    peak_mib = peak / _MIB if sys.platform == "darwin" else peak / 1024
    return (
        f"peak memory on {device}: not applicable (no caching allocator to prime); the "
        f"process's peak resident set so far is {peak_mib:.1f} MiB (the whole process, "
        "not this pass alone)"
    )
