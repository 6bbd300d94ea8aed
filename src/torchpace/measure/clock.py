"""Reading time honestly on each device: CUDA work is asynchronous, so synchronise (or use
events) before reading a host clock."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"``/None picks CUDA when available, else CPU. Any other value is validated."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} was asked for, but CUDA is not available here")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device type {dev.type!r} is not supported; use 'cpu' or 'cuda'")
    return dev


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], device: torch.device) -> float:
    """Wall seconds for ``fn()``, with the device drained before and after."""
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - t0


class StepClock:
    """Per-step timing. On CUDA each step is bracketed by events, read after one synchronize at
    the end, so timing adds no sync inside the loop; on CPU it reads ``perf_counter``."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._pending: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._host: list[float] = []
        self._t0 = 0.0
        self._start: torch.cuda.Event | None = None

    def start(self) -> None:
        if self.device.type == "cuda":
            self._start = torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._t0 = time.perf_counter()

    def stop(self) -> None:
        if self.device.type == "cuda":
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            assert self._start is not None, "StepClock.stop() called before start()"
            self._pending.append((self._start, end))
        else:
            self._host.append(time.perf_counter() - self._t0)

    def seconds(self) -> list[float]:
        """All step durations so far, in seconds (synchronises on CUDA)."""
        if self.device.type == "cuda":
            synchronize(self.device)
            return [s.elapsed_time(e) / 1e3 for s, e in self._pending]
        return list(self._host)
