"""The catalogue's schema: guides, the Technique record and helpers for writing entries.

Like the whole catalogue, this module must not import torch.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Literal

Device = Literal["cpu", "cuda"]
Family = Literal[
    "loading",
    "batching",
    "precision",
    "optimizer",
    "compute",
    "syncs",
    "memory",
    "evaluation",
    "debug",
    "distributed",
    "schedule",
]


@dataclass(frozen=True)
class Guide:
    """One of the five guides the catalogue is built from (../shared/guides)."""

    key: str
    title: str
    author: str
    language: str


GUIDES: dict[str, Guide] = {
    g.key: g
    for g in (
        Guide("tuning-guide", "PyTorch Performance Tuning Guide", "Szymon Migacz", "en"),
        Guide(
            "faster-training-memo",
            "PyTorch | Tricks for Faster Training (after Lorenz Kuhn's 2021 guide)",
            "memo",
            "en",
        ),
        Guide("single-gpu-ru", "Рекомендации по ускорению тренировок на одной GPU", "—", "ru"),
        Guide("seven-tips-zh", "7個提升PyTorch性能的技巧 (PyTorch Lightning team)", "—", "zh"),
        Guide("faster-on-gpus", "Techniques to make PyTorch code run faster on GPUs", "—", "en"),
    )
}


@dataclass(frozen=True)
class Technique:
    """One speed technique. ``id`` is stable: it is stored in plans, results and rule metadata."""

    id: str
    title: str
    family: Family
    mechanism: str  # why it is faster
    helps_when: str
    hurts_when: str
    measured: str  # what was measured on this project's hardware, naming it; "" if not yet
    changes_numerics: bool
    devices: tuple[Device, ...]
    guides: tuple[str, ...]  # keys of GUIDES
    how: str  # a minimal code example of the technique applied
    # Same arithmetic per sample, but random numbers drawn from other streams or in another
    # order (loader workers seed their own generators; a persistent iterator skips the base
    # seed the main generator gives each epoch's workers), so a seeded run's dropout masks and
    # augmentations differ from the baseline's. The guard then judges by the seed band.
    changes_random_stream: bool = False
    # A setting of the whole process (a backend flag), not of the training step: it also
    # changes evaluation, generation and whatever else the script runs outside its steps, for
    # better or worse. The tune measures such a plan's whole run when the run is short enough.
    process_wide: bool = False


def code(text: str) -> str:
    """A code example written indented inside an entry module, returned flush left."""
    return textwrap.dedent(text).strip("\n")


BOTH: tuple[Device, ...] = ("cpu", "cuda")
CUDA: tuple[Device, ...] = ("cuda",)
