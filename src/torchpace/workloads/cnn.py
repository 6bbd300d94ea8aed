"""``cnn``: a ResNet-style classifier of 3×32×32 images into 10 classes, with BatchNorm.

As written, its convolutions carry a bias in front of each BatchNorm (``conv_bias=True``), the
way many hand-written models do; ``fold_conv_bias`` and ``channels_last`` are measured from here.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from torchpace.workloads.images import NUM_CLASSES, ImageDataset, read_cifar10, synthetic_images

batch_size = 64
lr = 1e-3
TRAIN_SIZE = 8192  # synthetic samples; enough for a few hundred steps without repeating much
VAL_SIZE = 1024


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, conv_bias: bool) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=conv_bias)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=conv_bias)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride=stride, bias=conv_bias), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """Stem, three stages of basic blocks (widths w, 2w, 4w), global pooling, linear head."""

    def __init__(
        self,
        width: int = 32,
        blocks: tuple[int, int, int] = (1, 1, 1),
        num_classes: int = NUM_CLASSES,
        conv_bias: bool = True,
    ) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1, bias=conv_bias), nn.BatchNorm2d(width), nn.ReLU()
        )
        layers: list[nn.Module] = []
        c_in = width
        for stage, n_blocks in enumerate(blocks):
            c_out = width * 2**stage
            for i in range(n_blocks):
                layers.append(
                    BasicBlock(c_in, c_out, 2 if (i == 0 and stage > 0) else 1, conv_bias)
                )
                c_in = c_out
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        logits: torch.Tensor = self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
        return logits


def model(width: int = 32, conv_bias: bool = True) -> ResNet:
    return ResNet(width=width, conv_bias=conv_bias)


def dataset(split: str = "train", seed: int = 0, cifar_root: str | None = None) -> ImageDataset:
    """Synthetic class-conditional images, or real CIFAR-10 when ``cifar_root`` is given."""
    if cifar_root is not None:
        return read_cifar10(cifar_root, "train" if split == "train" else "test")
    if split == "train":
        return synthetic_images(TRAIN_SIZE, seed=seed)
    if split == "val":
        return synthetic_images(VAL_SIZE, seed=seed + 1_000_003)
    raise ValueError(f"split must be 'train' or 'val', got {split!r}")


def loss(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y)


def optimizer(params: Any, lr: float) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=lr)


def count_samples(batch: Any) -> int:
    return int(batch[0].shape[0])


def count_tokens(batch: Any) -> int:
    return 0
