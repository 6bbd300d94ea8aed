"""The speed settings in effect once the script is warm: precision, math modes, memory format,
loaders, optimizers, compilation and data parallelism."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from torchpace.doctor.records import Records
from torchpace.measure import compat
from torchpace.speedups.memory_format import channels_last_hazard


def _conv_weights_channels_last(modules: list[nn.Module]) -> bool | None:
    for root in modules:
        for m in root.modules():
            if isinstance(m, nn.Conv2d):
                w = m.weight
                return bool(w.is_contiguous(memory_format=torch.channels_last))
    return None


def _has_conv(modules: list[nn.Module]) -> bool:
    return any(isinstance(m, nn.Conv2d) for root in modules for m in root.modules())


def snapshot(
    records: Records,
    modules: list[nn.Module],
    *,
    autocast: set[str],
    channels_last_input: bool | None,
) -> dict[str, Any]:
    names = {type(m).__name__ for m in modules}
    return {
        "autocast": sorted(autocast),  # e.g. ["cpu:bfloat16"]; empty: float32 forward
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        # read through compat: the legacy getters raise once a script used the fp32_precision API
        "tf32_matmul": compat.tf32_matmul(),
        "tf32_cudnn": compat.tf32_cudnn(),
        "float32_matmul_precision": compat.float32_matmul_precision(),
        "conv_model": _has_conv(modules),
        "channels_last_input": channels_last_input,
        "channels_last_weights": _conv_weights_channels_last(modules),
        # why channels_last would break a convolution here (oneDNN#6035), or None
        "channels_last_hazard": next(filter(None, map(channels_last_hazard, modules)), None),
        "optimizers": [o.to_dict() for o in records.optimizers.values()],
        "compiled": bool(names & {"OptimizedModule"}),
        "data_parallel": "DataParallel" in names,
        "ddp": "DistributedDataParallel" in names,
        "anomaly_detection": bool(torch.is_anomaly_enabled()),
        "models": sorted(names),
        # the dtypes the trained models' parameters hold: "float64" means float64 compute
        "param_dtypes": sorted(
            {str(p.dtype).removeprefix("torch.") for m in modules for p in m.parameters()}
        ),
    }
