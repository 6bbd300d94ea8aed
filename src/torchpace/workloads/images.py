"""Image data for the ``cnn`` workload: class-conditional synthetic images and a CIFAR-10 reader.

Both produce an ``ImageDataset``: uint8 HWC images decoded per sample into normalised float CHW
tensors, as torchvision's CIFAR10 with ``ToTensor`` + ``Normalize`` does, so the per-sample CPU
work of a real image pipeline is there for loader workers to take off the training loop.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

NUM_CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)
# Per-channel mean and std of CIFAR-10's training set (the values torchvision examples use).
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


class ImageDataset(Dataset[tuple[torch.Tensor, int]]):
    """uint8 images of shape (N, 32, 32, 3) and integer labels."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        if images.dtype != torch.uint8 or images.ndim != 4 or images.shape[1:] != (32, 32, 3):
            raise ValueError(f"images must be uint8 (N, 32, 32, 3), got {tuple(images.shape)}")
        if labels.shape != (images.shape[0],):
            raise ValueError("labels must be one per image")
        self.images = images
        self.labels = labels.long()
        self._mean = torch.tensor(CIFAR_MEAN).view(3, 1, 1)
        self._std = torch.tensor(CIFAR_STD).view(3, 1, 1)

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        img = self.images[index].permute(2, 0, 1).float().div_(255.0)
        return (img - self._mean) / self._std, int(self.labels[index])


def synthetic_images(n: int, *, seed: int, prototype_seed: int = 1234) -> ImageDataset:
    """``n`` images drawn from 10 class prototypes with noise and random shifts.

    The prototypes (smooth colour patterns) depend only on ``prototype_seed``, so train and
    validation splits made with different ``seed`` share classes. The same arguments always give
    the same bytes.
    """
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    proto_gen = torch.Generator().manual_seed(prototype_seed)
    coarse = torch.rand(NUM_CLASSES, 3, 4, 4, generator=proto_gen)
    prototypes = F.interpolate(coarse, size=(32, 32), mode="bicubic", align_corners=False)
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, NUM_CLASSES, (n,), generator=gen)
    images = prototypes[labels]
    # Per-sample brightness jitter, shift and pixel noise make the task learnable but not trivial.
    images = images * (0.6 + 0.8 * torch.rand(n, 1, 1, 1, generator=gen))
    shifts = torch.randint(-8, 9, (n, 2), generator=gen)
    for i in range(n):
        images[i] = torch.roll(
            images[i], shifts=(int(shifts[i, 0]), int(shifts[i, 1])), dims=(1, 2)
        )
    images = images + 0.6 * torch.randn(images.shape, generator=gen)
    u8 = (images.clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).contiguous()
    return ImageDataset(u8, labels)


_TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
_RECORD = 1 + 3 * 32 * 32  # binary format: one label byte, then 3072 pixel bytes (R, G, B planes)


class _CifarUnpickler(pickle.Unpickler):
    """Loads CIFAR-10 python batches without executing arbitrary code: numpy arrays only."""

    _ALLOWED: ClassVar[set[tuple[str, str]]] = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a CIFAR batch")
        return super().find_class(module, name)


def _find_dir(root: Path, *names: str) -> Path | None:
    for candidate in (root, *(root / n for n in names)):
        markers = ("data_batch_1", "data_batch_1.bin", "test_batch", "test_batch.bin")
        if any((candidate / m).is_file() for m in markers):
            return candidate
    return None


def read_cifar10(root: str | Path, split: str = "train") -> ImageDataset:
    """Read CIFAR-10 from a local directory in the python (pickled) or binary batch format.

    ``root`` may be the extracted ``cifar-10-batches-py`` / ``cifar-10-batches-bin`` directory
    or its parent. ``split`` is ``"train"`` (data_batch_1..5) or ``"test"`` (test_batch).
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    root = Path(root)
    found = _find_dir(root, "cifar-10-batches-py", "cifar-10-batches-bin")
    if found is None:
        raise FileNotFoundError(
            f"no CIFAR-10 batches under {root}: expected data_batch_1 (python format) or "
            "data_batch_1.bin (binary format), as in the archives from cs.toronto.edu/~kriz"
        )
    names = _TRAIN_BATCHES if split == "train" else ("test_batch",)
    if (found / f"{names[0]}.bin").exists():
        return _read_binary([found / f"{n}.bin" for n in names])
    return _read_python([found / n for n in names])


def _read_python(paths: list[Path]) -> ImageDataset:
    import numpy as np

    images, labels = [], []
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"missing CIFAR-10 batch {p}")
        with p.open("rb") as f:
            batch = _CifarUnpickler(f, encoding="bytes").load()
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 3072:
            raise ValueError(f"{p}: expected data of shape (N, 3072), got {data.shape}")
        images.append(torch.from_numpy(data.reshape(-1, 3, 32, 32).copy()))
        labels.append(torch.tensor(list(batch[b"labels"]), dtype=torch.long))
    chw = torch.cat(images)
    return ImageDataset(chw.permute(0, 2, 3, 1).contiguous(), torch.cat(labels))


def _read_binary(paths: list[Path]) -> ImageDataset:
    images, labels = [], []
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"missing CIFAR-10 batch {p}")
        raw = p.read_bytes()
        if len(raw) % _RECORD:
            raise ValueError(f"{p}: size {len(raw)} is not a multiple of the {_RECORD}-byte record")
        records = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(-1, _RECORD)
        labels.append(records[:, 0].long())
        images.append(records[:, 1:].reshape(-1, 3, 32, 32))
    chw = torch.cat(images)
    return ImageDataset(chw.permute(0, 2, 3, 1).contiguous(), torch.cat(labels))
