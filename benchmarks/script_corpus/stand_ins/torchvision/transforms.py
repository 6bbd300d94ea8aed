"""``torchvision.transforms.Compose``, ``ToTensor`` and ``Normalize`` for the corpus."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch


class Compose:
    """Apply each transform in turn."""

    def __init__(self, transforms: Sequence[Callable]) -> None:
        self.transforms = list(transforms)

    def __call__(self, img: Any) -> Any:
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        inner = "".join(f"\n    {t!r}" for t in self.transforms)
        return f"{type(self).__name__}({inner}\n)"


class ToTensor:
    """An H x W or H x W x C numpy array to a C x H x W tensor.

    uint8 input becomes float (torch's default dtype, float32) scaled to [0, 1]; other dtypes keep
    their values and dtype, as torchvision's ToTensor does for arrays.  The stand-in's MNIST gives
    uint8 H x W arrays, so its samples come out float32 1 x 28 x 28 in [0, 1]."""

    def __call__(self, pic: Any) -> torch.Tensor:
        if not isinstance(pic, np.ndarray):
            raise TypeError(
                f"pic should be an ndarray in this torchvision stand-in (no PIL); got {type(pic)}"
            )
        if pic.ndim == 2:
            pic = pic[:, :, None]
        if pic.ndim != 3:
            raise ValueError(f"pic should be 2 or 3 dimensional; got {pic.ndim} dimensions")
        img = torch.from_numpy(np.ascontiguousarray(pic.transpose(2, 0, 1)))
        if img.dtype == torch.uint8:
            return img.to(dtype=torch.get_default_dtype()).div(255)
        return img

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Normalize:
    """Per channel ``(x - mean) / std`` on a float C x H x W (or ... x C x H x W) tensor."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> None:
        self.mean = mean
        self.std = std
        self.inplace = inplace

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
            raise TypeError(f"Normalize takes a float tensor; got {type(tensor)}")
        if tensor.ndim < 3:
            raise ValueError(
                f"Normalize expects a tensor of size (..., C, H, W); got {tuple(tensor.shape)}"
            )
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype, device=tensor.device)
        std = torch.as_tensor(self.std, dtype=tensor.dtype, device=tensor.device)
        if (std == 0).any():
            raise ValueError(f"std evaluated to zero after conversion to {tensor.dtype}")
        if not self.inplace:
            tensor = tensor.clone()
        return tensor.sub_(mean.view(-1, 1, 1)).div_(std.view(-1, 1, 1))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(mean={self.mean}, std={self.std})"


__all__ = ["Compose", "Normalize", "ToTensor"]
