"""Loading: DataLoader settings per device, a rebuilt loader, and batches delivered on the device.

Catalogue ids: "loader-workers", "pinned-memory", "persistent-workers" (``loader_settings``,
``tuned_loader``) and "async-prefetch" (``DevicePrefetcher``). ``to_device`` moves a batch of
nested tuples, lists and dicts of tensors.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from torchpace.catalog import loader_workers
from torchpace.measure.cores import usable_cores
from torchpace.speedups.applied import SpeedupWarning

__all__ = ["DevicePrefetcher", "LoaderSettings", "loader_settings", "to_device", "tuned_loader"]

_B = TypeVar("_B")
_DEVICES = ("cpu", "cuda")
_SETTINGS_KEYS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")
# What tuned_loader may still change on an existing DataLoader: none of these alters the batches.
_LOADER_OVERRIDES = ("timeout", "worker_init_fn", "multiprocessing_context")


@dataclass(frozen=True)
class LoaderSettings:
    """The DataLoader arguments that decide how batches are produced, not which batches.

    ``dataclasses.asdict(settings)`` gives them as DataLoader keyword arguments.
    """

    num_workers: int = 0
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None  # batches in flight per worker; None with no workers

    def __post_init__(self) -> None:
        # The same combinations DataLoader rejects, rejected here with what to change.
        if self.num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {self.num_workers}")
        if self.num_workers == 0 and self.prefetch_factor is not None:
            raise ValueError(
                f"prefetch_factor={self.prefetch_factor} needs num_workers > 0 (DataLoader "
                "rejects it with num_workers=0); set prefetch_factor=None"
            )
        if self.prefetch_factor is not None and self.prefetch_factor < 1:
            raise ValueError(f"prefetch_factor must be >= 1 or None, got {self.prefetch_factor}")
        if self.persistent_workers and self.num_workers == 0:
            raise ValueError(
                "persistent_workers=True needs num_workers > 0; set persistent_workers=False"
            )


def _device(device: torch.device | str) -> torch.device:
    dev = torch.device(device)
    if dev.type not in _DEVICES:
        raise ValueError(f"device must be one of {_DEVICES}, got {str(dev)!r}")
    return dev


def loader_settings(
    device: torch.device | str, *, cores: int | None = None, workers: int | None = None
) -> LoaderSettings:
    """Starting-point loader settings for training on ``device``; measure, then adjust.

    ``cores`` is the number of cores this process may use (default: ``usable_cores()``; under
    torchrun the processes of one machine share them, so pass this process's share). ``workers``
    overrides the worker count; persistent workers and prefetching follow from it.
    """
    dev = _device(device)
    if cores is not None and cores < 1:
        raise ValueError(f"cores must be >= 1, got {cores}")
    if workers is not None and workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    if workers is None:  # the catalogue's rule: four at most on CUDA, none on CPU
        workers = loader_workers(dev.type, cores or usable_cores())
    return LoaderSettings(
        num_workers=workers,
        # Pinned memory only speeds host-to-GPU copies (catalogue "pinned-memory").
        pin_memory=dev.type == "cuda",
        # Workers outlive the epoch, so each epoch skips their start-up ("persistent-workers").
        persistent_workers=workers > 0,
        # 2: DataLoader's own default. Two batches per worker in flight absorb uneven batch
        # costs; each extra one costs a batch of (pinned) RAM per worker.
        prefetch_factor=2 if workers > 0 else None,
    )


def tuned_loader(
    loader_or_dataset: DataLoader[Any] | Dataset[Any],
    *,
    device: torch.device | str,
    settings: LoaderSettings | None = None,
    **dataloader_kw: Any,
) -> DataLoader[Any]:
    """A new DataLoader with ``settings`` (default: ``loader_settings(device)``) applied.

    Given a DataLoader, the new one yields the same batches in the same order: it reuses the
    old one's dataset, sampler or batch sampler (shared, so use the new loader in place of the
    old), collate_fn, generator, worker_init_fn, timeout and multiprocessing context;
    ``dataloader_kw`` may change only ``timeout``, ``worker_init_fn`` and
    ``multiprocessing_context``. Given a Dataset, ``dataloader_kw`` (batch_size, shuffle, ...)
    go to DataLoader as they are.

    One difference remains: a loader with persistent workers draws its workers' base seed from
    the generator (or the global RNG) once, not every epoch, so when the new loader has them and
    the old one had not, shuffled orders from the second epoch on differ from the old loader's.
    """
    dev = _device(device)
    settings = settings if settings is not None else loader_settings(dev)
    for key in _SETTINGS_KEYS:
        if key in dataloader_kw:
            raise ValueError(
                f"{key} is set by settings=LoaderSettings(...), not as a DataLoader keyword; "
                "pass settings=loader_settings(device, workers=...) or a LoaderSettings"
            )
    if settings.pin_memory and dev.type != "cuda":
        msg = f"pinned-memory: pin_memory=True only speeds copies to a GPU, not to {dev}"
        warnings.warn(msg + "; set pin_memory=False", SpeedupWarning, stacklevel=2)
    if dataloader_kw.get("timeout") and not settings.num_workers:
        # DataLoader accepts it, then fails on the first batch.
        raise ValueError(f"timeout={dataloader_kw['timeout']} needs num_workers > 0 in settings")
    if isinstance(loader_or_dataset, DataLoader):
        kw = _rebuild_kwargs(loader_or_dataset, settings, dataloader_kw)
        return DataLoader(loader_or_dataset.dataset, **kw, **asdict(settings))
    if isinstance(loader_or_dataset, Dataset):
        return DataLoader(loader_or_dataset, **dataloader_kw, **asdict(settings))
    raise TypeError(
        "loader_or_dataset must be a torch DataLoader or Dataset, "
        f"got {type(loader_or_dataset).__name__}"
    )


def _rebuild_kwargs(
    loader: DataLoader[Any], settings: LoaderSettings, overrides: dict[str, Any]
) -> dict[str, Any]:
    for key in overrides:
        if key not in _LOADER_OVERRIDES:
            raise ValueError(
                f"tuned_loader keeps the batches and order of an existing DataLoader, so {key} "
                f"cannot be changed here (only {', '.join(_LOADER_OVERRIDES)}); pass the "
                "DataLoader's dataset instead, with the DataLoader keywords you want"
            )
    kw: dict[str, Any] = {
        "collate_fn": loader.collate_fn,
        "generator": loader.generator,
        "worker_init_fn": loader.worker_init_fn,
    }
    if settings.num_workers:  # with no workers DataLoader refuses both (timeout at iteration)
        kw.update(timeout=loader.timeout, multiprocessing_context=loader.multiprocessing_context)
    if hasattr(loader, "in_order"):  # torch >= 2.6; False would let workers reorder batches
        kw["in_order"] = loader.in_order
    if isinstance(loader.dataset, IterableDataset):
        if settings.num_workers != loader.num_workers:
            # Each worker iterates its own copy of the dataset: unless the dataset shards itself
            # by get_worker_info(), samples repeat, and either way their order changes.
            raise ValueError(
                f"num_workers cannot change ({loader.num_workers} -> {settings.num_workers}) for a "
                "loader over an IterableDataset: every worker runs its own copy of the stream. "
                f"Pass settings with num_workers={loader.num_workers}, or build the loader yourself"
            )
        kw.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_sampler is not None:
        # The batch sampler holds the sampler, batch_size and drop_last, and the sampler holds
        # the shuffle and its generator: reusing it reproduces the batches in order.
        kw["batch_sampler"] = loader.batch_sampler
    else:  # batch_size=None: the sampler's indices are the batches
        kw.update(sampler=loader.sampler, batch_size=None)
    return {**kw, **overrides}


def _map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``obj`` with ``fn`` applied to every tensor in nested tuples, lists and dicts."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple takes its fields
        return type(obj)(*(_map_tensors(x, fn) for x in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_map_tensors(x, fn) for x in obj)
    if isinstance(obj, dict):
        out = copy.copy(obj)  # keeps the dict's type (OrderedDict, defaultdict) and key order
        for key, value in obj.items():
            out[key] = _map_tensors(value, fn)
        return out
    return obj


def _memory_format(t: torch.Tensor, channels_last: bool) -> torch.memory_format:
    # Only floating 4-D tensors are images (N, C, H, W); an integer 4-D tensor is a label map.
    if channels_last and t.ndim == 4 and t.is_floating_point():
        return torch.channels_last
    return torch.preserve_format


def to_device(
    batch: _B,
    device: torch.device | str,
    *,
    non_blocking: bool = False,
    channels_last: bool = False,
) -> _B:
    """``batch`` with every tensor in nested tuples, lists and dicts moved to ``device``.

    Container types are kept (namedtuples included); other objects are returned as they are.
    ``channels_last`` converts 4-D floating-point tensors. ``non_blocking`` is asynchronous only
    from pinned memory, and must not be used for copies to the CPU whose result is read at once.
    """
    dev = torch.device(device)

    def move(t: torch.Tensor) -> torch.Tensor:
        fmt = _memory_format(t, channels_last)
        return t.to(dev, non_blocking=non_blocking, memory_format=fmt)

    moved: _B = _map_tensors(batch, move)
    return moved


class DevicePrefetcher:
    """Iterates ``loader``'s batches delivered on ``device``; each ``iter()`` is a fresh pass.

    On CUDA, while the current step runs, the next batch is pinned (if the loader did not pin
    it) and copied with ``non_blocking=True`` on a side stream (``self.stream``); before a
    batch is handed out, the current stream waits for the end of that batch's copy, and every
    tensor of it is recorded as used on the current stream. One extra batch lives on the GPU.
    On CPU there is nothing to overlap: batches pass through unchanged, with no copies and no
    threads. ``channels_last`` converts 4-D floating-point tensors on both devices.
    """

    def __init__(
        self, loader: DataLoader[Any], device: torch.device | str, *, channels_last: bool = False
    ) -> None:
        self.loader = loader
        self.device = _device(device)
        self.channels_last = channels_last
        self.stream: torch.cuda.Stream | None = None  # the side stream of the copies, on CUDA
        if self.device.type == "cuda":
            if not torch.cuda.is_available():
                raise ValueError(f"device is {self.device} but torch.cuda.is_available() is False")
            if self.device.index is None:
                self.device = torch.device("cuda", torch.cuda.current_device())
            self.stream = torch.cuda.Stream(device=self.device)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        if self.stream is not None:
            return self._prefetched(self.stream)
        if self.channels_last:
            return (to_device(b, self.device, channels_last=True) for b in self.loader)
        return iter(self.loader)

    @property
    def dataset(self) -> Dataset[Any]:
        return self.loader.dataset

    @property
    def sampler(self) -> Any:
        return self.loader.sampler

    @property
    def batch_sampler(self) -> Any:
        return self.loader.batch_sampler

    def set_epoch(self, epoch: int) -> None:
        """Call ``set_epoch`` on the loader's sampler and batch sampler, those that have it."""
        candidates: tuple[Any, ...] = (self.loader.sampler, self.loader.batch_sampler)
        # The default batch sampler wraps the sampler: call each object once.
        found = {id(s): s for s in candidates if callable(getattr(s, "set_epoch", None))}
        for obj in found.values():
            obj.set_epoch(epoch)
        if not found:
            msg = "neither the loader's sampler nor its batch_sampler has set_epoch"
            raise AttributeError(f"set_epoch: {msg} (a DistributedSampler has)")

    def _copy(self, batch: Any) -> Any:
        def move(t: torch.Tensor) -> torch.Tensor:
            if t.device.type == "cpu" and not t.is_pinned():
                t = t.pin_memory()  # a copy from pageable memory would block the host
            fmt = _memory_format(t, self.channels_last)
            return t.to(self.device, non_blocking=True, memory_format=fmt)

        return _map_tensors(batch, move)

    def _prefetched(self, side: torch.cuda.Stream) -> Iterator[Any]:
        pending: tuple[Any, torch.cuda.Event] | None = None
        for batch in self.loader:
            with torch.cuda.stream(side):  # the copy overlaps the step that is running now
                copied = self._copy(batch)
                done = torch.cuda.Event()
                done.record(side)
            if pending is not None:
                yield self._ready(*pending)
            pending = (copied, done)
        if pending is not None:
            yield self._ready(*pending)

    def _ready(self, batch: Any, copied: torch.cuda.Event) -> Any:
        compute = torch.cuda.current_stream(self.device)
        # Wait for this batch's copy only (an event, not wait_stream): the copy of the batch
        # after it, already queued on the side stream, goes on overlapping with the step.
        compute.wait_event(copied)

        def keep(t: torch.Tensor) -> torch.Tensor:
            # Allocated on the side stream, read on the compute stream: without this, once the
            # tensor is freed the caching allocator could hand its memory to the next copy on the
            # side stream while kernels queued on the compute stream still read it.
            t.record_stream(compute)
            return t

        return _map_tensors(batch, keep)
