"""``torchvision.datasets.MNIST`` for the corpus: local IDX files only, never a download."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

_MAKE = "python benchmarks/script_corpus/make_corpus.py --only pytorch/examples"

# IDX type codes (the third byte of the magic number) this reader accepts.
_UBYTE = 0x08


def _read_idx(path: Path, ndim: int) -> np.ndarray:
    """The array in one uncompressed IDX file of unsigned bytes with NDIM dimensions.

    Layout: two zero bytes, a type byte (0x08: unsigned byte), a byte giving the number of
    dimensions, then each dimension as a big-endian int32, then the data in C order."""
    raw = path.read_bytes()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise RuntimeError(f"{path}: not an IDX file (bad magic number)")
    if raw[2] != _UBYTE or raw[3] != ndim:
        raise RuntimeError(
            f"{path}: expected unsigned bytes in {ndim} dimensions, "
            f"found type 0x{raw[2]:02x} in {raw[3]} dimensions"
        )
    header = 4 + 4 * ndim
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">i4", count=ndim, offset=4))
    if len(raw) - header != int(np.prod(shape)):
        raise RuntimeError(f"{path}: {len(raw) - header} data bytes for shape {shape}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


class MNIST(torch.utils.data.Dataset):
    """MNIST from ``root/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte``.

    As in torchvision: ``data`` is a uint8 tensor N x 28 x 28, ``targets`` an int64 tensor N;
    ``dataset[i]`` is ``(image, label)`` with ``label`` a Python int, each passed through
    ``transform`` / ``target_transform`` when given.  Unlike torchvision the image is a 28 x 28
    uint8 numpy array rather than a PIL Image (``transforms.ToTensor`` takes it).

    ``download=True`` downloads nothing: the files must exist (``make_corpus.py`` writes them), and
    a missing file raises RuntimeError (the exception torchvision raises) naming that script.
    """

    classes: ClassVar[list[str]] = [
        "0 - zero",
        "1 - one",
        "2 - two",
        "3 - three",
        "4 - four",
        "5 - five",
        "6 - six",
        "7 - seven",
        "8 - eight",
        "9 - nine",
    ]

    def __init__(
        self,
        root: str | os.PathLike,
        train: bool = True,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        download: bool = False,
    ) -> None:
        self.root = os.path.expanduser(root) if isinstance(root, str) else root
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        prefix = "train" if train else "t10k"
        images = Path(self.raw_folder) / f"{prefix}-images-idx3-ubyte"
        labels = Path(self.raw_folder) / f"{prefix}-labels-idx1-ubyte"
        missing = [str(p) for p in (images, labels) if not p.is_file()]
        if missing:
            raise RuntimeError(
                f"MNIST not found: {', '.join(missing)} missing. This is the corpus's torchvision "
                f"stand-in, which never downloads (download={download} makes no difference); "
                f"make the synthetic files with `{_MAKE}`."
            )
        data = _read_idx(images, 3)
        targets = _read_idx(labels, 1)
        if len(data) != len(targets):
            raise RuntimeError(f"{images}: {len(data)} images but {len(targets)} labels")
        self.data = torch.from_numpy(data.copy())
        self.targets = torch.from_numpy(targets.astype(np.int64))

    @property
    def raw_folder(self) -> str:
        return os.path.join(self.root, "MNIST", "raw")

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.classes)}

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        img, target = self.data[index].numpy(), int(self.targets[index])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __repr__(self) -> str:
        split = "Train" if self.train else "Test"
        lines = [
            f"Dataset {type(self).__name__} (corpus stand-in)",
            f"    Number of datapoints: {len(self)}",
            f"    Root location: {self.root}",
            f"    Split: {split}",
        ]
        if self.transform is not None:
            lines.append(f"    Transform: {self.transform!r}")
        return "\n".join(lines)


__all__ = ["MNIST"]
