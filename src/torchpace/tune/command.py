"""``torchpace tune RECIPE``: search the plan, write ``torchpace-plan.json`` and the results.

    torchpace tune cnn --budget 5m
    torchpace tune recipe.py --run-steps 20000 --memory-budget 8G --out tuned/

Results are cached by fingerprint (the recipe's source, the environment, torch): a re-run of an
unchanged recipe reads every trial from the cache; a killed tune re-runs no finished trial.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

RESULT_VERSION = 1
_UNITS = {"s": 1, "m": 60, "h": 3600}
_BYTES = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_duration(text: str) -> float:
    """'300', '90s', '5m', '1.5h' -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text.lower())
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"a duration like 300, 90s, 5m or 1h; got {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def parse_bytes(text: str) -> int:
    """'8G', '512M', '1.5g', '1000000' -> bytes (powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text.lower())
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"a size like 8G, 512M or 1000000; got {text!r}")
    return int(float(m.group(1)) * _BYTES[m.group(2)])


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tune",
        help="try each technique on a recipe and keep the fastest plan that still converges",
        description="Measure the recipe's baseline, each technique alone and combined, the "
        "batch size and the loader, each trial in a fresh process, and write the fastest plan "
        "that passes the convergence guard.",
    )
    p.add_argument("recipe", help="cnn, lm, seqcls, path/to/recipe.py or module:attr")
    p.add_argument("--budget", type=parse_duration, default=300.0, help="time for the search (5m)")
    p.add_argument("--steps", type=int, default=20, help="measured steps per trial (20)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up steps per trial (3)")
    p.add_argument(
        "--run-steps",
        type=int,
        default=1000,
        help="the length of the run the plan is for: a compile must pay off over it (1000)",
    )
    p.add_argument("--memory-budget", type=parse_bytes, help="peak memory a trial may use (CPU)")
    p.add_argument("--lr-scaling", choices=("linear", "sqrt", "none"), default="sqrt")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    p.add_argument("--out", type=Path, default=Path("."), help="where the plan and results go")
    p.add_argument("--no-cache", action="store_true", help="run every trial again")
    p.add_argument("--html", type=Path, help="also write the HTML report here (torchpace report)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import datetime as dt
    import sys

    import torch

    from torchpace._files import atomic_write_text
    from torchpace.measure.clock import resolve_device
    from torchpace.measure.env import fingerprint
    from torchpace.recipes import load_recipe
    from torchpace.tune.candidates import candidates
    from torchpace.tune.progress import TuneProgress
    from torchpace.tune.results import ResultsFile, cache_path, tune_fingerprint
    from torchpace.tune.search import Settings, tune
    from torchpace.tune.table import render, to_text

    command = ["torchpace", *sys.argv[1:]]
    created = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    recipe = load_recipe(args.recipe)
    device = resolve_device(args.device)
    fp = tune_fingerprint(args.recipe, device=args.device)
    path = cache_path(fp)
    if args.no_cache and path.exists():
        path.unlink()
    settings = Settings(
        recipe=args.recipe,
        budget_s=args.budget,
        steps=args.steps,
        warmup=args.warmup,
        run_steps=args.run_steps,
        device=args.device,
        memory_budget_bytes=args.memory_budget,
        lr_scaling=args.lr_scaling,
    )
    cands, not_here = candidates(recipe, device)
    with TuneProgress(args.budget) as bar:
        outcome = tune(
            settings,
            cands,
            not_here,
            results=ResultsFile(path),
            workdir=path.parent / "work",
            progress=bar.update,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    plan_path = args.out / "torchpace-plan.json"
    outcome.plan.save(plan_path)
    confirm = outcome.confirm.get("median")
    caption = (
        f"{outcome.elapsed_s:.0f} s, {len(outcome.trials)} trials ({outcome.cached_trials} from "
        f"the cache); each trial {args.warmup} warm-up + {args.steps} measured steps in a fresh "
        f"process; speed-ups: the baseline's median step time over the trial's [q1–q3]; loss Δ: "
        f"the last {outcome.band.tail if outcome.band else '—'} steps' mean against the "
        f"baseline's seed band {outcome.band}"
        + (f"; confirmed {confirm:.2f}× in samples/s, paired" if confirm else "")
    )
    table = render(outcome.rows, title=f"torchpace tune {args.recipe}", caption=caption)
    print(to_text(table))
    result = {
        "version": RESULT_VERSION,
        "kind": "tune",
        "recipe": args.recipe,
        "fingerprint": fp,
        "created": created,
        "command": command,
        "environment": fingerprint(device, measure_peak=True).to_dict(),
        "torch": torch.__version__,
        "settings": {k: v for k, v in vars(settings).items()},
        "band": None
        if outcome.band is None
        else {
            "lo": outcome.band.lo,
            "hi": outcome.band.hi,
            "centre": outcome.band.centre,
            "tail": outcome.band.tail,
            "tails": list(outcome.band.tails),
        },
        "rows": [vars(r) | {"techniques": list(r.techniques)} for r in outcome.rows],
        "trials": [t.to_dict() for t in outcome.trials],
        "batch_search": outcome.batch_search,
        "loader": outcome.loader,
        "confirm": outcome.confirm,
        "skipped_for_budget": outcome.skipped_for_budget,
        "elapsed_s": outcome.elapsed_s,
        "cached_trials": outcome.cached_trials,
        "plan": outcome.plan.to_dict(),
    }
    import json

    result_path = args.out / "torchpace-tune.json"
    atomic_write_text(result_path, json.dumps(result, indent=2) + "\n")
    print(f"wrote {plan_path} ({', '.join(outcome.plan.techniques()) or 'the recipe as written'})")
    print(f"wrote {result_path}; trials cached in {path}")
    if args.html:
        from torchpace.report.command import write_html
        from torchpace.report.tune_doc import build

        write_html(args.html, [build(result)], [str(result_path)])
        print(f"wrote {args.html}")
    return 0
