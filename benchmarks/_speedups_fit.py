"""speedups.py's ``fit`` part: ``torchpace fit RECIPE`` (the fast preset, a plan) against
``examples/naive_RECIPE.py``, each run in a fresh process under ``_steptimer.py``, in rounds
that alternate the order; tune.py runs it on the tuned plans."""

from __future__ import annotations

import ast
import itertools
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _speedups_common import ROOT, SEED, goal_line, other_cores, shaped_batch, spread, utilization
from _steptimer import steady_steps, step_flops

from torchpace.measure.noise import MAX_FOREIGN_CORES
from torchpace.measure.stats import summarize
from torchpace.train import Plan
from torchpace.workloads import load

STEPTIMER = Path(__file__).with_name("_steptimer.py")
# 3x: the goal for `torchpace fit cnn --preset fast` against examples/naive_cnn.py (the
# speed-ups issue); every round must clear it, not just the median.
GOAL_FIT_CNN = 3.0
NO_EVAL = 10**9  # --eval-every for the naive scripts: far past any run, so they never evaluate
# fit cases: the fast preset, and changes to it (written to a temporary plan JSON).
FIT_PLANS: dict[str, dict[str, dict[str, Any]]] = {
    "cnn": {"fast": {}},
    "lm": {"fast": {}, "fast + math attention": {"attention": "math"}},
    "seqcls": {"fast": {}, "fast + length-bucket": {"batching": "length-bucket"}},
}
SCRIPTS = {w: f"examples/naive_{w}.py" for w in FIT_PLANS}
# seqcls's step time follows its batch, and the naive script's shuffle draws from the global RNG
# after the model's init while fit's uses its own generator: the two sides see different batches,
# so its rounds compare throughput over the window (samples over seconds), not step medians.
BY_THROUGHPUT = {"seqcls"}


def script_defaults(script: str) -> dict[str, Any]:
    """The argparse defaults a script declares (``--batch-size``, ``--accum``), read from its
    source, so the comparison can say whether both sides train on equal batches."""
    found: dict[str, Any] = {}
    for node in ast.walk(ast.parse((ROOT / script).read_text())):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        flag = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else ""
        for kw in node.keywords:
            if kw.arg == "default" and isinstance(kw.value, ast.Constant):
                found[str(flag).lstrip("-")] = kw.value.value
    return found


def check_batch_sizes(workloads: list[str]) -> dict[str, Any]:
    """Samples per optimizer step on both sides: the naive script's defaults against the
    recipe's batch_size, which ``torchpace fit`` uses."""
    out = {}
    for w in workloads:
        d = script_defaults(SCRIPTS[w])
        size, accum, recipe = d.get("batch-size", 0), d.get("accum", 1), load(w).batch_size
        out[w] = {
            "naive_batch_size": size,
            "naive_accumulate": accum,
            "recipe_batch_size": recipe,
            "equal_samples_per_step": size * accum == recipe,
        }
        micro = f" ({size} × {accum} micro-batches)" if accum > 1 else ""
        same = "equal" if size * accum == recipe else "DIFFERENT"
        print(f"fit: {w}: samples per optimizer step: naive {size * accum}{micro}, fit {recipe}")
        print(f"     (the recipe's batch_size, one batch): {same}")
    return out


def run_child(
    argv: list[str], *, fit: bool, warmup: int, measured: int, pad: int | None, tmp: str
) -> dict[str, Any]:
    """One run in a fresh process under _steptimer.py; its stamps, batches and compiles."""
    out = os.path.join(tmp, "run.json")
    cmd = [sys.executable, str(STEPTIMER), "--out", out, "--warmup", str(warmup)]
    cmd += ["--measured", str(measured), *(["--pad", str(pad)] if pad is not None else [])]
    cmd += [*(["--fit"] if fit else []), "--", *argv]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if done.returncode != 0 or not os.path.exists(out):
        raise SystemExit(f"{shlex.join(argv)} failed (exit {done.returncode}):\n{done.stderr}")
    data: dict[str, Any] = json.loads(Path(out).read_text())
    os.remove(out)
    data.update(wall_s=wall, command=shlex.join(argv), stdout_tail=done.stdout.splitlines()[-2:])
    return data


