"""Measure single techniques on this machine with the paired harness; the catalogue's "measured"
notes quote these figures.

    python benchmarks/cpu_techniques.py --json benchmarks/results/<date>-cpu-techniques.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import torch

from torchpace.bench.configs import TrainConfig
from torchpace.bench.trainer import build_step
from torchpace.measure.clock import resolve_device
from torchpace.measure.env import fingerprint
from torchpace.measure.paired import Variant, compare
from torchpace.measure.timing import StepFn, Work
from torchpace.workloads import load


def optimizer_step(kind: str, params: list[torch.Tensor]) -> StepFn:
    """One AdamW step over ``params`` (gradients already set), with the given implementation."""
    ps = [p.detach().clone().requires_grad_(True) for p in params]
    for p in ps:
        p.grad = torch.randn_like(p)
    kw: dict[str, Any] = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}}.get(
        kind, {"fused": True}
    )
    opt = torch.optim.AdamW(ps, lr=1e-4, **kw)

    def step() -> Work:
        opt.step()
        return Work(samples=1)

    return step


def train_variants(
    workload: str, configs: dict[str, TrainConfig], dev: torch.device
) -> list[Variant]:
    recipe = load(workload)
    return [Variant(name, build_step(recipe, cfg, dev)) for name, cfg in configs.items()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--only", help="run only the cases whose title contains this text")
    args = ap.parse_args()
    dev = resolve_device("cpu")
    lm_params = list(load("lm").model("20m").parameters())
    cases: dict[str, Callable[[], list[Variant]]] = {
        "optimizer (AdamW step, lm 20m params)": lambda: [
            Variant(k, optimizer_step(k, lm_params)) for k in ("for-loop", "foreach", "fused")
        ],
        "cnn train step": lambda: train_variants(
            "cnn",
            {
                "fp32": TrainConfig("fp32"),
                "channels_last": TrainConfig("cl", channels_last=True),
                "bf16": TrainConfig("bf16", amp="bf16"),
                "bf16+channels_last": TrainConfig("both", amp="bf16", channels_last=True),
                "fused AdamW": TrainConfig("fused", optimizer="adamw-fused"),
                "set_to_none+no item()": TrainConfig(
                    "stn", set_to_none=True, sync_every_step=False
                ),
            },
            dev,
        ),
        "cnn loader workers (tuned step)": lambda: train_variants(
            "cnn",
            {
                f"{w} workers": TrainConfig(
                    f"w{w}",
                    amp="bf16",
                    channels_last=True,
                    optimizer="adamw-fused",
                    set_to_none=True,
                    sync_every_step=False,
                    num_workers=w,
                )
                for w in (0, 1)
            },
            dev,
        ),
        "lm train step": lambda: train_variants(
            "lm",
            {
                "fp32": TrainConfig("fp32"),
                "bf16": TrainConfig("bf16", amp="bf16"),
                "bf16+math attention": TrainConfig("bm", amp="bf16", sdpa_backend="math"),
                "fused AdamW": TrainConfig("fused", optimizer="adamw-fused"),
            },
            dev,
        ),
        "seqcls train step": lambda: train_variants(
            "seqcls",
            {
                "fp32": TrainConfig("fp32"),
                "bf16": TrainConfig("bf16", amp="bf16"),
                "math attention": TrainConfig("m", sdpa_backend="math"),
            },
            dev,
        ),
    }
    out: dict[str, Any] = {"environment": fingerprint(dev).to_dict(), "cases": {}}
    for title, make in cases.items():
        if args.only and args.only not in title:
            continue
        res = compare(make(), rounds=args.rounds, block=3, warmup=2, device=dev)
        out["cases"][title] = res.to_dict()
        print(f"\n{title} (baseline {res.baseline}; speed-up median [q1-q3])")
        for name, s in res.speedup.items():
            print(f"  {name:28s} {s.median:.2f}x [{s.q1:.2f}-{s.q3:.2f}]")
        if res.noisy:
            print("  NOISY:", "; ".join(res.noisy))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
