"""The recipe protocol that the built-in workloads (and, later, users' recipes) follow."""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import nn
from torch.utils.data import Dataset


class Recipe(Protocol):
    """A module (or object) with these factories and defaults.

    ``collate`` may be None. ``count_samples`` and ``count_tokens`` say how much work one batch
    holds, for throughput figures (``count_tokens`` returns 0 where tokens do not apply).
    """

    batch_size: int
    lr: float

    def model(self) -> nn.Module: ...

    def dataset(self, split: str = "train", seed: int = 0) -> Dataset[Any]: ...

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor: ...

    def optimizer(self, params: Any, lr: float) -> torch.optim.Optimizer: ...

    def count_samples(self, batch: Any) -> int: ...

    def count_tokens(self, batch: Any) -> int: ...
