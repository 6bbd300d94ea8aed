"""torchpace against its peers, side by side: on each built-in workload, the naive example
script, torchpace (the plan `torchpace tune` writes, run with fit()), Lightning's Trainer,
Hugging Face Accelerate and a hand-tuned plain-PyTorch loop.

    make bench-peers          # installs the peers (.[bench]) without touching torch, then runs:
    python benchmarks/peers.py --json benchmarks/results/<date>-cpu.json
    python benchmarks/peers.py --workloads cnn --rounds 1 --samples 448 --budget 30s  # smoke
    python benchmarks/peers.py --markdown benchmarks/results/<date>-cpu.json  # the README table
    python benchmarks/peers.py --lm-size 300m --json benchmarks/results/<date>-cuda.json  # GPU

Per workload: the tune first (``torchpace tune W --budget B``, its trials cached, so a re-run
costs seconds; or ``--plan-dir`` with the plans of an earlier one), then rounds. A round runs
every contestant once, each in a fresh process (``_peers_child.py``), the order alternating
(naive, torchpace, ..., handtuned; then handtuned, ..., naive). Within a round all train from
the same seed on the same data for the same number of samples, the recipe's samples per step;
the harness times every one the same way and after the same warm-up steps (compiles land there,
and compiling later is taken out and reported apart). Each contestant's throughput is divided by
the naive script's of the same round; the table gives the median of those ratios [q1–q3], the
median samples/s, peak memory (RSS on CPU, the allocator's peak on CUDA), the final model's
train and validation loss, lm's MFU, and, where torchpace is not ahead, why.

``--json`` writes ``environment`` (fingerprint, versions, command, date, load; ``nvidia-smi`` on
CUDA), ``settings``, and per workload the tune, every run and the summaries; it is rewritten
after each workload.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _peers_setup import LM_SIZES, PEER_PACKAGES, environment, installed, key, recipe_spec
from _peers_summary import BASELINE, TORCHPACE, markdown, print_table, summarize_part

from torchpace.tune.command import parse_duration

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKLOADS = ("cnn", "lm", "seqcls")
CONTESTANTS = ("naive", "torchpace", "lightning", "accelerate", "handtuned")
# Training samples per run, warm-up included, and warm-up steps. CPU: 40 steps of cnn (64) and
# lm (32); 100 of seqcls (16): its step time follows its batches' lengths, and the naive script
# shuffles with the global RNG, not the seeded generator the others share, so its window needs
# more batches. A run is 4-14 s on the 2-core AMX Xeon (smoke runs of 2026-11-23), so 3 rounds
# of 15 runs and three cold tunes fit the 30 minutes of the issue. CUDA: more steps, as each is
# milliseconds, and more warm-up, for compiling and cudnn's auto-tuner.
SAMPLES = {
    "cpu": {"cnn": 40 * 64, "lm": 40 * 32, "seqcls": 100 * 16},
    "cuda": {"cnn": 300 * 64, "lm": 60 * 32, "seqcls": 300 * 16},
}
WARMUP = {"cpu": 5, "cuda": 10}
# For the printed estimate, an upper bound on the 2-core AMX Xeon: a run's start-up, data, model
# and evaluation, and every contestant's step as slow as the naive script's (smoke runs of
# 2026-11-23; seqcls's naive step: 0.18 s at 16 samples).
EST_START_S = {"naive": 5.0, "torchpace": 5.0, "lightning": 7.0, "accelerate": 6.0}
EST_STEP_S = {"cnn": 0.14, "lm": 0.15, "seqcls": 0.18}
TUNE_OVERHEAD_S = 30.0  # past the budget: start-up, and a trial begun near its end
CHILD_TIMEOUT_S = 900  # one run; a hung one fails its row, the suite goes on


def csv(choices: tuple[str, ...]) -> Any:
    def parse(text: str) -> list[str]:
        names = [x for x in text.split(",") if x]
        unknown = sorted(set(names) - set(choices))
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(choices)}"
            )
        return names

    return parse


def at_least(low: int) -> Any:
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}; got {value}")
        return value

    return parse


def duration(text: str) -> str:
    parse_duration(text)  # the tune's own parser: reject here what it would reject later
    return text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", type=csv(WORKLOADS), default=list(WORKLOADS))
    ap.add_argument(
        "--contestants",
        type=csv(CONTESTANTS),
        default=list(CONTESTANTS),
        help="a subset (naive, the baseline, is always run)",
    )
    ap.add_argument("--rounds", type=at_least(1), default=3)
    ap.add_argument("--samples", type=at_least(1), help="training samples per run, every workload")
    ap.add_argument("--warmup", type=at_least(2), help="warm-up steps (CPU 5, CUDA 10)")
    ap.add_argument("--budget", type=duration, default="2m", help="each tune's --budget (2m)")
    ap.add_argument("--plan-dir", type=Path, help="use DIR/W/torchpace-plan.json; no tune")
    ap.add_argument("--lm-size", choices=tuple(LM_SIZES), default="1m")
    ap.add_argument(
        "--compile",
        choices=("auto", "on", "off"),
        default="auto",
        help="torch.compile for Lightning, Accelerate and the hand-tuned loop (auto: on CUDA)",
    )
    ap.add_argument("--dir", type=Path, help="where tunes and generated recipes go (a temp dir)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--markdown", type=Path, help="print the README table of a results JSON")
    args = ap.parse_args(argv)
    if BASELINE not in args.contestants:
        args.contestants = [BASELINE, *args.contestants]
    args.contestants = [c for c in CONTESTANTS if c in args.contestants]  # a fixed order
    if args.plan_dir is not None and not args.plan_dir.is_dir():
        ap.error(f"--plan-dir {args.plan_dir} is not a directory")
    return args


def samples_per_step(contestant: str, workload: str, recipe: Any, plan: dict[str, Any]) -> int:
    """Samples per optimizer step: the naive script's defaults, the plan's, or the recipe's."""
    if contestant == BASELINE:
        from _speedups_fit import SCRIPTS, script_defaults

        d = script_defaults(SCRIPTS[workload])
        return int(d.get("batch-size", recipe.batch_size)) * int(d.get("accum", 1))
    if contestant == TORCHPACE:
        return (plan.get("batch_size") or recipe.batch_size) * plan.get("accumulate", 1)
    return int(recipe.batch_size)


