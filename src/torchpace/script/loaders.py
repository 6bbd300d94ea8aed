"""DataLoaders of a script, as the plan wants them (``torchpace.script.interpose``'s constructor
patch): the device's worker, pinning and persistence settings (``loader_settings``), not for an
IterableDataset, which each worker would yield whole; the plan's batch size for the shuffled
training loader (an evaluation loader, or batches the script forms itself, are left as they are),
with the LR factor of the plan's scaling rule handed to the optimizers' side; and the plan's
length bucketing for that loader where its dataset says its samples' ``lengths``, as a recipe's
does (``torchpace.speedups.batching``'s samplers in place of ``shuffle=True``)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset, RandomSampler

from torchpace.runtime.patching import Patches
from torchpace.runtime.user_code import is_user_code
from torchpace.speedups.applied import Applied, done, skipped
from torchpace.speedups.bucketed_loader import (
    bucket_sampler,
    dataset_lengths,
    length_quantiles,
)
from torchpace.speedups.loading import loader_settings
from torchpace.train.lr import scale_lr
from torchpace.train.plan import Plan

_DATALOADER_SIG = inspect.signature(DataLoader.__init__)


class LoaderPatch:
    """``DataLoader.__init__`` with the plan's settings; ``loaders`` records what each loader
    was made with (its dataset, whether it shuffles, batch size, workers)."""

    def __init__(
        self,
        plan: Plan,
        device: torch.device,
        applied: list[Applied],
        on_batch_scaled: Callable[[float], None],
    ) -> None:
        self.plan = plan
        self.device = device
        self.applied = applied
        self.on_batch_scaled = on_batch_scaled
        self.loaders: list[dict[str, Any]] = []

    def install(self, patches: Patches) -> None:
        init = DataLoader.__init__
        me = self

        def __init__(loader: DataLoader[Any], *args: Any, **kwargs: Any) -> None:
            try:
                bound = _DATALOADER_SIG.bind(loader, *args, **kwargs)
            except TypeError:
                return init(loader, *args, **kwargs)  # the script's own error, as it would be
            bound.apply_defaults()
            kw = dict(bound.arguments)
            kw.pop("self")
            kw = me._loader_kwargs(kw)
            init(loader, **kw)

        patches.set(DataLoader, "__init__", __init__)

    def _loader_kwargs(self, kw: dict[str, Any]) -> dict[str, Any]:
        plan = self.plan
        dataset = kw["dataset"]
        iterable = isinstance(dataset, IterableDataset)
        shuffled = bool(kw.get("shuffle")) or isinstance(kw.get("sampler"), RandomSampler)
        info = {
            "dataset": type(dataset).__name__,
            "iterable": iterable,
            "shuffled": shuffled,
            "batch_size": kw.get("batch_size"),
            "num_workers": kw.get("num_workers", 0),
        }
        lengths = dataset_lengths(dataset) if shuffled and not iterable else None
        quantiles = length_quantiles(lengths)
        if quantiles is not None:
            info["length_p90"], info["length_max"] = quantiles
        self.loaders.append(info)
        if plan.loader == "auto" or plan.loader_workers is not None:
            site = None if iterable else _site_for_evaluation()
            if site is not None:
                self.applied.append(
                    skipped(
                        "loader-workers",
                        f"the DataLoader at {site} serves evaluation or is read once (lint's "
                        "reading, as for TP101): its workers are left as written",
                        warn=False,
                    )
                )
            elif iterable:
                self.applied.append(
                    skipped(
                        "loader-workers",
                        f"{type(dataset).__name__} is an IterableDataset: each worker would "
                        "yield the whole stream unless it shards itself",
                        warn=False,
                    )
                )
            else:
                s = loader_settings(self.device, workers=plan.loader_workers)
                again = _site_reentered() if s.persistent_workers else None
                if again is not None:  # as lint's TP104 reads it: workers restart each epoch
                    s = dataclasses.replace(s, persistent_workers=False)
                    self.applied.append(
                        skipped(
                            "persistent-workers",
                            f"the DataLoader at {again} is iterated again inside its own loop: "
                            "persistent workers keep one iterator, which that pass would reset",
                            warn=False,
                        )
                    )
                before = kw.get("num_workers", 0)
                now = (before, kw.get("pin_memory"), kw.get("persistent_workers"))
                if now == (s.num_workers, s.pin_memory, s.persistent_workers):
                    self.applied.append(
                        done("loader-workers", [], reason=f"the loader already has {s}")
                    )
                    return self._batching(self._batch_size(kw, info, shuffled), info, lengths)
                kw.update(
                    num_workers=s.num_workers,
                    pin_memory=s.pin_memory,
                    persistent_workers=s.persistent_workers,
                    prefetch_factor=s.prefetch_factor,
                )
                self.applied.append(
                    done(
                        "loader-workers",
                        [f"DataLoader({type(dataset).__name__}): {before} workers -> {s}"],
                    )
                )
        return self._batching(self._batch_size(kw, info, shuffled), info, lengths)

    def _batch_size(
        self, kw: dict[str, Any], info: dict[str, Any], shuffled: bool
    ) -> dict[str, Any]:
        plan = self.plan
        if plan.batch_size is not None:
            old = kw.get("batch_size")
            if not shuffled or kw.get("batch_sampler") is not None or not old:
                return kw  # an evaluation loader, or batches the script forms itself
            if old != plan.batch_size:
                info["batch_size_as_written"] = old
                kw["batch_size"] = plan.batch_size
                factor = scale_lr(1.0, old, plan.batch_size, rule=plan.lr_scaling)
                self.applied.append(
                    done(
                        "max-batch-size",
                        [
                            f"DataLoader({info['dataset']}) batch size {old} -> "
                            f"{plan.batch_size}, LR x{factor:.3g} ({plan.lr_scaling}) "
                            "at the optimizers' construction"
                        ],
                    )
                )
                self.on_batch_scaled(factor)
            info["batch_size"] = kw["batch_size"]
        return kw

    def _batching(
        self, kw: dict[str, Any], info: dict[str, Any], lengths: list[int] | None
    ) -> dict[str, Any]:
        """The plan's length bucketing for the shuffled training loader: a batch sampler over
        the dataset's ``lengths`` instead of ``shuffle=True`` (which it reshuffles each epoch,
        seeded from torch's generator, so the script's seed decides its batches)."""
        plan = self.plan
        if plan.batching == "as-is" or not info["shuffled"] or not kw.get("batch_size"):
            return kw  # not asked for, or an evaluation loader: not this one
        name = info["dataset"]
        why = ""
        if lengths is None:
            why = f"{name} has no `lengths` (one length per sample) to bucket by"
        elif kw.get("sampler") is not None or kw.get("batch_sampler") is not None:
            why = f"DataLoader({name}) has its own sampler"
        if why:
            self.applied.append(skipped("length-bucketing", why, warn=False))
            return kw
        assert lengths is not None
        sampler, what = bucket_sampler(
            lengths,
            kw["batch_size"],
            max_tokens=plan.max_tokens if plan.batching == "token-budget" else None,
            drop_last=bool(kw.get("drop_last")),
        )
        kw.update(
            batch_sampler=sampler,
            batch_size=1,
            shuffle=False,
            sampler=None,
            drop_last=False,
        )
        self.applied.append(done("length-bucketing", [f"DataLoader({name}): {what}"]))
        return kw


def _site_for_evaluation() -> str | None:
    """``path:line`` of the script's DataLoader call being run, where lint reads it as a loader
    that does not feed training (:func:`torchpace.lint.dataloaders.feeds_training`, TP101's and
    ``apply``'s reading: an evaluation loader, one named for it, one iterated once); None for a
    training loader, and for a call lint does not read (a library's, a file it cannot parse)."""
    return _site(0)


def _site_reentered() -> str | None:
    """``path:line`` of the script's DataLoader call being run, where lint reads its loader as
    iterated again inside its own loop (:func:`torchpace.lint.rules.loading.reentered_loaders`,
    TP104's and ``apply``'s reading): persistent workers would keep one iterator that the inner
    pass resets."""
    return _site(1)


def _site(kind: int) -> str | None:
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and not is_user_code(frame.f_code):
        frame = frame.f_back
    if frame is None:
        return None
    path, line = frame.f_code.co_filename, frame.f_lineno
    try:
        stat = os.stat(path)
    except OSError:
        return None  # a file gone since
    if line in _loader_lines(path, stat.st_mtime_ns, stat.st_size)[kind]:
        return f"{os.path.basename(path)}:{line}"
    return None


@functools.lru_cache(maxsize=32)
def _loader_lines(path: str, mtime_ns: int, size: int) -> tuple[frozenset[int], frozenset[int]]:
    """The lines of every DataLoader call in the file at ``path`` that lint reads as not feeding
    training, and of those whose loader a loop iterates again inside (cached per version of the
    file)."""
    from torchpace.lint.dataloaders import feeds_training
    from torchpace.lint.engine import parse
    from torchpace.lint.loops import DATALOADERS
    from torchpace.lint.rule import FileContext
    from torchpace.lint.rules.loading import reentered_loaders

    try:
        with open(path, "rb") as f:
            ctx = parse(path, f.read())
    except OSError:
        return frozenset(), frozenset()
    if not isinstance(ctx, FileContext):
        return frozenset(), frozenset()
    evaluation: set[int] = set()
    reentered: set[int] = set()
    again = reentered_loaders(ctx)
    for call, name in ctx.calls:
        lines = range(call.lineno, (call.end_lineno or call.lineno) + 1)
        if name in DATALOADERS and not feeds_training(ctx, call):
            evaluation.update(lines)
        if id(call) in again:
            reentered.update(lines)
    return frozenset(evaluation), frozenset(reentered)
