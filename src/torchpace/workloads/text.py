"""Offline text for the ``lm`` workload: the Python standard library's sources, as bytes."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import torch
from torch.utils.data import Dataset

VOCAB_SIZE = 256  # byte-level


def stdlib_corpus(max_bytes: int = 4_000_000) -> bytes:
    """Concatenate the standard library's top-level ``.py`` files, in sorted order, up to
    ``max_bytes``. The same Python installation always gives the same bytes."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(root.glob("*.py"))
    if not files:
        raise FileNotFoundError(
            f"no .py files in the standard library directory {root}; this Python ships without "
            "its sources, so pass a text corpus explicitly"
        )
    parts: list[bytes] = []
    total = 0
    for f in files:
        data = f.read_bytes()
        parts.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    return b"".join(parts)[:max_bytes]


def split_corpus(data: bytes, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Split bytes into (train, validation) uint8 tensors: the last ``val_fraction`` is held out."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    arr = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    cut = int(len(arr) * (1.0 - val_fraction))
    return arr[:cut].clone(), arr[cut:].clone()


class TextWindows(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Non-overlapping windows of ``block`` bytes; the target is the input shifted by one."""

    def __init__(self, data: torch.Tensor, block: int) -> None:
        if block <= 0:
            raise ValueError(f"block must be positive, got {block}")
        if len(data) < block + 1:
            raise ValueError(f"corpus of {len(data)} bytes is shorter than one block of {block}")
        self.data = data
        self.block = block

    def __len__(self) -> int:
        return (len(self.data) - 1) // self.block

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = index * self.block
        chunk = self.data[start : start + self.block + 1].long()
        return chunk[:-1], chunk[1:]
