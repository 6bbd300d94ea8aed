"""Contestant "handtuned": a plain PyTorch loop with the guides applied by hand, no torchpace.

What it applies, and where each choice comes from (measured figures: benchmarks/README.md, the
2-core AMX Xeon, torch 2.13):

- bf16 autocast where the device has native bf16, except seqcls on CPU (measured 0.74x there);
- cnn: no conv bias before BatchNorm (every conv of this ResNet feeds one), channels_last model
  and inputs (bf16 + channels_last 2.42x on cnn);
- lm on CPU: the math attention backend (torch 2.13's CPU flash backward is slow in bf16: bf16
  alone 0.75x, with the math backend 1.25x); on CUDA torch's default (flash);
- seqcls: length bucketing (pools of 64 batches sorted by length, then the batches shuffled):
  padding is 87% of its random batches' tokens;
- the recipe's Adam with ``fused=True`` (5.6x on a 20M-parameter optimizer step);
  ``zero_grad(set_to_none=True)``; no per-step read of the loss;
- on CUDA also: cudnn.benchmark, TF32 matmuls, pinned memory with non-blocking copies, loader
  workers, and torch.compile (``peers.py --compile``, on by default there).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import torch
from _peers_job import Job, Trained, guide_loader_settings, loader_techniques, peer_loader
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.data import DataLoader

from torchpace.measure.clock import resolve_device
from torchpace.measure.env import bf16_supported
from torchpace.recipes import load_recipe

POOL = 64  # batches sorted together: long enough to find neighbours, short enough to shuffle


class Buckets:
    """Batches of similar lengths: shuffle, sort each pool of ``POOL`` batches by length, cut,
    shuffle the batches; a new order every pass. Full batches only, as the other loaders."""

    def __init__(self, lengths: list[int], batch_size: int, seed: int) -> None:
        self.lengths, self.batch_size = lengths, batch_size
        self.gen = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return len(self.lengths) // self.batch_size

    def __iter__(self) -> Iterator[list[int]]:
        order = torch.randperm(len(self.lengths), generator=self.gen).tolist()
        size, batches = self.batch_size, []
        for i in range(0, len(order), size * POOL):
            pool = sorted(order[i : i + size * POOL], key=self.lengths.__getitem__)
            batches += [pool[k : k + size] for k in range(0, len(pool) - size + 1, size)]
        for j in torch.randperm(len(batches), generator=self.gen).tolist():
            yield batches[j]


def bucketed_loader(recipe: Any, seed: int, device: torch.device) -> tuple[Any, dict[str, Any]]:
    """The training split in ``Buckets``, with the loader settings the other contestants use."""
    settings, record = guide_loader_settings(device)
    train = recipe.dataset("train", seed=seed)
    loader = DataLoader(  # noqa: TP101 (the settings come from guide_loader_settings)
        train,
        batch_sampler=Buckets(train.lengths.tolist(), recipe.batch_size, seed),
        collate_fn=recipe.collate,
        **asdict(settings),
    )
    return loader, record


def train(job: Job) -> Trained:
    recipe = load_recipe(job.recipe)
    device = resolve_device(job.device)
    cuda, cnn = device.type == "cuda", job.workload == "cnn"
    torch.manual_seed(job.seed)
    model = recipe.model()
    techniques = ["fused-optimizer", "grad-set-to-none", "avoid-syncs"]
    if cnn:
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                m.bias = None  # each feeds a BatchNorm, whose shift makes the bias redundant
        model = model.to(memory_format=torch.channels_last)
        techniques += ["conv-bias-before-bn", "channels-last"]
    model.to(device)
    if cuda:
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        techniques += ["cudnn-benchmark", "tf32"]
    bf16 = bf16_supported(device) and (cuda or job.workload != "seqcls")
    math_attention = bf16 and not cuda and job.workload == "lm"
    techniques += ["amp-bf16"] * bf16 + ["attention-backend"] * math_attention
    if job.workload == "seqcls":
        loader, settings = bucketed_loader(recipe, job.seed, device)
        techniques += ["length-bucketing"]
    else:
        loader, settings = peer_loader(recipe, job.seed, device)
    techniques += loader_techniques(settings)
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.lr, fused=True)
    step_model = torch.compile(model) if job.compile else model
    techniques += ["torch-compile"] * job.compile
    model.train()
    step = 0
    while step < job.steps:
        for batch in loader:
            x, *rest = (t.to(device, non_blocking=cuda) for t in batch)
            if cnn:
                x = x.contiguous(memory_format=torch.channels_last)
            amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)
            attention = sdpa_kernel(SDPBackend.MATH) if math_attention else contextlib.nullcontext()
            with amp, attention:
                loss = recipe.loss(step_model, (x, *rest))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step == job.steps:
                break
    settings = {"loader": settings, "bf16": bf16, "math_attention": math_attention}
    settings.update(bucketing=job.workload == "seqcls", compile=job.compile)
    amp_name = "bf16" if bf16 else "off"
    return Trained(model=model, amp=amp_name, techniques=tuple(techniques), settings=settings)
