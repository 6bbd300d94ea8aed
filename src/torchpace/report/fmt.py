"""Number and name formatting shared by the doctor and tune documents: one wording for a
duration, a size, a share or a file:line, in the terminal and on the page alike."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import Any

from torchpace.measure.noise import peak_loaded

DASH = "—"


def ms(seconds: float | None, digits: int = 1) -> str:
    return DASH if seconds is None else f"{seconds * 1e3:.{digits}f}"


def mib(n: float | None) -> str:
    return DASH if n is None else f"{n / 2**20:,.0f} MiB"


def pct(share: float | None, digits: int = 0) -> str:
    return DASH if share is None else f"{share:.{digits}%}"


def times(x: float | None) -> str:
    return DASH if x is None else f"{x:.2f}×"


def spread(median: float | None, lo: float | None, hi: float | None) -> str:
    """'1.85× [1.75–1.90]', or the median alone when there is no spread."""
    if median is None:
        return DASH
    if lo is None or hi is None:
        return times(median)
    return f"{median:.2f}× [{lo:.2f}–{hi:.2f}]"


def where(path: str | None, line: int | None, cwd: str | None = None) -> str:
    """``path:line``, relative to ``cwd`` (the run's working directory) when it is inside it."""
    if path is None:
        return DASH
    shown = path
    if cwd and os.path.isabs(path):
        rel = os.path.relpath(path, cwd)
        if not rel.startswith(".."):
            shown = rel
    return shown if line is None else f"{shown}:{line}"


def command_line(argv: Sequence[str] | None) -> str:
    return DASH if not argv else shlex.join(argv)


# What a ``*_share`` of a finding's ``measured`` is a share of: the step, but for padding.
_SHARE_OF = {"padding_share": "of the tokens"}


def measured(values: dict[str, Any]) -> str:
    """A finding's ``measured`` figures in words: ``{"data_share": 0.4}`` -> 'data 40%'."""
    parts = []
    for key, value in values.items():
        if isinstance(value, bool) or value is None:
            continue
        if key.endswith("_share") and isinstance(value, float):
            of = _SHARE_OF.get(key, "of the step")
            parts.append(f"{key[: -len('_share')].replace('_', ' ')} {value:.0%} {of}")
        elif key.endswith("_ms_per_step"):
            parts.append(f"{key[: -len('_ms_per_step')].replace('_', ' ')} {value:.1f} ms/step")
        elif key.endswith("_ratio"):
            parts.append(f"{key[: -len('_ratio')].replace('_', ' ')} {value:.1f}×")
        elif isinstance(value, float):
            parts.append(f"{key.replace('_', ' ')} {value:.3g}")
        elif isinstance(value, int | str):
            parts.append(f"{key.replace('_', ' ')} {value}")
    return ", ".join(parts) or DASH


def environment(env: dict[str, Any]) -> str:
    """Device, versions, cores and peak rates in one line."""
    device = env.get("device_name") or env.get("device") or "?"
    parts = [f"{device} ({env.get('device', '?')})"]
    versions = [f"torch {env.get('torch_version', '?')}"]
    if env.get("cuda_version"):
        versions.append(f"CUDA {env['cuda_version']}")
    if env.get("python_version"):
        versions.append(f"Python {env['python_version']}")
    parts.append(", ".join(versions))
    if env.get("cores"):
        parts.append(f"{env['cores']} cores, {env.get('torch_threads', '?')} torch threads")
    peaks = [
        f"{mode} {env[key]:.2f}"
        for mode, key in (("fp32", "peak_tflops_fp32"), ("bf16", "peak_tflops_bf16"))
        if env.get(key)
    ]
    loaded = (
        f" (beside {env['peak_load']:.2f} cores of other processes' work: reads low, not cached)"
        if peaks and peak_loaded(env)
        else ""
    )
    parts.append(
        f"measured peak TFLOP/s: {', '.join(peaks)}{loaded}"
        if peaks
        else "peak FLOP/s not measured"
    )
    return "; ".join(parts)
