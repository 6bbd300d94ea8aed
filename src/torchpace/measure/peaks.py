"""Peak dense FLOP/s for MFU: vendor figures for known GPUs, measured matmul rates otherwise.

Vendor figures are dense (no 2:4 sparsity), from NVIDIA's data sheets for the SXM parts.
"""

from __future__ import annotations

# name fragment -> TFLOP/s by math mode. Checked in order: "H200" before "H100"; PCIe parts of
# the same name run lower clocks, so their MFU comes out slightly low, never flattering.
GPU_PEAK_TFLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H200", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    ("H100", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    ("A100", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}),
    ("L40S", {"bf16": 362.0, "fp16": 362.0, "tf32": 183.0, "fp32": 91.6}),
    ("V100", {"fp16": 125.0, "fp32": 15.7}),
)


def known_gpu_peak(device_name: str, mode: str) -> float | None:
    for fragment, peaks in GPU_PEAK_TFLOPS:
        if fragment in device_name:
            return peaks.get(mode)
    return None
