"""The doctor's float64 estimate against the measured float32 speed-up, on small float64 models.

Each model trains in float64 and, as a twin with the same layers, in float32: steps alternate
(float64, float32, ...) and the speed-up is the ratio of their median step times (forward,
backward and an SGD step). One float64 step then runs as the doctor's probe step
(``doctor.probe.Probe``), and ``doctor.precision.estimate`` replays its calls in both
precisions, as the doctor does after a run. Two estimates are printed: from the seconds the
replay saves, and from the replay's float32/float64 time ratio applied to the whole step (the
doctor's finding, since forward, backward and the optimizer make up these steps).

    python benchmarks/float64_estimate.py --json benchmarks/results/<date>-float64-estimate.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _provenance import finished, started
from torch import nn

from torchpace.doctor.precision import estimate
from torchpace.doctor.probe import Probe
from torchpace.measure.env import fingerprint


def _tanh_mlp() -> nn.Module:  # a physics-informed network's shape: 2 inputs, tanh, 4 x 128
    layers: list[nn.Module] = [nn.Linear(2, 128), nn.Tanh()]
    for _ in range(4):
        layers += [nn.Linear(128, 128), nn.Tanh()]
    return nn.Sequential(*layers, nn.Linear(128, 1))


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 8 * 8, 10),
    )


class _LSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(16, 128, batch_first=True)
        self.out = nn.Linear(128, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.rnn(x)[0])


def _wide_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1024))


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "tanh-mlp": (_tanh_mlp, (1024, 2)),
    "cnn": (_cnn, (32, 3, 32, 32)),
    "lstm": (_LSTM, (16, 50, 16)),
    "wide-mlp": (_wide_mlp, (256, 1024)),
}


def measure(make: Callable[[], nn.Module], shape: tuple[int, ...], steps: int) -> dict[str, Any]:
    torch.manual_seed(0)
    dtypes = (torch.float64, torch.float32)
    models = {dt: make().to(dt) for dt in dtypes}
    inputs = {dt: torch.randn(*shape, dtype=dt) for dt in dtypes}
    opts = {dt: torch.optim.SGD(models[dt].parameters(), lr=1e-3) for dt in dtypes}

    def step(dt: torch.dtype) -> None:
        opts[dt].zero_grad()
        models[dt](inputs[dt]).pow(2).mean().backward()
        opts[dt].step()

    for dt in dtypes:  # warm-up
        step(dt)
        step(dt)
    times: dict[torch.dtype, list[float]] = {dt: [] for dt in dtypes}
    for _ in range(steps):
        for dt in dtypes:
            start = time.perf_counter()
            step(dt)
            times[dt].append(time.perf_counter() - start)
    f64, f32 = (statistics.median(times[dt]) for dt in dtypes)
    probe = Probe()  # the doctor's probe step: its dispatch modes and module hook
    probe.start()
    step(torch.float64)
    probe.stop()
    replay = estimate(probe.compute_calls, torch.device("cpu"), step_s=f64)
    if replay is None or replay["saved_s"] is None:
        raise SystemExit(f"no float64 estimate: {replay}")
    by_seconds = f64 / max(f64 - replay["saved_s"], 1e-9)
    by_ratio = replay["from_timed_s"] / replay["to_timed_s"]
    return {
        "float64_step_s": f64,
        "float32_step_s": f32,
        "measured": f64 / f32,
        "estimated_by_seconds_saved": by_seconds,
        "estimated_by_ratio": by_ratio,
        "ratio_of_measured": by_ratio / (f64 / f32),
        "replay": replay,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=15, help="timed steps per precision (15)")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    env = started(fingerprint(torch.device("cpu"), measure_peak=False).to_dict())
    out: dict[str, Any] = {}
    for name, (make, shape) in MODELS.items():
        r = out[name] = measure(make, shape, a.steps)
        print(
            f"{name}: float64 {r['float64_step_s'] * 1e3:.2f} ms, float32 "
            f"{r['float32_step_s'] * 1e3:.2f} ms: measured {r['measured']:.2f}x; estimated "
            f"{r['estimated_by_ratio']:.2f}x by the ratio ({r['ratio_of_measured']:.2f} of "
            f"measured), {r['estimated_by_seconds_saved']:.2f}x by the seconds saved"
        )
    finished(env)
    if a.json:
        Path(a.json).write_text(json.dumps({"environment": env, "models": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