def summarize_run(workload: str, run: dict[str, Any], warmup: int, measured: int) -> dict[str, Any]:
    """One run's measured window: median step, and throughput over the window's busy time
    (its seconds less any compiling inside it, reported apart)."""
    steps = steady_steps(run, warmup, measured)
    secs = [s["seconds"] for s in steps]
    busy = sum(secs) - sum(s["compile_seconds"] for s in steps)
    flops = sum(
        step_flops(workload, shaped_batch(workload, shape)) for s in steps for shape in s["shapes"]
    )
    stamps = run["stamps"]
    return {
        "median_step_s": statistics.median(secs),
        "samples_per_s": sum(s["samples"] for s in steps) / busy,
        "real_tokens_per_s": sum(s["real_tokens"] for s in steps) / busy,
        "samples_per_step": sorted({s["samples"] for s in steps}),
        "batches_per_step": sorted({s["batches"] for s in steps}),
        "padded_tokens": sum(s["tokens"] for s in steps),
        "real_tokens": sum(s["real_tokens"] for s in steps),
        "tflops": flops / busy / 1e12,
        "first_step_end_s": stamps[0],  # from the harness's start: imports, data, build, step 1
        "warmup_step_s": [b - a for a, b in itertools.pairwise(stamps[:warmup])],
        "compile_s": sum(e - s for s, e, _ in run["compiles"]),
        "compile_s_in_window": sum(s["compile_seconds"] for s in steps),
        "foreign_cores": run["foreign_cores"],
        "foreign_cores_raw": run["foreign_cores_raw"],  # reaped children counted as other load
        "step_s": secs,
        "wall_s": run["wall_s"],
        "command": run["command"],
        "stdout_tail": run["stdout_tail"],
    }


def write_plans(workloads: list[str], tmp: str) -> dict[tuple[str, str], list[str]]:
    """The `torchpace fit` arguments of each plan: the preset, or a plan JSON for a variant."""
    args = {}
    for w in workloads:
        for name, change in FIT_PLANS[w].items():
            if not change:
                args[(w, name)] = ["--preset", "fast"]
                continue
            path = os.path.join(tmp, f"{w}-{'-'.join(map(str, change.values()))}.json")
            Plan.preset("fast").replace(**change).save(path)
            args[(w, name)] = ["--plan", path]
    return args


