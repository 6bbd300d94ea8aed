"""The configurations ``torchpace bench`` compares. ``naive`` mirrors examples/naive_*.py;
``tuned`` is a hand-set configuration of catalogue techniques (tune, a later issue, searches)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch

from torchpace.catalog import loader_workers
from torchpace.measure.cores import usable_cores
from torchpace.measure.env import bf16_supported

Amp = Literal["off", "bf16", "fp16"]
OptimizerChoice = Literal["recipe", "adamw", "adamw-fused"]
SdpaBackend = Literal["default", "math"]


@dataclass(frozen=True)
class TrainConfig:
    name: str
    amp: Amp = "off"
    channels_last: bool = False
    optimizer: OptimizerChoice = "recipe"
    set_to_none: bool = False
    num_workers: int = 0
    pin_memory: bool = False
    sync_every_step: bool = True  # read loss.item() every step, as naive logging does
    sdpa_backend: SdpaBackend = "default"
    techniques: tuple[str, ...] = field(default=())  # catalogue ids this configuration applies


def naive(workload: str, device: torch.device) -> TrainConfig:
    """The recipe as a typical script runs it: fp32, the recipe's Adam, zeroed (not freed)
    gradients, no loader workers, and a host read of the loss every step."""
    del workload, device
    return TrainConfig(name="naive")


def tuned(workload: str, device: torch.device) -> TrainConfig:
    """Hand-set techniques that pay off on ``device``."""
    cuda = device.type == "cuda"
    techniques = ["fused-optimizer", "adamw", "grad-set-to-none", "avoid-syncs"]
    amp: Amp = "off"
    sdpa: SdpaBackend = "default"
    if cuda:
        amp = "bf16" if bf16_supported(device) else "fp16"
        techniques.append(f"amp-{amp}")
    elif bf16_supported(device) and workload != "seqcls":
        amp = "bf16"
        techniques.append("amp-bf16")
        if workload == "lm":
            # torch 2.13's CPU flash-attention backward runs ~4.5x slower in bf16 than in fp32
            # (53 vs 12 ms at 32x4x128x32, measured on the 2-core AMX Xeon); the math backend
            # does not have that cliff at lm's 128-token windows.
            sdpa = "math"
            techniques.append("attention-backend")
    # seqcls on CPU keeps fp32: its attention runs over padded lengths up to 1024, where both
    # bf16 flash backward (the cliff above) and the math backend (O(L^2) memory) measured slower.
    channels_last = workload == "cnn"
    if channels_last:
        techniques.append("channels-last")
    # Loader workers and pinned memory on CUDA only: on a CPU-only run the workers compete with
    # the training step for the same cores.
    workers = loader_workers("cuda" if cuda else "cpu", usable_cores())
    if cuda:
        techniques += ["loader-workers", "pinned-memory", "persistent-workers"]
    return TrainConfig(
        name="tuned",
        amp=amp,
        channels_last=channels_last,
        optimizer="adamw-fused",
        set_to_none=True,
        num_workers=workers,
        pin_memory=cuda,
        sync_every_step=False,
        sdpa_backend=sdpa,
        techniques=tuple(techniques),
    )


CONFIGS = {"naive": naive, "tuned": tuned}
