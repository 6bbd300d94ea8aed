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

from torchpace.doctor.recorder import Recorder
from torchpace.doctor.sites import called_from_user
from torchpace.runtime.patching import Patches

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
            if clock.current == "data":
                rec.fetch_reads += 1
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


# A fetch that made more host reads than this has the read methods taken out for the loader's
# later fetches: putting the 10 methods back and forth costs about 20 us a batch (11 us of
# setattr, the rest the type's method cache), each read through the wrapper about 1.2 us more
# than plain. A VAE's MNIST batch of 128 made 384 reads (int(target), .numpy(), and a bool in
# Normalize per sample): +7% on its 11 ms step.
SWAP_READS = 16


class TensorReads:
    """The read methods' wrappers, to take out of ``torch.Tensor`` for an in-process DataLoader
    fetch and put back after it."""

    def __init__(self) -> None:
        self._methods: list[tuple[str, Any, Any]] = []  # name, own value (or None), wrapper
        self.retired = False  # set when the instruments are taken out for good

    def add(self, name: str, wrapper: Any) -> None:
        self._methods.append((name, vars(torch.Tensor).get(name), wrapper))

    def off(self) -> None:
        for name, own, _ in self._methods:
            if own is None:
                delattr(torch.Tensor, name)  # inherited from the C base again
            else:
                setattr(torch.Tensor, name, own)

    def on(self) -> None:
        if self.retired:
            return
        for name, _, wrapper in self._methods:
            setattr(torch.Tensor, name, wrapper)

    def retire(self) -> None:
        self.retired = True


def install(rec: Recorder, patches: Patches) -> None:
    reads = TensorReads()
    for name, kind in TENSOR_SYNCS.items():
        original = getattr(torch.Tensor, name)
        wrapper = _tensor_wrapper(rec, original, kind)
        reads.add(name, wrapper)
        patches.set(torch.Tensor, name, wrapper)
    patches.on_undo(reads.retire)
    rec.tensor_reads = reads
    if torch.cuda.is_available():
        for owner, name, kind in (
            (torch.cuda, "synchronize", "torch.cuda.synchronize()"),
            (torch.cuda.Stream, "synchronize", "Stream.synchronize()"),
            (torch.cuda.Event, "synchronize", "Event.synchronize()"),
        ):
            patches.set(owner, name, _sync_wrapper(rec, getattr(owner, name), kind))
