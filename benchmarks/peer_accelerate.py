"""Contestant "accelerate": the recipe in a plain loop under Hugging Face Accelerate, with the
settings of its docs ("Mixed precision", "DataLoaderConfiguration", "torch.compile").

- ``Accelerator(mixed_precision="bf16")`` where the device has native bf16, else ``"no"``;
- its recommended loader settings: pinned memory with ``DataLoaderConfiguration(non_blocking=
  True)`` and workers on CUDA; on this 2-core CPU neither (``_peers_job.peer_loader`` says why);
- ``dynamo_backend="inductor"`` when the job asks for compiling (on by default on CUDA);
- the loop of its quick tour: ``accelerator.backward(loss)``, ``optimizer.step()``,
  ``optimizer.zero_grad()``, no per-step read of the loss.

The optimizer is the recipe's own (Adam), as in the naive script: Accelerate does not choose it.
"""

from __future__ import annotations

from typing import Any

import accelerate
import torch
from _peers_job import Job, Trained, loader_techniques, peer_loader
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration

from torchpace.measure.clock import resolve_device
from torchpace.measure.env import bf16_supported
from torchpace.recipes import load_recipe


def train(job: Job) -> Trained:
    recipe = load_recipe(job.recipe)
    device = resolve_device(job.device)
    torch.manual_seed(job.seed)
    model = recipe.model()
    optimizer = recipe.optimizer(model.parameters(), recipe.lr)
    loader, loader_settings = peer_loader(recipe, job.seed, device)
    bf16 = bf16_supported(device)
    settings: dict[str, Any] = {
        "mixed_precision": "bf16" if bf16 else "no",
        "non_blocking": loader_settings["pin_memory"],
        "loader": loader_settings,
        "dynamo_backend": "inductor" if job.compile else "no",
        "accelerate": accelerate.__version__,
    }
    acc = Accelerator(
        cpu=device.type == "cpu",
        mixed_precision=settings["mixed_precision"],
        dataloader_config=DataLoaderConfiguration(non_blocking=settings["non_blocking"]),
        dynamo_backend=settings["dynamo_backend"],
    )
    model, optimizer, loader = acc.prepare(model, optimizer, loader)
    model.train()
    step = 0
    while step < job.steps:  # past an epoch, the loader reshuffles, as every contestant's does
        for batch in loader:
            loss = recipe.loss(model, batch)  # autocast: prepare() wrapped the forward
            acc.backward(loss)
            optimizer.step()
            optimizer.zero_grad()  # set_to_none by default
            step += 1
            if step == job.steps:
                break
    techniques = [
        *(["amp-bf16"] if bf16 else []),
        *loader_techniques(loader_settings),
        *(["torch-compile"] if job.compile else []),
        "grad-set-to-none",
        "avoid-syncs",
    ]
    amp = "bf16" if bf16 else "off"
    return Trained(model=model, amp=amp, techniques=tuple(techniques), settings=settings)
