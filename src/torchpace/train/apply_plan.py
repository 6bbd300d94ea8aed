"""``prepare()``: apply a ``Plan`` to a model, its optimizer and its loader, in the user's loop.

    model, optimizer, loader = torchpace.prepare(model, optimizer, loader, plan=Plan.preset("fast"))

It returns the objects in the order given. The model is the same object, changed in place
(unless DDP wraps it under torchrun); the optimizer is the same object; the loader is rebuilt
when the plan changes its settings, batching or sharding, and wrapped in a ``DevicePrefetcher``
(which delivers batches on the device) when the plan prefetches or uses channels_last.
``applied`` (a list), if given, receives one ``Applied`` record per technique.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

from torchpace.speedups.applied import Applied, done, skipped
from torchpace.speedups.batching import LengthBucketBatchSampler, TokenBudgetBatchSampler
from torchpace.speedups.checkpointing import checkpoint_activations
from torchpace.speedups.compile import compile_model
from torchpace.speedups.distributed import World, process_device, world, wrap_ddp
from torchpace.speedups.fast_math import set_fast_math
from torchpace.speedups.forward import autocast_forward, use_attention_backend
from torchpace.speedups.loading import (
    DevicePrefetcher,
    LoaderSettings,
    loader_settings,
    tuned_loader,
)
from torchpace.speedups.memory_format import in_effect, use_channels_last
from torchpace.speedups.optim import fuse_optimizer
from torchpace.speedups.preallocate import preallocate
from torchpace.speedups.precision import choose_precision
from torchpace.speedups.surgery import fold_conv_bias
from torchpace.train.plan import Plan

PREPARED = "_torchpace_plan"  # set on a prepared model: fit() does not prepare it twice


def prepare(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: Any = None,
    *,
    plan: Plan,
    device: torch.device | str | None = None,
    loss_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None,
    max_batch: Any = None,
    applied: list[Applied] | None = None,
) -> tuple[nn.Module, torch.optim.Optimizer, Any]:
    """Apply ``plan``; returns ``(model, optimizer, loader)``. ``loss_fn`` and ``max_batch``
    (the worst-case batch, on the device) are needed only by ``plan.preallocate``."""
    if not isinstance(plan, Plan):
        raise TypeError(f"plan must be a torchpace Plan, got {type(plan).__name__}")
    if getattr(model, PREPARED, None) is not None:
        raise ValueError("this model was already prepared; prepare() each model once")
    records: list[Applied] = [] if applied is None else applied
    dev = process_device(device if device is not None else _device_of(model))
    model.to(dev)
    w = world()

    before = {id(p) for p in model.parameters()}
    if plan.fold_conv_bias:
        records.append(fold_conv_bias(model))
        drop_removed_params(optimizer, model, before)
    if plan.channels_last:
        records.append(use_channels_last(model))
        if not in_effect(records[-1]):  # the loader then leaves the inputs' layout alone too
            plan = dataclasses.replace(plan, channels_last=False)
    if plan.checkpoint_modules:
        names = set(plan.checkpoint_modules)
        records.append(
            checkpoint_activations(model, filter_fn=lambda _n, m: type(m).__name__ in names)
        )
    if plan.fused_optimizer:
        records.append(fuse_optimizer(optimizer))
    if plan.fast_math:
        records.extend(set_fast_math(dev).applied)
    precision, chosen = choose_precision(dev, plan.amp)
    records.append(chosen)
    records.append(autocast_forward(model, precision=precision))
    if plan.attention != "default":
        records.append(use_attention_backend(model, backend=plan.attention))
    if plan.preallocate:
        if loss_fn is None or max_batch is None:
            records.append(skipped("fixed-shapes", "preallocate needs loss_fn= and max_batch="))
        else:
            records.append(preallocate(model, loss_fn=loss_fn, max_batch=max_batch))
    model, ddp = wrap_ddp(model, device=dev)
    records.append(ddp)
    if plan.compile != "off":  # after DDP: compiling the DDP module lets it split graphs at buckets
        records.append(compile_model(model, mode=plan.compile))
    if loader is not None:
        loader = _prepare_loader(loader, plan, dev, w, records)
    object.__setattr__(model, PREPARED, plan)
    return model, optimizer, loader


def _device_of(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def drop_removed_params(
    optimizer: torch.optim.Optimizer, model: nn.Module, before: set[int]
) -> None:
    """Take parameters the model no longer has (folded biases) out of the optimizer."""
    now = {id(p) for p in model.parameters()}
    gone = before - now
    if not gone:
        return
    for group in optimizer.param_groups:
        group["params"] = [p for p in group["params"] if id(p) not in gone]
    for p in [p for p in optimizer.state if id(p) in gone]:
        del optimizer.state[p]


def _settings_of(loader: DataLoader[Any]) -> LoaderSettings:
    workers = loader.num_workers
    return LoaderSettings(
        num_workers=workers,
        pin_memory=loader.pin_memory,
        persistent_workers=loader.persistent_workers,
        prefetch_factor=loader.prefetch_factor if workers else None,
    )


def _sharded(loader: DataLoader[Any]) -> bool:
    return isinstance(loader.sampler, DistributedSampler) or isinstance(
        loader.batch_sampler, (LengthBucketBatchSampler, TokenBudgetBatchSampler)
    )


def _lengths(loader: DataLoader[Any]) -> Any:
    lengths = getattr(loader.dataset, "lengths", None)
    if lengths is None:
        raise ValueError(
            f"plan batching needs each sample's length: give the dataset "
            f"({type(loader.dataset).__name__}) a `lengths` attribute (a sequence of ints)"
        )
    return lengths


def _seed(loader: DataLoader[Any]) -> int:
    gen = loader.generator or getattr(loader.sampler, "generator", None)
    return int(gen.initial_seed()) if gen is not None else 0


def _prepare_loader(
    loader: Any, plan: Plan, dev: torch.device, w: World, records: list[Applied]
) -> Any:
    distributed = w.size > 1
    if isinstance(loader, DataLoader):
        kw: dict[str, Any] = {}
        shuffle = isinstance(loader.sampler, RandomSampler)
        batch_size = plan.batch_size or loader.batch_size or 1
        if plan.batching == "length-bucket":
            kw["batch_sampler"] = LengthBucketBatchSampler(
                _lengths(loader),
                batch_size,
                shuffle=shuffle,
                seed=_seed(loader),
                drop_last=loader.drop_last,
            )
            records.append(done("length-bucketing", [f"batches of {batch_size} similar lengths"]))
        elif plan.batching == "token-budget":
            assert plan.max_tokens is not None  # Plan checks it
            kw["batch_sampler"] = TokenBudgetBatchSampler(
                _lengths(loader), plan.max_tokens, shuffle=shuffle, seed=_seed(loader)
            )
            records.append(done("length-bucketing", [f"batches of ≤{plan.max_tokens} tokens"]))
        elif distributed and not _sharded(loader):
            kw["sampler"] = DistributedSampler(
                loader.dataset, shuffle=shuffle, seed=_seed(loader), drop_last=loader.drop_last
            )
            kw.update(batch_size=batch_size, drop_last=loader.drop_last)
        elif plan.batch_size is not None and plan.batch_size != loader.batch_size:
            kw.update(sampler=loader.sampler, batch_size=batch_size, drop_last=loader.drop_last)
            records.append(
                done("max-batch-size", [f"batch size {loader.batch_size} -> {batch_size}"])
            )
        settings = None
        if plan.loader == "auto" or plan.loader_workers is not None:
            settings = loader_settings(dev, workers=plan.loader_workers)
            records.append(done("loader-workers", [str(settings)]))
        if kw:  # new batches: a loader over the same dataset, collate and generator
            kw.update(
                collate_fn=loader.collate_fn,
                generator=loader.generator,
                worker_init_fn=loader.worker_init_fn,
            )
            loader = tuned_loader(
                loader.dataset, device=dev, settings=settings or _settings_of(loader), **kw
            )
        elif settings is not None:  # the same batches in the same order, other settings
            loader = tuned_loader(loader, device=dev, settings=settings)
    elif plan.batching != "as-is" or plan.loader != "keep" or plan.batch_size is not None:
        records.append(
            skipped(
                "loader-workers",
                f"the loader is a {type(loader).__name__}, not a DataLoader; "
                "its settings, batching and batch size are left as they are",
            )
        )
    if plan.prefetch or plan.channels_last:
        loader = DevicePrefetcher(loader, dev, channels_last=plan.channels_last)
        records.append(done("async-prefetch", [f"batches delivered on {dev}"]))
    return loader
