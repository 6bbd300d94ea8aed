#!/usr/bin/env python
"""Hand-written attention against ``F.scaled_dot_product_attention`` on the CPU, in float32.

    python benchmarks/sdpa_cpu.py [--rounds 5] [--json benchmarks/results/DATE-sdpa-cpu.json]

The question it answers is TP307's: is the lint rule's advice also right for a script that trains
on the CPU? Each shape times one forward and backward of the textbook form
(``matmul(q, k^T) / sqrt(d)``, ``masked_fill`` with a padding mask, softmax, ``matmul(p, v)``)
and of SDPA given the same mask, alternated round by round. It reports the paired ratio of
the two (hand-written time over fused time) as a median with its range over the rounds.
The shapes go from a tutorial's (5 tokens, as in nlp-tutorial's BERT) to a 512-token encoder.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import finished, started

from torchpace.measure.env import fingerprint

SHAPES = ((16, 8, 5, 64), (8, 8, 64, 64), (8, 8, 256, 64), (4, 12, 512, 64))  # B, H, L, D


def hand(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(pad, -1e9)
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def fused(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, attn_mask=~pad)


def timed(fn, inputs, reps: int) -> float:  # type: ignore[no-untyped-def]
    """The median of ``reps`` forward-and-backward passes, in seconds."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*inputs).sum().backward()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    env = started(fingerprint(torch.device("cpu"), measure_peak=False).to_dict())
    torch.manual_seed(0)
    rows = []
    for b, h, length, d in SHAPES:
        q, k, v = (torch.randn(b, h, length, d, requires_grad=True) for _ in range(3))
        pad = torch.zeros(b, 1, length, length, dtype=torch.bool)
        pad[..., length - max(1, length // 8) :] = True  # the last eighth is padding
        inputs = (q, k, v, pad)
        same = (hand(*inputs) - fused(*inputs)).abs().max().item()
        for fn in (hand, fused):
            timed(fn, inputs, 3)  # warm-up
        ratios, hands, fuseds = [], [], []
        for i in range(args.rounds):
            order = (hand, fused) if i % 2 == 0 else (fused, hand)
            got = {fn.__name__: timed(fn, inputs, args.reps) for fn in order}
            hands.append(got["hand"])
            fuseds.append(got["fused"])
            ratios.append(got["hand"] / got["fused"])
        row = {
            "shape_bhld": [b, h, length, d],
            "hand_ms": round(statistics.median(hands) * 1e3, 3),
            "fused_ms": round(statistics.median(fuseds) * 1e3, 3),
            "hand_over_fused": round(statistics.median(ratios), 3),
            "range": [round(min(ratios), 3), round(max(ratios), 3)],
            "max_abs_difference": same,
        }
        rows.append(row)
        print(
            f"B={b} H={h} L={length} D={d}: hand {row['hand_ms']:.2f} ms, fused "
            f"{row['fused_ms']:.2f} ms, hand/fused {row['hand_over_fused']:.2f}x "
            f"[{row['range'][0]:.2f}-{row['range'][1]:.2f}]",
            flush=True,
        )
    finished(env)
    print(f"load: {env['uptime_before']} -> {env['uptime_after']}")
    if args.json:
        args.json.write_text(json.dumps({"environment": env, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
