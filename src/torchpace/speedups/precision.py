"""Mixed precision: which autocast dtype a device should train in, the context, and the scaler.

bf16 keeps float32's exponent range, so it needs no loss scaling; fp16 does (a GradScaler), and
only pays off on CUDA. On a CPU, bf16 pays off only with native bf16 arithmetic (AVX512-BF16 or
AMX); elsewhere it is emulated and slower than float32, so ``auto`` stays in float32 there.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from torchpace.catalog import AMP_CHOICES
from torchpace.measure.env import bf16_supported
from torchpace.speedups.applied import Applied, done, skipped

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Precision:
    """The precision a run trains in: ``dtype`` None is float32 with autocast off."""

    device_type: str
    dtype: torch.dtype | None

    @property
    def name(self) -> str:
        return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(self.dtype, "off")  # type: ignore[arg-type]

    def autocast(self) -> contextlib.AbstractContextManager[object]:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def make_scaler(self) -> torch.amp.GradScaler | None:
        """A GradScaler for fp16 (its gradients underflow without loss scaling), else None."""
        if self.dtype is torch.float16:
            return torch.amp.GradScaler(self.device_type)
        return None


def choose_precision(device: torch.device | str, amp: str = "auto") -> tuple[Precision, Applied]:
    """The precision ``amp`` asks for, where ``device`` can run it; the record says what and why.

    ``auto``: bf16 where the device computes it natively, otherwise float32 (fp16 is never
    chosen automatically: it needs a scaler and can overflow). An explicit choice the device
    cannot run falls back to float32 with a SpeedupWarning.
    """
    if amp not in AMP_CHOICES:
        raise ValueError(f"amp must be one of {', '.join(AMP_CHOICES)}; got {amp!r}")
    device = torch.device(device)
    off = Precision(device.type, None)
    if amp == "off":
        return off, Applied("amp-bf16", False, (), "amp is off: training in float32")
    if amp == "auto":
        if bf16_supported(device):
            return Precision(device.type, torch.bfloat16), done(
                "amp-bf16", [f"autocast to bfloat16 on {device.type}"]
            )
        return off, Applied(
            "amp-bf16", False, (), f"{device.type} has no native bf16: float32 is faster there"
        )
    technique = f"amp-{amp}"
    if amp == "fp16" and device.type != "cuda":
        return off, skipped(
            technique, f"fp16 autocast pays off on CUDA only, not {device.type}; use amp='bf16'"
        )
    if amp == "bf16" and not bf16_supported(device):
        return off, skipped(
            technique,
            f"this {device.type} has no native bf16 arithmetic, where it runs slower than "
            "float32; use amp='fp16' on an older GPU or amp='off'",
        )
    scaled = " with a GradScaler" if amp == "fp16" else ""
    return Precision(device.type, _DTYPES[amp]), done(
        technique, [f"autocast to {_DTYPES[amp]} on {device.type}{scaled}"]
    )


def autocast(
    device: torch.device | str, dtype: str = "auto"
) -> contextlib.AbstractContextManager[object]:
    """The autocast context for ``device``: ``with autocast("cpu"): loss = loss_fn(model(x))``.

    Only the forward pass and the loss go inside; backward runs outside it. Use
    ``choose_precision(device, dtype)[0].make_scaler()`` for the GradScaler fp16 needs.
    """
    precision, _ = choose_precision(device, dtype)
    return precision.autocast()
