"""Small, fast training set-ups shared by the train tests."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from torchpace.workloads import cnn


class NoisyPoints(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Points with random jitter drawn from the global RNG in __getitem__ (like augmentation),
    so exact resume must restore the RNG as well as the weights."""

    def __init__(self, n: int = 64, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 16, generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i] + 0.1 * torch.randn(16), self.y[i]


def mlp() -> nn.Module:
    """With dropout: its masks come from the global RNG on every step."""
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 4))


def mlp_loss(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y)


def mlp_setup(
    seed: int = 0, batch_size: int = 8, shuffle: bool = True
) -> tuple[nn.Module, torch.optim.Optimizer, DataLoader[Any]]:
    torch.manual_seed(seed)
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loader = DataLoader(
        NoisyPoints(),
        batch_size=batch_size,
        shuffle=shuffle,
        generator=torch.Generator().manual_seed(seed) if shuffle else None,
    )
    return model, opt, loader


def cnn_setup(
    seed: int = 0, n: int = 512, batch_size: int = 16, width: int = 8
) -> tuple[nn.Module, torch.optim.Optimizer, DataLoader[Any]]:
    """A narrow ResNet (conv biases before BatchNorm, as the workload writes it) on a subset.
    Width 8 gives its shortcut 8 input channels, which channels_last leaves alone on a CPU
    (speedups.memory_format.channels_last_hazard); width 16 does not."""
    torch.manual_seed(seed)
    model = cnn.model(width=width)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = Subset(cnn.dataset("train", seed=seed), range(n))
    loader = DataLoader(
        data, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
    return model, opt, loader
