"""Peak dense FLOP/s for MFU: vendor figures for known GPUs, measured matmul rates otherwise.

Vendor figures are dense (no 2:4 sparsity; the data sheets' sparse figures halved), from NVIDIA's
data sheets. The PCIe and NVL parts run lower clocks and power than the SXM ones and have their
own rows; torch.cuda.get_device_name() says "NVIDIA H100 PCIe", "NVIDIA H100 NVL",
"NVIDIA H200 NVL", and "NVIDIA H100 80GB HBM3" / "NVIDIA H200" for the SXM parts.
"""

from __future__ import annotations

# name fragment -> TFLOP/s by math mode. Checked in order: the first fragment found in the
# device's name wins, so the PCIe and NVL rows come before their SXM part's.
GPU_PEAK_TFLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H200 NVL", {"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    ("H200", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    ("H100 NVL", {"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    ("H100 PCIe", {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.2}),
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
