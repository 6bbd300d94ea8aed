"""Process-wide math settings: cuDNN autotuning and reduced-precision float32 matmuls.

These are global flags, so ``set_fast_math`` returns how to put them back (``FastMath.restore``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from torchpace.measure import compat
from torchpace.measure.env import bf16_supported
from torchpace.speedups.applied import Applied, done


@dataclass(frozen=True)
class FastMath:
    """What ``set_fast_math`` changed, and the previous values to restore."""

    applied: tuple[Applied, ...]
    matmul_precision: str
    cudnn_benchmark: bool

    def restore(self) -> None:
        compat.set_float32_matmul_precision(self.matmul_precision)
        torch.backends.cudnn.benchmark = self.cudnn_benchmark


def set_fast_math(device: torch.device | str, *, matmul_precision: str | None = None) -> FastMath:
    """Turn on the fast-math settings ``device`` benefits from.

    CUDA: ``cudnn.benchmark`` (autotune each new convolution shape once; pays off when input
    shapes repeat) and float32 matmuls in TF32 (``matmul_precision="high"``).
    CPU with native bf16 (AMX / AVX512-BF16): float32 matmuls may run in bf16 inside oneDNN
    (``"medium"``). Elsewhere on CPU there is no faster float32 path, so nothing changes.
    Both change float32 results at rounding level; autocast runs make them moot for matmuls.
    """
    device = torch.device(device)
    before = FastMath((), compat.float32_matmul_precision(), torch.backends.cudnn.benchmark)
    applied: list[Applied] = []
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        applied.append(done("cudnn-benchmark", ["torch.backends.cudnn.benchmark = True"]))
        precision = matmul_precision or "high"
    elif bf16_supported(device):
        precision = matmul_precision or "medium"
    else:
        precision = matmul_precision or before.matmul_precision
    compat.set_float32_matmul_precision(precision)
    changed = precision != before.matmul_precision
    applied.append(
        done(
            "tf32",
            [f"float32 matmul precision {before.matmul_precision} -> {precision}"]
            if changed
            else [],
            reason="" if changed else f"float32 matmul precision stays {precision} on {device}",
        )
    )
    return FastMath(tuple(applied), before.matmul_precision, before.cudnn_benchmark)
