"""Build one training step for a recipe under a ``TrainConfig``."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader

from torchpace.bench.configs import TrainConfig
from torchpace.measure.timing import StepFn, Work
from torchpace.speedups.loading import to_device
from torchpace.speedups.memory_format import in_effect, use_channels_last
from torchpace.workloads.protocol import Recipe


def _forever(loader: DataLoader[Any]) -> Iterator[Any]:
    while True:
        yield from loader


def _optimizer(recipe: Recipe, cfg: TrainConfig, params: Any, lr: float) -> torch.optim.Optimizer:
    if cfg.optimizer == "recipe":
        opt: torch.optim.Optimizer = recipe.optimizer(params, lr)
        return opt
    return torch.optim.AdamW(params, lr=lr, fused=cfg.optimizer == "adamw-fused")


def build_step(recipe: Recipe, cfg: TrainConfig, device: torch.device, *, seed: int = 0) -> StepFn:
    """Model, optimizer and an endless loader for ``recipe``, and a closure running one step.

    The same ``seed`` gives every configuration the same initial weights and the same batch order,
    so paired rounds compare equal work.
    """
    torch.manual_seed(seed)
    model = recipe.model().to(device)
    if cfg.channels_last and not in_effect(use_channels_last(model)):
        # A model channels_last breaks on this device (use_channels_last said why): as written.
        cfg = dataclasses.replace(cfg, channels_last=False)
    model.train()
    opt = _optimizer(recipe, cfg, model.parameters(), recipe.lr)
    loader = DataLoader(
        recipe.dataset("train", seed=seed),
        batch_size=recipe.batch_size,
        shuffle=True,
        drop_last=True,
        collate_fn=getattr(recipe, "collate", None),
        num_workers=cfg.num_workers,
        pin_memory=cfg.pin_memory,
        persistent_workers=cfg.num_workers > 0,
        generator=torch.Generator().manual_seed(seed),
    )
    batches = _forever(loader)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.amp)
    # fp16 needs loss scaling against gradient underflow; bf16 has fp32's exponent range.
    scaler = torch.amp.GradScaler(device.type) if cfg.amp == "fp16" else None

    def attention_backend() -> contextlib.AbstractContextManager[object]:
        if cfg.sdpa_backend == "math":
            from torchpace.measure.compat import sdpa_kernel

            return sdpa_kernel("math")  # type: ignore[no-any-return]
        return contextlib.nullcontext()

    def step() -> Work:
        batch = next(batches)
        work = Work(recipe.count_samples(batch), recipe.count_tokens(batch))  # counted on host
        batch = to_device(
            batch, device, non_blocking=cfg.pin_memory, channels_last=cfg.channels_last
        )
        with (
            torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None),
            attention_backend(),
        ):
            loss = recipe.loss(model, batch)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=cfg.set_to_none)
        if cfg.sync_every_step:
            loss.item()  # note: a host-device sync, as naive per-step logging does
        return work

    return step
