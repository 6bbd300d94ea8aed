"""``torchvision.utils.save_image`` for the corpus: an image grid written as a PNG file."""

from __future__ import annotations

import math
import os
import struct
import zlib
from pathlib import Path

import torch


def _grid(tensor: torch.Tensor, nrow: int, padding: int, pad_value: float) -> torch.Tensor:
    """3 x H' x W': the images of a B x C x H x W batch (C 1 or 3) laid out NROW to a row,
    PADDING pixels of PAD_VALUE around and between them; one image is returned unpadded."""
    if tensor.ndim == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.ndim == 3:
        tensor = tensor.unsqueeze(0)
    if tensor.ndim != 4 or tensor.size(1) not in (1, 3):
        raise ValueError(f"save_image takes B x C x H x W with C 1 or 3; got {tuple(tensor.shape)}")
    if tensor.size(1) == 1:
        tensor = tensor.expand(-1, 3, -1, -1)
    count, channels, height, width = tensor.shape
    if count == 1:
        return tensor[0]
    cols = min(nrow, count)
    rows = math.ceil(count / cols)
    cell_h, cell_w = height + padding, width + padding
    out = tensor.new_full((channels, rows * cell_h + padding, cols * cell_w + padding), pad_value)
    for k in range(count):
        top = (k // cols) * cell_h + padding
        left = (k % cols) * cell_w + padding
        out[:, top : top + height, left : left + width] = tensor[k]
    return out


def _png_rgb(pixels: bytes, width: int, height: int) -> bytes:
    """An 8-bit RGB PNG of PIXELS (rows of WIDTH x 3 bytes, top row first)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    stride = width * 3
    rows = b"".join(b"\x00" + pixels[r * stride : (r + 1) * stride] for r in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 6))
        + chunk(b"IEND", b"")
    )


def save_image(
    tensor: torch.Tensor,
    fp: str | os.PathLike,
    format: str | None = None,
    *,
    nrow: int = 8,
    padding: int = 2,
    pad_value: float = 0.0,
) -> None:
    """Write a batch of images in [0, 1] as one grid image, an 8-bit RGB PNG.

    Like torchvision: the images are laid out NROW per row with PADDING pixels between them
    (grey images are repeated to three channels), each value becomes ``round(255 * x)`` clamped
    to 0..255, and the folder of FP must exist.  Only PNG is written (FP's suffix or FORMAT must
    say png); torchvision's ``normalize``, ``value_range`` and ``scale_each`` are not stood in for.
    """
    kind = (format or Path(fp).suffix.lstrip(".")).lower()
    if kind != "png":
        raise ValueError(f"this torchvision stand-in writes PNG only; got {fp!r} format={format!r}")
    grid = _grid(tensor.detach().cpu(), nrow, padding, pad_value)
    img = grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to(torch.uint8).contiguous()
    height, width = img.shape[0], img.shape[1]
    Path(fp).write_bytes(_png_rgb(img.numpy().tobytes(), width, height))


__all__ = ["save_image"]
