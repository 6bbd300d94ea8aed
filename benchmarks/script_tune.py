"""`torchpace tune` of the naive example script itself against the tune of its recipe: is the
plan found on the unmodified script, applied with `torchpace run`, as fast as the recipe's?

    python benchmarks/script_tune.py --json benchmarks/results/<date>-cpu-script-tune.json
    python benchmarks/script_tune.py --workloads cnn --budget 2m --rounds 1   # a quick try

For each workload W, in order:

1. ``torchpace tune examples/naive_W.py --budget B --no-cache -- --eval-every 10**9`` (the script
   tune: the doctor first, then trials of the unmodified script in fresh processes);
2. ``torchpace tune W --budget B --no-cache`` (the recipe tune);
3. paired rounds in fresh processes, each timed by the same global optimizer-step hook
   (``_steptimer.py``), the order alternating: ``python examples/naive_W.py`` against
   ``torchpace run --plan SCRIPT_PLAN examples/naive_W.py``, against ``python patched_W.py``
   (a copy changed by ``torchpace apply SCRIPT_PLAN --write``) and against
   ``torchpace fit W --plan RECIPE_PLAN``.

The goals (issue 15): the script plan's speed-up under ``run`` at least 90% of the recipe
plan's, its loss inside the band (the tune's guard); the patched script at least 90% of
``run``'s. ``--json`` writes the environment, both tunes' tables and
plans, the rounds and the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _provenance import finished, started
from _speedups_common import DEFAULTS, ROOT
from _speedups_fit import NO_EVAL, SCRIPTS, fit_part

from torchpace.measure.env import fingerprint
from tune import added_techniques, duration, guard_of, tune_once

GOAL_SHARE = 0.9  # the script plan's speed-up over the recipe plan's, at least


def workload_part(
    w: str, budget: str, root: Path, fit: dict[str, int], options: tuple[str, ...] = ()
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as inductor:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor
        tunes = {
            "script": (SCRIPTS[w], ["--eval-every", str(NO_EVAL)]),
            "recipe": (w, None),
        }
        for kind, (target, args) in tunes.items():
            print(f"\n{w}: {kind} tune, budget {budget} ({time.strftime('%H:%M:%S')})", flush=True)
            t = out[f"{kind}_tune"] = tune_once(
                target, budget, root / w / kind, cold=True, script_args=args, options=options
            )
            print(t["stdout"], end="", flush=True)
            if t["result"] is None:
                out["error"] = f"{kind} tune failed (exit {t['rc']}): {t['stderr_tail'][-500:]}"
                return out
            out[f"{kind}_plan"] = t["result"]["plan"]
            out[f"{kind}_added"] = added_techniques(t["result"]["plan"])
            out[f"{kind}_guard"] = guard_of(t["result"])
        plan = root / w / "script/torchpace-plan.json"
        patched = root / w / f"patched_{w}.py"
        patched.write_bytes((ROOT / SCRIPTS[w]).read_bytes())
        applied = subprocess.run(
            [sys.executable, "-m", "torchpace", "apply", str(plan), str(patched), "--write"],
            capture_output=True,
            text=True,
        )
        out["apply"] = {"rc": applied.returncode, "stderr": applied.stderr[-2000:]}
        print(applied.stderr, end="", flush=True)
        cases = {
            (w, "script plan, run"): ["run", "--plan", str(plan)],
            (w, "script plan, apply"): ["script", str(patched)],
            (w, "recipe plan, fit"): ["--plan", str(root / w / "recipe/torchpace-plan.json")],
        }
        try:
            out["fit"] = fit_part([w], fit["rounds"], fit["measured"], fit["warmup"], cases=cases)
        except SystemExit as e:
            out["error"] = f"rounds: {e}"
            return out
        summary = out["fit"]["summary"]
        s = summary[f"{w} / script plan, run"]["ratio"]
        r = summary[f"{w} / recipe plan, fit"]["ratio"]
        a = summary[f"{w} / script plan, apply"]["ratio"]
        out["share"] = s["median"] / r["median"] if r.get("median") else None
        out["apply_share"] = a["median"] / s["median"] if s.get("median") else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="cnn,lm,seqcls")
    ap.add_argument("--budget", type=duration, default="5m", help="each tune's --budget (5m)")
    ap.add_argument("--rounds", type=int, help="rounds (default: speedups.py's fit rounds)")
    ap.add_argument("--steps", type=int, help="measured steps per run")
    ap.add_argument(
        "--tune-steps", type=int, help="each tune's --steps (its default, 20, if not given)"
    )
    ap.add_argument("--dir", type=Path, help="where the tunes write (default: a new temp dir)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    rounds, measured, warmup = DEFAULTS["fit"]
    fit = {"rounds": args.rounds or rounds, "measured": args.steps or measured, "warmup": warmup}
    root = args.dir or Path(tempfile.mkdtemp(prefix="torchpace-script-tune-"))
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    env: dict[str, Any] = started(fingerprint(dev).to_dict()) | {
        "settings": {"budget": args.budget, "fit": fit, "dir": str(root)},
        "goal": f"script plan's speed-up >= {GOAL_SHARE:.0%} of the recipe plan's",
    }
    results: dict[str, Any] = {}
    for w in [w for w in args.workloads.split(",") if w]:
        options = ("--steps", str(args.tune_steps)) if args.tune_steps else ()
        results[w] = workload_part(w, args.budget, root, fit, options)
        if args.json:
            Path(args.json).write_text(
                json.dumps({"environment": env, "workloads": results}, indent=2) + "\n"
            )
    finished(env)
    for w, x in results.items():
        if "error" in x:
            print(f"{w}: {x['error']}")
            continue
        summary = x["fit"]["summary"]
        s = summary[f"{w} / script plan, run"]["ratio"]
        r = summary[f"{w} / recipe plan, fit"]["ratio"]
        print(
            f"{w}: script plan {', '.join(x['script_added']) or '(none)'} {s['median']:.2f}× "
            f"[{s.get('q1', 0):.2f}–{s.get('q3', 0):.2f}]; recipe plan "
            f"{', '.join(x['recipe_added']) or '(none)'} {r['median']:.2f}×; share "
            f"{x['share']:.0%} (goal {GOAL_SHARE:.0%}); the patched script (torchpace apply) "
            f"{summary[f'{w} / script plan, apply']['ratio']['median']:.2f}×, "
            f"{x['apply_share']:.0%} of run's (goal {GOAL_SHARE:.0%})"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"environment": env, "workloads": results}, indent=2) + "\n"
        )
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
