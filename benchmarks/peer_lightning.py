"""Contestant "lightning": the recipe in a LightningModule, trained by ``lightning.Trainer`` with
the speed settings of Lightning's docs ("Speed up model training", "N-bit precision").

- ``precision="bf16-mixed"`` where the device has native bf16 (CUDA with bf16, or a CPU with
  AVX512-BF16/AMX, as this one), else ``"32-true"``;
- ``benchmark=True`` (cudnn's convolution auto-tuner: CUDA only, a no-op on CPU);
- the loader settings of ``_peers_job.peer_loader`` (workers and pinned memory on CUDA; none on
  this 2-core CPU, where a worker measured slower);
- ``torch.compile`` of the model when the job asks (``peers.py --compile``; on by default on
  CUDA), as the docs' "Speed up models by compiling them" does;
- no logger, checkpointing, progress bar or model summary: the run measures training only (the
  harness evaluates afterwards), and none of them is needed for it.

The optimizer is the recipe's own (Adam), as in the naive script: Lightning does not choose it.
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from _peers_job import Job, Trained, loader_techniques, peer_loader

from torchpace.measure.clock import resolve_device
from torchpace.measure.env import bf16_supported
from torchpace.recipes import load_recipe


class RecipeModule(L.LightningModule):
    def __init__(self, model: torch.nn.Module, recipe: Any) -> None:
        super().__init__()
        self.model, self.recipe = model, recipe

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss: torch.Tensor = self.recipe.loss(self.model, batch)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        opt: torch.optim.Optimizer = self.recipe.optimizer(self.parameters(), self.recipe.lr)
        return opt


def train(job: Job) -> Trained:
    recipe = load_recipe(job.recipe)
    device = resolve_device(job.device)
    torch.manual_seed(job.seed)
    model = recipe.model()
    loader, loader_settings = peer_loader(recipe, job.seed, device)
    bf16 = bf16_supported(device)
    cuda = device.type == "cuda"
    settings: dict[str, Any] = {
        "precision": "bf16-mixed" if bf16 else "32-true",
        "benchmark": True,
        "loader": loader_settings,
        "compile": job.compile,
        "lightning": L.__version__,
    }
    module = RecipeModule(torch.compile(model) if job.compile else model, recipe)
    trainer = L.Trainer(
        accelerator=device.type,
        devices=1,
        max_steps=job.steps,
        precision=settings["precision"],
        benchmark=True,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )
    trainer.fit(module, train_dataloaders=loader)
    techniques = [
        *(["amp-bf16"] if bf16 else []),
        *(["cudnn-benchmark"] if cuda else []),
        *loader_techniques(loader_settings),
        *(["torch-compile"] if job.compile else []),
        "grad-set-to-none",  # Lightning calls optimizer.zero_grad(): set_to_none by default
    ]
    amp = "bf16" if bf16 else "off"
    return Trained(model=module.model, amp=amp, techniques=tuple(techniques), settings=settings)