def fit_part(
    workloads: list[str],
    rounds: int,
    measured: int,
    warmup: int,
    *,
    cases: dict[tuple[str, str], list[str]] | None = None,
    goals: dict[tuple[str, str], float] | None = None,
) -> dict[str, Any]:
    """Each case against its workload's naive script. ``cases``: the `torchpace fit` arguments
    of each (workload, plan name) (default: FIT_PLANS, as ``write_plans`` writes them), or
    ``["run", "--plan", PLAN]`` for `torchpace run` of the naive script itself with a plan, or
    ``["script", PATH]`` for another script run as the naive one is (a patched copy);
    ``goals``: the speed-up goal of a case (default: GOAL_FIT_CNN for cnn / fast)."""
    from torchpace.workloads.seqcls import PAD

    total = warmup + measured
    batch_sizes = check_batch_sizes(workloads)
    rows: dict[str, list[dict[str, Any]]] = {w: [] for w in workloads}
    with tempfile.TemporaryDirectory() as tmp:
        plans = write_plans(workloads, tmp) if cases is None else cases
        for r in range(rounds):
            seed = SEED + r  # a new shuffle each round: seqcls's windows sample other batches
            for w in workloads:
                names = [name for (pw, name) in plans if pw == w]
                sides = ["naive", *names]
                order = sides if r % 2 == 0 else sides[::-1]
                runs = {}
                for side in order:
                    if side == "naive":
                        argv = [SCRIPTS[w], "--eval-every", str(NO_EVAL)]
                    elif plans[(w, side)][:1] == ["script"]:  # another script, e.g. patched
                        argv = [plans[(w, side)][1], "--eval-every", str(NO_EVAL)]
                    elif plans[(w, side)][:1] == ["run"]:  # the plan applied to the script
                        argv = ["run", *plans[(w, side)][1:], SCRIPTS[w], "--"]
                        argv += ["--eval-every", str(NO_EVAL)]
                    else:
                        argv = ["fit", w, *plans[(w, side)], "--no-progress"]
                    argv += ["--steps", str(total), "--seed", str(seed)]
                    pad = PAD if w == "seqcls" else None
                    raw = run_child(
                        argv,
                        fit=side != "naive" and plans[(w, side)][:1] != ["script"],
                        warmup=warmup,
                        measured=measured,
                        pad=pad,
                        tmp=tmp,
                    )
                    runs[side] = summarize_run(w, raw, warmup, measured)
                for side in names:
                    row = pair_round(w, runs["naive"], runs[side])
                    row.update({"round": r + 1, "seed": seed, "order": order, "plan": side})
                    rows[w].append(row)
                    print(
                        f"  round {r + 1} {w:6s} {side:22s}"
                        f" naive {row['naive']['median_step_s'] * 1e3:6.1f} ms"
                        f"  fit {row['fit']['median_step_s'] * 1e3:6.1f} ms"
                        f"  ratio {row['ratio']:.2f}×  compile {row['fit']['compile_s']:.1f} s"
                        f"  other load {other_cores(row['foreign_cores_max'])}",
                        flush=True,
                    )
    return {
        "batch_sizes": batch_sizes,
        "evaluation": f"none: naive scripts run with --eval-every {NO_EVAL}, fit without it",
        "summary": summarize_fit(rows, {("cnn", "fast"): GOAL_FIT_CNN} if goals is None else goals),
        "rounds": rows,
    }


def pair_round(workload: str, naive: dict[str, Any], fast: dict[str, Any]) -> dict[str, Any]:
    # A plan with another batch size (a tuned one) does other work per step: compare samples/s.
    by_throughput = (
        workload in BY_THROUGHPUT or naive["samples_per_step"] != fast["samples_per_step"]
    )
    ratio = (
        fast["samples_per_s"] / naive["samples_per_s"]
        if by_throughput
        else naive["median_step_s"] / fast["median_step_s"]
    )
    foreign = [v for v in (naive["foreign_cores"], fast["foreign_cores"]) if v is not None]
    return {
        "ratio": ratio,
        "ratio_is": "samples/s over the window" if by_throughput else "median step time",
        "foreign_cores_max": max(foreign, default=None),  # None: /proc unreadable
        "naive": naive,
        "fit": fast,
    }


