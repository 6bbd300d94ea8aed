"""Training checkpoints: written atomically, read with ``torch.load(weights_only=True)``.

A checkpoint holds everything ``fit(resume=...)`` needs to continue exactly where the run was:
model, optimizer, GradScaler and scheduler state, the step, the position in the epoch, and the
random number generators (torch CPU and CUDA, Python, NumPy) both at the start of the epoch
(which fixes the epoch's shuffle and workers' seeds) and at the moment of saving. No pickle of
our own objects: only tensors, numbers, strings, lists, tuples and dicts, which
``weights_only=True`` accepts.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from torchpace._files import atomic_writer

FORMAT = 1  # bump when the layout changes; load() refuses other versions


def rng_state(generators: Sequence[torch.Generator] = ()) -> dict[str, Any]:
    """Every RNG a training step may draw from; ``generators``: the loader's own (its shuffle
    and its workers' seeds come from them when it was given one)."""
    version, state, gauss = random.getstate()
    np_kind, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state(legacy=True)
    assert isinstance(np_keys, np.ndarray)  # the legacy tuple form: (name, keys, pos, ...)
    out: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": [version, list(state), gauss],
        "numpy": [
            np_kind,
            torch.from_numpy(np_keys.astype(np.int64)),
            np_pos,
            np_has_gauss,
            np_gauss,
        ],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state_all()
    out["generators"] = [g.get_state() for g in generators]
    return out


def set_rng_state(state: dict[str, Any], generators: Sequence[torch.Generator] = ()) -> None:
    torch.set_rng_state(state["torch"])
    version, values, gauss = state["python"]
    random.setstate((version, tuple(values), gauss))
    kind, keys, pos, has_gauss, gauss_np = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss_np))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    saved = state.get("generators", [])
    if len(saved) != len(generators):
        raise ValueError(
            f"the checkpoint holds {len(saved)} loader generator state(s), this loader has "
            f"{len(generators)}: resume with a loader built like the one that was checkpointed"
        )
    for g, g_state in zip(generators, saved, strict=True):
        g.set_state(g_state)


def save(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` to ``path`` atomically: a crash mid-write leaves the old file intact."""
    with atomic_writer(path, "wb") as f:
        torch.save({"format": FORMAT, **state}, f)
    return Path(path)


def load(path: str | Path, *, map_location: torch.device | str = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}; pass the path fit() printed or wrote")
    state: dict[str, Any] = torch.load(path, map_location=map_location, weights_only=True)
    if state.get("format") != FORMAT:
        raise ValueError(
            f"{path}: checkpoint format {state.get('format')!r}, this torchpace reads {FORMAT}"
        )
    return state


def latest(directory: str | Path) -> Path | None:
    """The newest ``step-*.pt`` in ``directory`` (by step number), or None."""
    found = sorted(Path(directory).glob("step-*.pt"), key=lambda p: int(p.stem.split("-")[1]))
    return found[-1] if found else None
