"""What a batch holds, read from its shape alone (no sync): its size, its tokens."""

from __future__ import annotations

from typing import Any

import torch


def first_tensor(batch: Any) -> torch.Tensor | None:
    """The first tensor in a batch (tuples, lists and dicts searched)."""
    for _ in range(8):  # nested containers; give up past a sane depth
        if isinstance(batch, torch.Tensor):
            return batch
        if isinstance(batch, (list, tuple)) and batch:
            batch = batch[0]
        elif isinstance(batch, dict) and batch:
            batch = next(iter(batch.values()))
        else:
            return None
    return None


def batch_size(batch: Any) -> int:
    """The first dimension of the batch's first tensor; 0 when it has none."""
    x = first_tensor(batch)
    if x is None:
        return 0
    return int(x.shape[0]) if x.dim() else 1


def token_count(batch: Any) -> int:
    """Elements of the batch's first tensor when it is a (batch, length) tensor of integer ids
    (token ids), on any device (its shape only: no sync); 0 for any other batch."""
    x = first_tensor(batch)
    if (
        x is None
        or x.dim() != 2
        or x.is_floating_point()
        or x.is_complex()
        or x.dtype == torch.bool
    ):
        return 0
    return int(x.numel())