def summarize_fit(
    rows: dict[str, list[dict[str, Any]]], goals: dict[tuple[str, str], float]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for w, rs in rows.items():
        for plan in dict.fromkeys(r["plan"] for r in rs):
            mine = [r for r in rs if r["plan"] == plan]
            ratios = [r["ratio"] for r in mine]
            goal = goals.get((w, plan))
            foreign = [r["foreign_cores_max"] for r in mine if r["foreign_cores_max"] is not None]
            out[f"{w} / {plan}"] = {
                "workload": w,
                "plan": plan,
                "ratio": summarize(ratios).to_dict(),
                "ratio_is": mine[0]["ratio_is"],
                "goal": goal,
                "rounds_above_goal": sum(x >= goal for x in ratios) if goal else None,
                "rounds": len(mine),
                **{
                    f"{side}_{k}": summarize([r[side][k] for r in mine]).to_dict()
                    for side in ("naive", "fit")
                    for k in ("median_step_s", "samples_per_s", "real_tokens_per_s", "tflops")
                },
                "compile_s_round1": mine[0]["fit"]["compile_s"],
                "compile_s_later": [r["fit"]["compile_s"] for r in mine[1:]],
                "compile_s_in_window_max": max(r["fit"]["compile_s_in_window"] for r in mine),
                "first_step_end_s": {
                    side: [r[side]["first_step_end_s"] for r in mine] for side in ("naive", "fit")
                },
                "samples_per_step": {
                    side: sorted({n for r in mine for n in r[side]["samples_per_step"]})
                    for side in ("naive", "fit")
                },
                "foreign_cores_max": max(foreign, default=None),
            }
    return out


def report_fit(part: dict[str, Any], env: dict[str, Any]) -> list[str]:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    fit = env["settings"]["fit"]
    fp = env["fingerprint"]
    table = Table(
        title="torchpace fit (fast preset) against the naive example scripts, fresh processes",
        caption=escape(
            f"median [min–max] over {fit['rounds']} rounds, the order alternating; per run "
            f"{fit['measured']} steps after {fit['warmup']} warm-up steps; speed-up of median "
            "step times (seqcls: of samples/s, its two sides see different batches); naive → fit: "
            "medians over rounds; samples/s, real (unpadded) tokens/s and TFLOP/s over the "
            "window, compiling inside it left out; TFLOP/s of the fp32 (naive) / bf16 (fit) "
            "peak; compile s: round 1 (cold cache) / later rounds; load: most other load, cores"
        ),
    )
    cols = ("workload / plan", "ms/step", "speed-up", "samples/s", "tokens/s", "TFLOP/s (of peak)")
    for col in (*cols, "compile s", "goal", "load"):
        left = col[0] == "w"
        table.add_column(escape(col), justify="left" if left else "right", no_wrap=not left)
    verdicts = []
    for key, s in part["summary"].items():

        def both(k: str, fmt: str, s: dict[str, Any] = s) -> str:
            return f"{s[f'naive_{k}']['median']:{fmt}} → {s[f'fit_{k}']['median']:{fmt}}"

        tokens = (
            both("real_tokens_per_s", ",.0f") if s["naive_real_tokens_per_s"]["median"] else "—"
        )
        tflops = (
            f"{utilization(s['naive_tflops']['median'], fp['peak_tflops_fp32'])} → "
            f"{utilization(s['fit_tflops']['median'], fp['peak_tflops_bf16'])}"
        )
        later = s["compile_s_later"]
        compiled = f"{s['compile_s_round1']:.1f}"
        compiled += f" / {statistics.median(later):.1f}" if later else ""
        goal = "—"
        if s["goal"]:
            met = s["rounds_above_goal"] == s["rounds"]
            color = "green" if met else "bold red"
            goal = f"[{color}]≥{s['goal']:g}×: {s['rounds_above_goal']}/{s['rounds']}[/]"
            verdicts.append(
                goal_line(f"fit {key}", s["ratio"], s["goal"], s["rounds_above_goal"], s["rounds"])
            )
        ms = {k: {q: v * 1e3 for q, v in s[f"{k}_median_step_s"].items()} for k in ("naive", "fit")}
        load_max = s["foreign_cores_max"]
        table.add_row(
            escape(key),
            f"{ms['naive']['median']:.1f} → {ms['fit']['median']:.1f}",
            escape(spread(s["ratio"], quart=False) + "×"),
            both("samples_per_s", ",.0f"),
            tokens,
            escape(tflops),
            compiled,
            goal,
            f"{load_max:.2f}" if load_max is not None else "—",
        )
    Console(width=150).print(table)
    for key, s in part["summary"].items():
        if s["compile_s_in_window_max"] > 0:
            print(
                f"  {key}: recompiled inside the timed window (up to "
                f"{s['compile_s_in_window_max']:.1f} s a run, left out of the throughput)"
            )
        if s["foreign_cores_max"] is not None and s["foreign_cores_max"] > MAX_FOREIGN_CORES:
            print(
                f"  NOISY ({key}): other load reached {s['foreign_cores_max']:.2f} cores "
                f"(limit {MAX_FOREIGN_CORES})"
            )
        if s["samples_per_step"]["naive"] != s["samples_per_step"]["fit"]:
            print(f"  WARNING {key}: samples per step differ: {s['samples_per_step']}")
    return verdicts
