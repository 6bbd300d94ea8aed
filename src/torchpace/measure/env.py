"""Environment fingerprint: what every saved figure carries, so it names its hardware and versions.

Peak matmul FLOP/s are measured once per (device, torch version, thread count) and cached in
``$TORCHPACE_CACHE_DIR`` (default ``~/.cache/torchpace``), with the load beside the measurement:
a peak measured while other processes used the cores is used for that run only and never cached
(issue 29: 0.084 TFLOP/s cached beside another job against 0.18 quiet made every later MFU 2.2x
too high). ``torchpace env --remeasure`` measures again.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from torchpace._files import atomic_write_text
from torchpace.measure import compat
from torchpace.measure.clock import synchronize
from torchpace.measure.cores import usable_cores
from torchpace.measure.noise import MAX_FOREIGN_CORES, LoadProbe

_CPUINFO = Path("/proc/cpuinfo")


def cache_dir() -> Path:
    env = os.environ.get("TORCHPACE_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "torchpace"


@functools.lru_cache(maxsize=1)
def _cpu_flags_and_model() -> tuple[frozenset[str], str]:
    """CPU flags and model name from /proc/cpuinfo, read once per process."""
    try:
        text = _CPUINFO.read_text()
    except OSError:
        return frozenset(), platform.processor() or platform.machine()
    flags: set[str] = set()
    model = ""
    for line in text.splitlines():
        if line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[1].split())
        elif line.startswith("model name") and not model:
            model = line.split(":", 1)[1].strip()
    return frozenset(flags), model or platform.machine()


def cpu_supports_bf16() -> bool:
    """True where the CPU has native bf16 arithmetic (AVX512-BF16 or AMX), so bf16 autocast can
    pay off; without it bf16 is emulated and usually slower than fp32."""
    flags, _ = _cpu_flags_and_model()
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def bf16_supported(device: torch.device) -> bool:
    if device.type == "cuda":
        return compat.bf16_native_cuda(device)
    return cpu_supports_bf16()


@dataclass(frozen=True)
class Fingerprint:
    torch_version: str
    cuda_version: str | None
    cudnn_version: int | None
    python_version: str
    platform: str
    device: str
    device_name: str
    cpu_model: str
    cores: int
    torch_threads: int
    cpu_bf16: bool
    cpu_amx: bool
    cuda_capability: str | None
    tensor_cores: bool
    peak_tflops_fp32: float | None
    peak_tflops_bf16: float | None
    # Other processes' cores while the peaks were measured (None: not measured, or unknown).
    peak_load: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _matmul_tflops(device: torch.device, dtype: torch.dtype, n: int, reps: int = 5) -> float:
    """Median achieved TFLOP/s of an n×n×n matmul on random data (not zeros: they run faster)."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    for _ in range(2):
        torch.mm(a, b)
    times = []
    for _ in range(reps):
        synchronize(device)
        t0 = time.perf_counter()
        torch.mm(a, b)
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return 2 * n**3 / statistics.median(times) / 1e12


def peak_tflops(
    device: torch.device, *, use_cache: bool = True, remeasure: bool = False
) -> dict[str, float | None]:
    """Measured peak matmul TFLOP/s for fp32 (and bf16 where the device runs it natively) on
    ``device``, with ``load``: other processes' cores during the measurement (None where /proc
    cannot tell). Read from the on-disk cache unless ``remeasure``; written to it only when the
    measurement was quiet (load at most the noise limit, or unknown). A cache entry without a
    recorded load (written before loads were kept) is measured again."""
    _, cpu_model = _cpu_flags_and_model()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model
    key = f"{device.type}|{name}|torch {torch.__version__}|threads {torch.get_num_threads()}"
    path = cache_dir() / "peak_flops.json"
    cache: dict[str, dict[str, float | None]] = {}
    if use_cache and path.exists():
        try:
            cache = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            cache = {}  # a damaged cache is re-measured, never trusted
        if not isinstance(cache, dict):
            cache = {}
        entry = cache.get(key)
        if not remeasure and isinstance(entry, dict) and "load" in entry:
            return entry
    # Sizes large enough to reach the steady rate: 2048 on CPU (~50 ms in fp32 on 2 cores),
    # 8192 on GPU.
    n = 8192 if device.type == "cuda" else 2048
    probe = LoadProbe()
    # fp32's peak at full float32 precision, whatever the script set: in TF32 ("high") the same
    # matmul runs several times faster and every fp32 MFU after it would read too low.
    precision = compat.float32_matmul_precision()
    compat.set_float32_matmul_precision("highest")
    try:
        fp32 = _matmul_tflops(device, torch.float32, n)
    finally:
        compat.set_float32_matmul_precision(precision)
    result: dict[str, float | None] = {"fp32": fp32}
    if bf16_supported(device):
        result["bf16"] = _matmul_tflops(device, torch.bfloat16, n)
    load = probe.foreign_cores()
    result["load"] = None if load is None else round(load, 2)
    if use_cache and (load is None or load <= MAX_FOREIGN_CORES):
        cache[key] = result
        atomic_write_text(path, json.dumps(cache, indent=2, sort_keys=True))
    return result


def fingerprint(
    device: torch.device, *, measure_peak: bool = True, remeasure: bool = False
) -> Fingerprint:
    flags, cpu_model = _cpu_flags_and_model()
    cuda = device.type == "cuda"
    cap = torch.cuda.get_device_capability(device) if cuda else None
    peaks = peak_tflops(device, remeasure=remeasure) if measure_peak else {}
    cudnn = torch.backends.cudnn.version() if cuda else None
    return Fingerprint(
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda,
        cudnn_version=int(cudnn) if cudnn is not None else None,
        python_version=platform.python_version(),
        platform=platform.platform(),
        device=str(device),
        device_name=torch.cuda.get_device_name(device) if cuda else cpu_model,
        cpu_model=cpu_model,
        cores=usable_cores(),
        torch_threads=torch.get_num_threads(),
        cpu_bf16=bool(flags & {"avx512_bf16", "amx_bf16"}),
        cpu_amx=bool(flags & {"amx_bf16", "amx_tile"}),
        cuda_capability=f"{cap[0]}.{cap[1]}" if cap else None,
        # Tensor cores arrived with Volta (compute capability 7.0).
        tensor_cores=bool(cap and cap[0] >= 7),
        peak_tflops_fp32=peaks.get("fp32"),
        peak_tflops_bf16=peaks.get("bf16"),
        peak_load=peaks.get("load"),
    )
