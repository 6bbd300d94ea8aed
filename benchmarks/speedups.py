"""torchpace's speed-ups on this machine, in three parts, each paired and interleaved.

    python benchmarks/speedups.py --part all --json benchmarks/results/<date>-cpu-speedups.json
    python benchmarks/speedups.py --part verbs --workloads cnn --rounds 2 --steps 2   # a quick try

The defaults take about 11 minutes on the 2-core AMX Xeon VM (verbs ~3.5, fit ~7, bucketing ~1;
cold compiles included). ``--json`` writes ``environment`` (fingerprint, versions, command,
date, load), one key per part run, and ``verdicts``.

- ``verbs``: each speed-up verb alone on a reference workload, against the naive configuration
  (the recipe as written: fp32, its non-fused Adam, ``zero_grad(set_to_none=False)``,
  ``loss.item()`` every step), and the ``fast`` preset through ``prepare()``. All configurations
  are built in one process from the same seed and fed the same pre-collated batches (so the
  loader's time is out of every step), in interleaved rounds (``torchpace.measure.paired``).
- ``fit``: ``torchpace fit RECIPE --preset fast`` against ``examples/naive_RECIPE.py``, each run
  in a fresh process under ``_steptimer.py`` (a global optimizer step post hook stamps every
  step on both sides), in rounds that alternate the order. Warm-up steps, compile included, are
  excluded and the compile time is reported apart.
- ``bucketing``: on seqcls, ``LengthBucketBatchSampler`` and ``TokenBudgetBatchSampler`` against
  the recipe's shuffled DataLoader (random batches padded to their longest member): the share
  of useful tokens, and useful (unpadded) tokens per second over the same number of steps.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _provenance import finished, started
from _speedups_bucketing import bucketing_part, report_bucketing
from _speedups_common import DEFAULTS
from _speedups_fit import fit_part, report_fit
from _speedups_verbs import VERBS, report_verbs, verbs_part

from torchpace.measure.env import fingerprint


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("verbs", "fit", "bucketing", "all"), default="all")
    ap.add_argument("--workloads", default=",".join(VERBS), help="for verbs and fit")
    ap.add_argument("--rounds", type=int, help="rounds in every part (default: DEFAULTS)")
    ap.add_argument("--steps", type=int, help="measured steps per configuration (fit: per run)")
    ap.add_argument("--warmup", type=int, help="warm-up steps per configuration (fit: per run)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    parts = ["verbs", "fit", "bucketing"] if args.part == "all" else [args.part]
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = sorted(set(workloads) - set(VERBS))
    if unknown:
        raise SystemExit(f"--workloads: unknown {', '.join(unknown)}; known: {', '.join(VERBS)}")
    settings = {}
    for p in parts:
        rounds, steps, warmup = DEFAULTS[p]
        settings[p] = {
            "rounds": args.rounds or rounds,
            "measured": args.steps or steps,
            "warmup": warmup if args.warmup is None else args.warmup,
        }
    dev = torch.device("cpu")
    # the fingerprint measures (or reads cached) matmul peaks
    env: dict[str, Any] = started(fingerprint(dev).to_dict()) | {
        "settings": settings,
        "workloads": workloads,
        "compile_cache": "a fresh TORCHINDUCTOR_CACHE_DIR per part: cold at each graph's first "
        "compile (verbs; fit's round 1), warm after (fit's later rounds)",
    }
    fp = env["fingerprint"]
    print(
        f"{fp['cpu_model']}, {fp['cores']} cores, torch {env['torch']}, torchpace "
        f"{env['torchpace_git']}; matmul peaks fp32 {fp['peak_tflops_fp32']:.2f}, bf16 "
        f"{fp['peak_tflops_bf16'] or 0:.2f} TFLOP/s; load: {env['uptime_before']}",
        flush=True,
    )
    run: dict[str, Callable[[], dict[str, Any]]] = {
        "verbs": lambda: verbs_part(workloads, *_rsw(settings["verbs"]), dev, env),
        "fit": lambda: fit_part(workloads, *_rsw(settings["fit"])),
        "bucketing": lambda: bucketing_part(*_rsw(settings["bucketing"]), dev, env),
    }
    results: dict[str, Any] = {}
    for p in parts:
        with tempfile.TemporaryDirectory() as cache:
            # A fresh inductor cache per part (fit's children inherit it): each graph's first
            # compile is cold, as on a user's first run; later rounds of fit find it warm.
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
            t0 = time.perf_counter()
            results[p] = run[p]()
            results[p]["wall_s"] = time.perf_counter() - t0
        print(f"{p}: {results[p]['wall_s']:.0f} s", flush=True)
    finished(env)
    verdicts: list[str] = []
    if "verbs" in results:
        report_verbs(results["verbs"])
    if "fit" in results:
        verdicts += report_fit(results["fit"], env)
    if "bucketing" in results:
        verdicts += report_bucketing(results["bucketing"])
    for line in verdicts:
        print(line)
    print(f"load: {env['uptime_after']}")
    if args.json:
        out = {"environment": env, **results, "verdicts": verdicts}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {args.json}")


def _rsw(s: dict[str, int]) -> tuple[int, int, int]:
    return s["rounds"], s["measured"], s["warmup"]


if __name__ == "__main__":
    main()
