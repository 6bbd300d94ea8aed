"""The technique catalogue: every technique of the guides, as data.

Every lint rule, doctor finding, tune trial and plan entry names one of these ids. This module
must stay importable without torch (``torchpace lint`` imports it).

The entries explain each technique in this project's own words and cite the guides where it
appears. ``measured`` stays empty until a figure has been measured on named hardware; no entry
states a speed-up that a guide or a measurement does not back.
"""

from __future__ import annotations

from collections.abc import Iterable

from torchpace.catalog import compute, distributed, loading, memory, precision
from torchpace.catalog.loading import loader_workers, trial_workers
from torchpace.catalog.precision import AMP_CHOICES, FUSED_KERNELS, fused_on
from torchpace.catalog.schema import GUIDES, Device, Family, Guide, Technique

__all__ = [
    "AMP_CHOICES",
    "FUSED_KERNELS",
    "GUIDES",
    "TECHNIQUES",
    "Device",
    "Family",
    "Guide",
    "Technique",
    "for_device",
    "fused_on",
    "get",
    "ids",
    "loader_workers",
    "trial_workers",
]

# Ordered by family (in the order of ``Family``), then from the most to the least common case.
TECHNIQUES: tuple[Technique, ...] = (
    loading.ENTRIES + precision.ENTRIES + compute.ENTRIES + memory.ENTRIES + distributed.ENTRIES
)


def get(technique_id: str) -> Technique:
    """Return the technique with this id, or raise KeyError naming the known ids."""
    for t in TECHNIQUES:
        if t.id == technique_id:
            return t
    known = ", ".join(t.id for t in TECHNIQUES)
    raise KeyError(f"unknown technique id {technique_id!r}; known ids: {known}")


def ids() -> tuple[str, ...]:
    """All technique ids, in catalogue order."""
    return tuple(t.id for t in TECHNIQUES)


def for_device(device: Device) -> Iterable[Technique]:
    """The techniques that apply to ``device``, in catalogue order."""
    return (t for t in TECHNIQUES if device in t.devices)
