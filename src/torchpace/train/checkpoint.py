"""Training checkpoints: written atomically, read with ``torch.load(weights_only=True)``.

A checkpoint holds everything ``fit(resume=...)`` needs to continue exactly where the run was:
model, optimizer, GradScaler and scheduler state, the step, the position in the epoch, and the
random number generators (torch CPU and CUDA, Python, NumPy) both at the start of the epoch
(which fixes the epoch's shuffle and workers' seeds) and at the moment of saving. No pickle of
our own objects: only tensors, numbers, strings, lists, tuples and dicts, which
``weights_only=True`` accepts.
"""

from __future__ import annotations

import contextlib
import random
import re
import time
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
    """Put back every RNG of ``rng_state``; its tensors may come from any device (a checkpoint
    read with a GPU ``map_location``): the setters take CPU ByteTensors."""
    state = _to(state, torch.device("cpu"))
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


# This process's start: a checkpoint's temporary file older than it was left by a save that
# was killed (atomic_writer names them ``.step-N.pt.<random>.tmp``).
_STARTED = time.time()
_STEP = re.compile(r"step-(\d+)\.pt")


def save(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` to ``path`` atomically: a crash mid-write leaves the old file intact.
    Temporary files that killed saves left beside it (up to 300 MB each) are removed."""
    path = Path(path)
    with atomic_writer(path, "wb") as f:
        torch.save({"format": FORMAT, **state}, f)
    for stale in path.parent.glob(".step-*.pt.*.tmp"):
        with contextlib.suppress(OSError):
            if stale.stat().st_mtime < _STARTED:
                stale.unlink()
    return path


# Entries holding RNG states: torch.set_rng_state and Generator.set_state take CPU ByteTensors
# only, whatever device the run trains on.
_HOST_ONLY = ("epoch_rng", "rng", "per_rank")


def _to(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value


def load(path: str | Path, *, map_location: torch.device | str = "cpu") -> dict[str, Any]:
    """The checkpoint at ``path``, its tensors on ``map_location`` except the RNG states, which
    stay on the CPU. ``fit()`` reads onto the CPU: ``load_state_dict`` puts weights and optimizer
    state on their parameters' devices (and keeps a non-fused optimizer's step count on the host,
    where a step count moved to the GPU would cost a sync each step)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}; pass the path fit() printed or wrote")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a damaged pickle fails in many ways (EOF, IndexError, ...)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(
            f"{path}: not a readable checkpoint ({first}); pass a step-N.pt that fit() wrote"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"{path}: checkpoint format {found!r}, this torchpace reads {FORMAT}")
    device = torch.device(map_location)
    if device.type != "cpu":
        state = {k: v if k in _HOST_ONLY else _to(v, device) for k, v in state.items()}
    return state


def latest(directory: str | Path) -> Path | None:
    """The newest ``step-N.pt`` in ``directory`` (by step number), or None; other files there
    (a ``step-final.pt`` someone saved, a backup) are not checkpoints of the run."""
    found = [
        (int(m.group(1)), p)
        for p in Path(directory).glob("step-*.pt")
        if (m := _STEP.fullmatch(p.name))
    ]
    return max(found)[1] if found else None
