"""Run a paired benchmark of a workload's configurations and package the result as JSON data."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Sequence
from typing import Any

from torchpace._version import __version__

SCHEMA = "torchpace.bench/1"


def run_bench(
    workload: str,
    *,
    configs: Sequence[str] = ("naive", "tuned"),
    steps: int = 40,
    block: int = 4,
    warmup: int = 3,
    device: str = "auto",
    seed: int = 0,
) -> dict[str, Any]:
    """Compare ``configs`` (the first is the baseline) on ``workload``: ``steps`` measured steps
    per configuration, in interleaved rounds of ``block`` steps, after ``warmup`` steps each."""
    from torchpace.bench.configs import CONFIGS
    from torchpace.bench.trainer import build_step
    from torchpace.measure.clock import resolve_device
    from torchpace.measure.env import fingerprint
    from torchpace.measure.paired import Variant, compare
    from torchpace.workloads import load

    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise ValueError(f"unknown configuration(s) {unknown}; choose from {', '.join(CONFIGS)}")
    if steps < 2 * block:
        raise ValueError(f"--steps must be at least two blocks ({2 * block}), got {steps}")
    dev = resolve_device(device)
    recipe = load(workload)
    cfgs = [CONFIGS[c](workload, dev) for c in configs]
    variants = [Variant(c.name, build_step(recipe, c, dev, seed=seed)) for c in cfgs]
    result = compare(variants, rounds=steps // block, block=block, warmup=warmup, device=dev)
    return {
        "schema": SCHEMA,
        "torchpace_version": __version__,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["torchpace", *sys.argv[1:]]) if sys.argv else "",
        "workload": workload,
        "seed": seed,
        "configs": [
            {"name": c.name, "techniques": list(c.techniques), **_settings(c)} for c in cfgs
        ],
        "environment": fingerprint(dev).to_dict(),
        "result": result.to_dict(),
    }


def _settings(cfg: Any) -> dict[str, Any]:
    from dataclasses import asdict

    d = asdict(cfg)
    d.pop("name")
    d.pop("techniques")
    return d
