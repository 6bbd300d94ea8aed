"""peers.py's setup: the lm sizes (a generated recipe per size), and the environment a result
is saved with (fingerprint, versions, the MFU peak, nvidia-smi on CUDA)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

PEER_PACKAGES = {"lightning": "lightning", "accelerate": "accelerate"}

# lm sizes: the built-in presets (1m, 5m, 20m), and for a GPU, where MFU needs large matmuls,
# GPT-2 small's and medium's shapes (n_layer, n_head, d_model, block) on lm's byte vocabulary
# (86 M and 303 M parameters), with GPT-3's learning rates for those sizes. At the recipe's batch
# of 32 windows of 1024 tokens, a 300m step is about 6 x 303e6 x 32768 = 60 TFLOP.
LM_SIZES: dict[str, tuple[tuple[int, int, int, int] | None, float]] = {
    "1m": (None, 1e-3),
    "5m": (None, 1e-3),
    "20m": (None, 1e-3),
    "86m": ((12, 12, 768, 1024), 6e-4),
    "300m": ((24, 16, 1024, 1024), 3e-4),
}

RECIPE = '''"""lm at size {size}, for benchmarks/peers.py: generated, do not edit."""

from torchpace.workloads import lm as _lm
from torchpace.workloads.lm import GPTConfig, count_samples, count_tokens, loss, optimizer

__all__ = ["count_samples", "count_tokens", "loss", "optimizer"]
batch_size = _lm.batch_size
lr = {lr!r}
{register}

def model():
    return _lm.model({size!r})


def dataset(split="train", seed=0):
    return _lm.dataset(split, seed, preset={size!r})
'''


def key(workload: str, lm_size: str) -> str:
    """The name of a workload's tune directory: lm at another size is another recipe."""
    return f"lm-{lm_size}" if workload == "lm" and lm_size != "1m" else workload


def recipe_spec(workload: str, lm_size: str, root: Path) -> str:
    """What load_recipe and `torchpace tune` read: the workload, or a written lm recipe."""
    if key(workload, lm_size) == workload:
        return workload
    shape, lr = LM_SIZES[lm_size]
    register = ""
    if shape is not None:
        n_layer, n_head, d_model, block = shape
        cfg = f"GPTConfig(n_layer={n_layer}, n_head={n_head}, d_model={d_model}, block={block})"
        register = f"_lm.PRESETS.setdefault({lm_size!r}, {cfg})\n"
    path = root / f"lm_{lm_size}.py"
    path.write_text(RECIPE.format(size=lm_size, lr=lr, register=register))
    return str(path)


def environment(device: Any) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    from _provenance import sh, started

    from torchpace.measure.env import fingerprint
    from torchpace.measure.peaks import known_gpu_peak

    env = started(fingerprint(device).to_dict())
    fp = env["fingerprint"]
    versions = {}
    for name in PEER_PACKAGES.values():
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = "not installed"
    env["peer_versions"] = versions
    vendor = known_gpu_peak(fp["device_name"], "bf16") if device.type == "cuda" else None
    measured = fp["peak_tflops_bf16"] or fp["peak_tflops_fp32"]
    env["mfu_peak_tflops"] = vendor or measured
    env["mfu_peak_is"] = (
        "the GPU's dense bf16 peak (vendor figure, torchpace.measure.peaks)"
        if vendor
        else "the measured bf16 matmul peak (fp32 where no bf16)"
    )
    if device.type == "cuda":
        env["nvidia_smi"] = sh("nvidia-smi")
        env["nvidia_smi_query"] = sh(
            "nvidia-smi",
            "--query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit",
            "--format=csv",
        )
    return env


def installed(contestant: str) -> bool:
    return importlib.util.find_spec(PEER_PACKAGES[contestant]) is not None