def get_plan(w: str, spec: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """The plan for ``w``: from ``--plan-dir``, or a `torchpace tune` (cached trials) now."""
    name = key(w, args.lm_size)
    if args.plan_dir is not None:
        plan_path = args.plan_dir / name / "torchpace-plan.json"
        if not plan_path.is_file():
            raise SystemExit(f"--plan-dir: no {plan_path}; run `torchpace tune {spec} --out` there")
        tuned = plan_path.with_name("torchpace-tune.json")
        result = json.loads(tuned.read_text()) if tuned.is_file() else None
        return {"plan_path": str(plan_path), "from": "--plan-dir", "result": result}
    from tune import tune_once

    print(f"{w}: torchpace tune {spec} --budget {args.budget} ...", flush=True)
    tune = tune_once(spec, args.budget, root / name, cold=False)
    print(tune["stdout"][-3000:], end="", flush=True)
    if tune["result"] is None:
        raise SystemExit(f"{w}: the tune failed (exit {tune['rc']}): {tune['stderr_tail'][-800:]}")
    plan_path = root / name / "torchpace-plan.json"
    return {"plan_path": str(plan_path), "from": "tune", **tune}


def run_child(contestant: str, job: Any, tmp: Path) -> dict[str, Any]:
    """One contestant run in a fresh process; its measurements, or its error."""
    out = tmp / f"{contestant}.json"
    cmd = [sys.executable, str(HERE / "_peers_child.py"), "--contestant", contestant]
    cmd += ["--job", job.to_json(), "--out", str(out)]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, cwd=ROOT, timeout=CHILD_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {CHILD_TIMEOUT_S} s", "wall_s": CHILD_TIMEOUT_S}
    wall = time.perf_counter() - t0
    if done.returncode != 0 or not out.exists():
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        return {"error": f"exit {done.returncode}: {tail}", "wall_s": wall}
    run: dict[str, Any] = json.loads(out.read_text())
    out.unlink()
    return {**run, "wall_s": wall, "stdout_tail": done.stdout.strip().splitlines()[-2:]}


def add_flops(run: dict[str, Any], workload: str, spec: str, peak: float | None) -> None:
    """Model FLOPs of the window (torch.utils.flop_counter, per batch shape), TFLOP/s, MFU."""
    from _speedups_common import shaped_batch
    from _steptimer import step_flops

    flops = sum(step_flops(spec, shaped_batch(workload, s)) for s in run["window_shapes"])
    busy = run["window_s"] - run["compile_s_in_window"]
    run["tflops"] = flops / busy / 1e12
    run["mfu"] = run["tflops"] / peak if peak else None
    del run["window_shapes"]  # one per batch: long, and only needed here


def estimate(args: argparse.Namespace, device: str, steps: dict[str, dict[str, int]]) -> float:
    """Print the schedule's estimate, an upper bound (CPU only: measured on the 2-core AMX
    Xeon); seconds."""
    if device != "cpu":
        print("estimate: none for CUDA (no GPU run has been timed yet)")
        return 0.0
    total = 0.0
    for w in args.workloads:
        runs = sum(EST_START_S.get(c, 5.0) + steps[w][c] * EST_STEP_S[w] for c in args.contestants)
        tune = 0.0 if args.plan_dir else parse_duration(args.budget) + TUNE_OVERHEAD_S
        how = "plan from --plan-dir" if args.plan_dir else f"tune ≤{tune / 60:.1f} min"
        print(f"  {w}: {how}, {args.rounds} round(s) ≤{args.rounds * runs / 60:.1f} min")
        total += tune + args.rounds * runs
    print(f"  total ≤{total / 60:.0f} min (a tune with cached trials takes seconds)", flush=True)
    return total


def main() -> None:
    args = parse_args()
    if args.markdown is not None:  # summaries and why sentences again, from the rounds
        results = json.loads(args.markdown.read_text())
        for part in results["workloads"].values():
            summarize_part(part, results["settings"]["contestants"])
        print(markdown(results), end="")
        return
    missing = [c for c in args.contestants if c in PEER_PACKAGES and not installed(c)]
    if missing:
        raise SystemExit(
            f"{', '.join(missing)} not installed: `make bench-peers` installs them (pip install "
            "-e '.[bench]' with torch pinned), or leave them out with --contestants"
        )
    import torch
    from _peers_job import Job
    from _provenance import finished

    from torchpace.measure.clock import resolve_device
    from torchpace.recipes import load_recipe
    from torchpace.train import Plan

    device = resolve_device("auto")  # CUDA where there is one, as the tune and scripts pick
    root = args.dir or Path(tempfile.mkdtemp(prefix="torchpace-peers-"))
    root.mkdir(parents=True, exist_ok=True)
    warmup = args.warmup or WARMUP[device.type]
    compile_on = args.compile == "on" or (args.compile == "auto" and device.type == "cuda")
    env = environment(device)
    fp = env["fingerprint"]
    print(f"{fp['device_name']}, {fp['cores']} cores, torch {env['torch']}, {env['peer_versions']}")
    specs = {w: recipe_spec(w, args.lm_size, root) for w in args.workloads}
    if "lm" in specs:
        with torch.device("meta"):
            params = sum(p.numel() for p in load_recipe(specs["lm"]).model().parameters())
        env["lm"] = {"size": args.lm_size, "parameters": params, "recipe": specs["lm"]}
    settings = {
        "workloads": args.workloads,
        "contestants": args.contestants,
        "rounds": args.rounds,
        "warmup": warmup,
        "samples": {w: args.samples or SAMPLES[device.type][w] for w in args.workloads},
        "budget": None if args.plan_dir else args.budget,
        "plan_dir": str(args.plan_dir) if args.plan_dir else None,
        "lm_size": args.lm_size,
        "compile_peers": compile_on,
        "dir": str(root),
    }
    results: dict[str, Any] = {"environment": env, "settings": settings, "workloads": {}}

    def save() -> None:
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False, default=str))

    def steps_of(plans: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
        """Optimizer steps per workload and contestant: ``samples`` over its samples per step."""
        out = {}
        for w in args.workloads:
            recipe = load_recipe(specs[w])
            plan = Plan.load(plans[w]["plan_path"]).to_dict() if w in plans else {}
            per = {c: samples_per_step(c, w, recipe, plan) for c in args.contestants}
            out[w] = {c: settings["samples"][w] // n for c, n in per.items()}
            short = {c: n for c, n in out[w].items() if n <= warmup}
            if short:
                least = (warmup + 1) * max(per.values())
                raise SystemExit(f"--samples: {w} gives {short} steps; use at least {least}")
            trained = {c: out[w][c] * n for c, n in per.items()}
            if len(set(trained.values())) > 1:
                print(
                    f"WARNING: {w}: unequal samples per contestant {trained}: --samples is not "
                    "a multiple of every contestant's samples per step"
                )
        return out

    t_start = time.perf_counter()
    env["estimated_s"] = estimate(args, device.type, steps_of({}))  # the recipe's batches
    plans = {w: get_plan(w, specs[w], args, root) for w in args.workloads}
    steps = steps_of(plans)  # a plan may change the batch size
    for w in args.workloads:
        tune = plans[w]
        part: dict[str, Any] = {
            "recipe": specs[w],
            "plan": json.loads(Path(tune["plan_path"]).read_text()),
            "tune": {k: v for k, v in tune.items() if k not in ("result", "stdout")},
            "tune_rows": [
                {k: r[k] for k in ("name", "techniques", "verdict")}
                for r in (tune["result"] or {}).get("rows", [])
            ]
            or None,
            "steps": steps[w],
            "rounds": [],
        }
        results["workloads"][w] = part
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                order = args.contestants if r % 2 == 0 else args.contestants[::-1]
                runs: dict[str, Any] = {}
                for c in order:
                    job = Job(
                        workload=w,
                        recipe=specs[w],
                        lm_size=args.lm_size,
                        device=device.type,
                        seed=r,
                        steps=steps[w][c],
                        warmup=warmup,
                        compile=compile_on,
                        plan=tune["plan_path"] if c == TORCHPACE else None,
                    )
                    run = runs[c] = run_child(c, job, Path(tmp))
                    if "error" in run:
                        print(f"  round {r + 1} {w} {c}: FAILED {run['error'][:300]}", flush=True)
                        continue
                    add_flops(run, w, specs[w], env["mfu_peak_tflops"])
                    print(
                        f"  round {r + 1} {w:6s} {c:10s} {run['samples_per_s']:8.1f} samples/s"
                        f"  train {run['train_loss']:.3f} val {run['val_loss']:.3f}"
                        f"  peak {run['peak_memory_bytes'] / 2**20:,.0f} MiB"
                        f"  ({run['wall_s']:.0f} s)",
                        flush=True,
                    )
                part["rounds"].append(runs)
        summarize_part(part, args.contestants)
        save()  # after each workload: a killed run keeps what it measured
    env["wall_s"] = time.perf_counter() - t_start
    finished(env)
    save()
    print_table(results)
    print()
    print(markdown(results), end="")
    print(f"{env['wall_s'] / 60:.1f} min (estimated ≤{env['estimated_s'] / 60:.0f})")
    if args.json:
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
