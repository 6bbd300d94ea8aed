"""Sync-prone tensor calls, counted at the user's line.

Only the tensor methods that read a value back to the host are patched (not every op, as a
TorchFunctionMode would): that costs a Python call on a handful of calls per step. A call counts
only when its immediate caller is the user's code, so torch's own ``.item()`` on CPU scalars is
never pinned on the user's ``optimizer.step()``.

On CUDA the time the host spends blocked in the call is measured (it includes waiting for the
queued GPU work); on CPU nothing blocks, and the call is counted as a host read that would block
on a GPU.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from time import perf_counter
from typing import Any

import torch

from torchpace.doctor.patching import Patches
from torchpace.doctor.recorder import Recorder
from torchpace.doctor.sites import called_from_user

# The tensor methods that copy a value to the host, by the name users know them by.
TENSOR_SYNCS = {
    "item": ".item()",
    "tolist": ".tolist()",
    "cpu": ".cpu()",
    "numpy": ".numpy()",
    "nonzero": ".nonzero()",
    "__bool__": "bool(tensor)",
    "__float__": "float(tensor)",
    "__int__": "int(tensor)",
    "__repr__": "print/repr(tensor)",
    "__format__": "format(tensor)",
}


def _tensor_wrapper(rec: Recorder, original: Callable[..., Any], kind: str) -> Callable[..., Any]:
    is_compiling = torch.compiler.is_compiling
    get_ident = threading.get_ident
    main = rec.main_thread

    @functools.wraps(original)
    def call(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if get_ident() != main or is_compiling():
            return original(self, *args, **kwargs)
        clock = rec.clock
        if not self.is_cuda and (clock.cuda or clock.current == "data"):
            # On a CUDA run a CPU tensor's value is already on the host: no sync; nor in a
            # dataset's or collate_fn's code while a DataLoader fetches, whose tensors stay on
            # the host on any device. Decided before the site lookup: a dataset reads per sample.
            return original(self, *args, **kwargs)
        site = called_from_user()
        if site is None:
            return original(self, *args, **kwargs)
        if not self.is_cuda:
            rec.synced(site, kind, None)  # on a CPU run: the read that would block on a GPU
            return original(self, *args, **kwargs)
        # note: this is the host-device sync being measured
        rec.clock.enter("sync")
        t0 = perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            rec.synced(site, kind, perf_counter() - t0)
            rec.clock.exit()

    return call


def _sync_wrapper(rec: Recorder, original: Callable[..., Any], kind: str) -> Callable[..., Any]:
    """An explicit synchronize call: always a sync, timed."""
    main = rec.main_thread

    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() != main:
            return original(*args, **kwargs)
        site = called_from_user()
        if site is None:
            return original(*args, **kwargs)
        rec.clock.enter("sync")
        t0 = perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            rec.synced(site, kind, perf_counter() - t0)
            rec.clock.exit()

    return call


def install(rec: Recorder, patches: Patches) -> None:
    for name, kind in TENSOR_SYNCS.items():
        original = getattr(torch.Tensor, name)
        patches.set(torch.Tensor, name, _tensor_wrapper(rec, original, kind))
    if torch.cuda.is_available():
        for owner, name, kind in (
            (torch.cuda, "synchronize", "torch.cuda.synchronize()"),
            (torch.cuda.Stream, "synchronize", "Stream.synchronize()"),
            (torch.cuda.Event, "synchronize", "Event.synchronize()"),
        ):
            patches.set(owner, name, _sync_wrapper(rec, getattr(owner, name), kind))
