"""Peak memory: the CUDA caching allocator's peak, or the process's peak resident set on CPU.

On Linux the RSS high-water mark (VmHWM) can be reset by writing "5" to /proc/self/clear_refs
(Documentation/admin-guide/mm/soft-dirty.rst), so peaks can be taken per phase; elsewhere the
lifetime peak from getrusage is reported and marked as such.
"""

from __future__ import annotations

import resource
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


@dataclass(frozen=True)
class PeakMemory:
    bytes: int
    kind: str  # "cuda-allocator", "rss" (reset per phase) or "rss-lifetime"


def _can_reset_rss() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


_rss_reset = {"done": False}  # whether the last reset_peak() on CPU did reset VmHWM


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        _rss_reset["done"] = _can_reset_rss()


def _vm_hwm() -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def peak(device: torch.device) -> PeakMemory:
    if device.type == "cuda":
        return PeakMemory(int(torch.cuda.max_memory_allocated(device)), "cuda-allocator")
    hwm = _vm_hwm()
    if hwm is not None and _rss_reset["done"]:
        return PeakMemory(hwm, "rss")
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # ru_maxrss is KiB on Linux, bytes on macOS.
    return PeakMemory(int(ru if sys.platform == "darwin" else ru * 1024), "rss-lifetime")


def cuda_alloc_retries(device: torch.device) -> int:
    """cudaMalloc retries: the allocator freed its cache and tried again (fragmentation)."""
    if device.type != "cuda":
        return 0
    return int(torch.cuda.memory_stats(device).get("num_alloc_retries", 0))
