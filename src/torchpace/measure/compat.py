"""What differs between the torch versions torchpace supports (``torch>=2.4``), in one place.

- **TF32 / float32 matmul precision.** torch 2.9 added per-backend ``fp32_precision`` settings
  (``torch.backends.cuda.matmul.fp32_precision = "tf32"``; Hugging Face's ``tf32=True`` uses
  them). Once a process has set one of them, the legacy getters (``allow_tf32``,
  ``get_float32_matmul_precision()``) raise a RuntimeError about mixing the two APIs, so every
  read here tries the legacy getter and falls back to the new settings. The legacy setter
  ``set_float32_matmul_precision`` keeps working in both and sets the new values too.
- **Mixed precision.** ``torch.amp.GradScaler(device)`` and ``torch.amp.autocast`` are the only
  forms used, called directly (both exist from 2.4); ``torch.cuda.amp`` is deprecated.
- **Attention backends.** ``torch.nn.attention.sdpa_kernel`` (2.3+), not the removed
  ``torch.backends.cuda.sdp_kernel``.
- **Compilation.** ``torch.compiler.is_compiling`` (2.3+) is called directly;
  ``is_dynamo_supported`` moved between versions and is read defensively here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def has_fp32_precision_api() -> bool:
    """torch >= 2.9: per-backend ``fp32_precision`` settings exist."""
    return _read(lambda: _backend("cuda.matmul.fp32_precision")) is not None


def _backend(path: str) -> Any:
    """``torch.backends.<path>`` read by name: which attributes exist depends on the version."""
    obj: Any = torch.backends
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _read(get: Callable[[], Any]) -> Any:
    try:
        return get()
    except (AttributeError, RuntimeError):
        return None


def _resolved(*chain: Callable[[], Any]) -> str | None:
    """The first setting in ``chain`` that is not "none" (the new API's "inherit")."""
    for get in chain:
        value = _read(get)
        if isinstance(value, str) and value != "none":
            return value
    return None


def _cuda_matmul_new() -> str | None:
    return _resolved(
        lambda: _backend("cuda.matmul.fp32_precision"),
        lambda: _backend("fp32_precision"),
    )


def _cudnn_conv_new() -> str | None:
    return _resolved(
        lambda: _backend("cudnn.conv.fp32_precision"),
        lambda: _backend("cudnn.fp32_precision"),
        lambda: _backend("fp32_precision"),
    )


def _cpu_matmul_new() -> str | None:
    return _resolved(
        lambda: _backend("mkldnn.matmul.fp32_precision"),
        lambda: _backend("mkldnn.fp32_precision"),
        lambda: _backend("fp32_precision"),
    )


def tf32_matmul() -> bool:
    """Whether CUDA float32 matmuls may run in TF32, whichever API set it."""
    legacy = _read(lambda: bool(torch.backends.cuda.matmul.allow_tf32))
    if legacy is not None:
        return bool(legacy)
    return _cuda_matmul_new() == "tf32"


def tf32_cudnn() -> bool:
    """Whether cuDNN float32 convolutions may run in TF32 (torch's default: yes)."""
    legacy = _read(lambda: bool(torch.backends.cudnn.allow_tf32))
    if legacy is not None:
        return bool(legacy)
    return _cudnn_conv_new() in ("tf32", None)


def float32_matmul_precision() -> str:
    """ "highest", "high" or "medium", as ``torch.get_float32_matmul_precision()`` would say,
    also after a script set the new per-backend API (where that getter raises)."""
    legacy = _read(torch.get_float32_matmul_precision)
    if legacy is not None:
        return str(legacy)
    cpu, cuda = _cpu_matmul_new(), _cuda_matmul_new()
    if "bf16" in (cpu, cuda):
        return "medium"
    if "tf32" in (cpu, cuda):
        return "high"
    return "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """The legacy setter: it works under both APIs and sets the per-backend values as well."""
    if precision not in ("highest", "high", "medium"):
        raise ValueError(f"matmul_precision must be highest, high or medium; got {precision!r}")
    torch.set_float32_matmul_precision(precision)


def sdpa_kernel(backend_name: str) -> Any:
    """The context manager that restricts scaled-dot-product attention to one backend
    (``"math"``, ``"flash"``, ``"efficient"``, ``"cudnn"``)."""
    from torch.nn.attention import SDPBackend
    from torch.nn.attention import sdpa_kernel as _sdpa_kernel

    names = {
        "math": "MATH",
        "flash": "FLASH_ATTENTION",
        "efficient": "EFFICIENT_ATTENTION",
        "cudnn": "CUDNN_ATTENTION",
    }
    member = getattr(SDPBackend, names.get(backend_name, backend_name.upper()), None)
    if member is None:
        raise ValueError(
            f"attention backend {backend_name!r} is not in this torch {torch.__version__}; "
            f"choose one of {', '.join(n for n, m in names.items() if hasattr(SDPBackend, m))}"
        )
    return _sdpa_kernel(member)


def dynamo_supported() -> bool:
    """Whether torch.compile's frontend runs on this Python and platform."""
    try:
        from torch._dynamo.eval_frame import is_dynamo_supported
    except ImportError:  # moved or gone in this version: let compile itself say why
        return True
    return bool(is_dynamo_supported())


def bf16_native_cuda(device: torch.device) -> bool:
    """Whether a CUDA device runs bf16 natively (compute capability 8.0+, Ampere on). Older
    cards emulate it, which ``torch.cuda.is_bf16_supported()`` counts as support unless told
    ``including_emulation=False`` (an argument added in torch 2.5)."""
    major, _minor = torch.cuda.get_device_capability(device)
    return major >= 8
