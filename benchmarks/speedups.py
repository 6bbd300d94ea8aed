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
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _provenance import finished, started
from _steptimer import CompileWatch, steady_steps, step_flops
from torch.utils.data import DataLoader

from torchpace.measure.env import fingerprint
from torchpace.measure.noise import MAX_FOREIGN_CORES, verdict
from torchpace.measure.paired import PairedResult, Variant, compare
from torchpace.measure.stats import Summary, summarize
from torchpace.measure.timing import Work
from torchpace.speedups import (
    LengthBucketBatchSampler,
    TokenBudgetBatchSampler,
    autocast_forward,
    choose_precision,
    compile_model,
    fold_conv_bias,
    fuse_optimizer,
    padding_stats,
    to_device,
    use_attention_backend,
    use_channels_last,
)
from torchpace.train import Plan, prepare
from torchpace.tune.build import training_loader
from torchpace.workloads import load

ROOT = Path(__file__).resolve().parents[1]
STEPTIMER = Path(__file__).with_name("_steptimer.py")
SEED = 0  # torchpace fit's and torchpace bench's default seed
# 3x: the goal for `torchpace fit cnn --preset fast` against examples/naive_cnn.py (the
# speed-ups issue); every round must clear it, not just the median.
GOAL_FIT_CNN = 3.0
# 2x useful tokens/s: the goal for length bucketing and token budgets on seqcls (the speed-ups
# issue), against random batches padded to their longest member.
GOAL_BUCKETING = 2.0
# Per-part defaults: (rounds, measured steps per configuration, warm-up steps). verbs: 8 rounds
# of 3 steps as cpu_techniques.py, 3 warm-up steps as `torchpace bench` (compiled
# configurations compile before, on every batch shape). fit: 3 rounds of fresh processes, 30
# steps each after 5 warm-up steps (a compile and its lazy backward land in step 1; seqcls
# recompiles for new lengths later, and that time is reported, not timed).
# bucketing: 10 rounds of 16 steps, 2 warm-up steps (no compile: the naive step); 160 batches
# are 31% of an epoch, so the timed batches' padding is near the epoch's.
DEFAULTS = {"verbs": (8, 24, 3), "fit": (3, 30, 5), "bucketing": (10, 160, 2)}
NO_EVAL = 10**9  # --eval-every for the naive scripts: far past any run, so they never evaluate
MAX_TOKENS_STEP = 64  # candidates for the token budget: multiples of 64 tokens from the longest

VERBS: dict[str, dict[str, dict[str, Any]]] = {
    "cnn": {
        "channels_last": {"channels_last": True},
        "fold_conv_bias": {"fold": True},
        "fused optimizer": {"fused": True},
        "bf16 autocast": {"amp": "bf16"},
        "compile": {"compile": True},
        "fast preset": {"preset": "fast"},
    },
    "lm": {
        "fused optimizer": {"fused": True},
        "bf16 autocast": {"amp": "bf16"},
        "bf16 + math attention": {"amp": "bf16", "attention": "math"},
        "compile": {"compile": True},
        "fast preset": {"preset": "fast"},
    },
    "seqcls": {
        "fused optimizer": {"fused": True},
        "bf16 autocast": {"amp": "bf16"},
        "fast preset": {"preset": "fast"},
    },
}
SCRIPTS = {w: f"examples/naive_{w}.py" for w in VERBS}
# fit cases: the fast preset, and changes to it (written to a temporary plan JSON).
FIT_PLANS: dict[str, dict[str, dict[str, Any]]] = {
    "cnn": {"fast": {}},
    "lm": {"fast": {}, "fast + math attention": {"attention": "math"}},
    "seqcls": {"fast": {}, "fast + length-bucket": {"batching": "length-bucket"}},
}
# seqcls's step time follows its batch, and the naive script's shuffle draws from the global RNG
# after the model's init while fit's uses its own generator: the two sides see different batches,
# so its rounds compare throughput over the window (samples over seconds), not step medians.
BY_THROUGHPUT = {"seqcls"}


# -- shared ----------------------------------------------------------------------------------
def spread(s: Summary | dict[str, Any], fmt: str = ".2f", quart: bool = True) -> str:
    d = s.to_dict() if isinstance(s, Summary) else s
    lo, hi = (d["q1"], d["q3"]) if quart else (d["min"], d["max"])
    return f"{d['median']:{fmt}} [{lo:{fmt}}–{hi:{fmt}}]"


def first_batches(recipe: Any, n: int) -> list[Any]:
    """The first ``n`` batches of the recipe's loader as ``torchpace fit`` builds it (shuffled
    with SEED, full batches), collated once, so no configuration's step waits on the loader."""
    loader = training_loader(recipe, SEED)
    out: list[Any] = []
    while len(out) < n:  # past an epoch, the next pass reshuffles, as training does
        out.extend(itertools.islice(loader, n - len(out)))
    return out


def shaped_batch(workload: str, shape: list[int]) -> tuple[torch.Tensor, ...]:
    """A meta batch of ``workload``'s layout whose input has ``shape``, for FLOP counting."""
    meta = {"device": "meta"}
    if workload == "cnn":
        return torch.empty(shape, **meta), torch.empty(shape[0], dtype=torch.long, **meta)
    ids = torch.empty(shape, dtype=torch.long, **meta)
    if workload == "lm":
        return ids, torch.empty(shape, dtype=torch.long, **meta)
    n = torch.empty(shape[0], dtype=torch.long, **meta)
    return ids, n, n


def peak_of(env: dict[str, Any], bf16: bool) -> float | None:
    return env["fingerprint"]["peak_tflops_bf16" if bf16 else "peak_tflops_fp32"]


def other_cores(cores: float | None) -> str:
    return "unknown" if cores is None else f"{cores:.2f} cores"


def other_load(res: dict[str, Any]) -> str:
    return f"{other_cores(res['foreign_cores'])} (limit {MAX_FOREIGN_CORES})"


def utilization(tflops: float | None, peak: float | None) -> str:
    if tflops is None:
        return "—"
    return f"{tflops:.2f} ({tflops / peak:.0%})" if peak else f"{tflops:.2f}"


# -- part 1: verbs ----------------------------------------------------------------------------
def build_variant(
    workload: str,
    dev: torch.device,
    *,
    channels_last: bool = False,
    fold: bool = False,
    fused: bool = False,
    amp: str = "off",
    attention: str = "default",
    compile: bool = False,
    preset: str | None = None,
) -> tuple[Callable[[Any], Work], dict[str, Any]]:
    """One configuration's step on a given batch: the naive one plus the given verbs (or
    ``preset`` through prepare()), and what was applied.

    Naive: the recipe's model and optimizer, ``zero_grad(set_to_none=False)`` and a
    ``loss.item()`` every step. The preset runs as fit() does: set_to_none and no per-step
    read. A step: move the batch (channels_last if asked), forward, backward, optimizer step,
    zero grads."""
    recipe = load(workload)
    torch.manual_seed(SEED)  # every configuration starts from the same weights
    model = recipe.model().to(dev)
    model.train()
    applied: list[Any] = []
    set_to_none, read_every_step, matmul = False, True, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if preset is not None:
            plan = Plan.preset(preset)
            optimizer = recipe.optimizer(model.parameters(), recipe.lr)
            before = torch.get_float32_matmul_precision()
            model, optimizer, _ = prepare(model, optimizer, plan=plan, device=dev, applied=applied)
            # set_fast_math is process-wide: keep it to this configuration's own steps.
            matmul = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision(before)
            channels_last, set_to_none, read_every_step = plan.channels_last, True, False
            compile = plan.compile != "off"
        else:
            if fold:  # before the optimizer is built: folded biases leave the parameters
                applied.append(fold_conv_bias(model))
            if channels_last:
                applied.append(use_channels_last(model))
            optimizer = recipe.optimizer(model.parameters(), recipe.lr)
            if fused:
                applied.append(fuse_optimizer(optimizer))
            if amp != "off":
                precision, chosen = choose_precision(dev, amp)
                applied += [chosen, autocast_forward(model, precision=precision)]
            if attention != "default":
                applied.append(use_attention_backend(model, backend=attention))
            if compile:
                applied.append(compile_model(model))

    def run(batch: Any) -> Work:
        work = Work(recipe.count_samples(batch), recipe.count_tokens(batch))  # on the host
        previous = torch.get_float32_matmul_precision()
        if matmul is not None:
            torch.set_float32_matmul_precision(matmul)
        try:
            batch = to_device(batch, dev, channels_last=channels_last)
            loss = recipe.loss(model, batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=set_to_none)
            if read_every_step:
                loss.item()  # note: a host-device sync, as the naive scripts' logging does
        finally:
            torch.set_float32_matmul_precision(previous)
        return work

    info = {
        "applied": [str(a) for a in applied],
        "changes": [c for a in applied for c in a.changes],
        "techniques": list(dict.fromkeys(a.technique for a in applied if a.changed)),
        "warnings": sorted({str(w.message) for w in caught}),
        "bf16": any(a.technique == "amp-bf16" and a.changed for a in applied),
        "compiled": compile,
        "set_to_none": set_to_none,
        "loss_item_every_step": read_every_step,
        "float32_matmul_precision": matmul or torch.get_float32_matmul_precision(),
    }
    return run, info


def stepper(
    name: str, run: Callable[[Any], Work], batches: list[Any], watch: CompileWatch, warmup: int
) -> Variant:
    """``run`` over ``batches`` in order, one per call: call i of every configuration takes
    batch i, so paired rounds compare equal work."""
    calls = [0]

    def step() -> Work:
        i = calls[0]
        calls[0] += 1
        watch.label = f"{name}|{'warm-up' if i < warmup else 'rounds'}"
        return run(batches[i % len(batches)])

    return Variant(name, step)


def prime(name: str, run: Callable[[Any], Work], batches: list[Any], watch: CompileWatch) -> float:
    """Compile ahead of the rounds: one step on the first batch of every distinct input shape
    (recompiles for new shapes would otherwise land in a timed round). The wall seconds."""
    watch.label = f"{name}|prime"
    seen: set[tuple[int, ...]] = set()
    t0 = time.perf_counter()
    for batch in batches:
        shape = tuple(batch[0].shape)
        if shape not in seen:
            seen.add(shape)
            run(batch)
    return time.perf_counter() - t0


def round_tflops(
    workload: str, batches: list[Any], res: PairedResult, index: int
) -> Summary | None:
    """Achieved TFLOP/s per round of variant ``index``: the FLOPs of the round's batches over
    its seconds (steps ``warmup + r * block ...`` took batches of the same indices)."""
    v = res.variants[index]
    per_round = []
    for r, secs in enumerate(v.block_seconds):
        first = res.warmup + r * res.block
        flops = sum(
            step_flops(workload, batches[(first + j) % len(batches)]) for j in range(res.block)
        )
        per_round.append(flops / secs / 1e12)
    return summarize(per_round) if per_round else None


def verbs_part(
    workloads: list[str],
    rounds: int,
    steps: int,
    warmup: int,
    dev: torch.device,
    env: dict[str, Any],
) -> dict[str, Any]:
    block = max(1, steps // rounds)
    watch = CompileWatch().install()
    out: dict[str, Any] = {}
    for workload in workloads:
        print(f"verbs: {workload} ({len(VERBS[workload]) + 1} configurations)", flush=True)
        batches = first_batches(load(workload), warmup + rounds * block)
        variants, infos = [], {}
        for name, kw in {"naive": {}, **VERBS[workload]}.items():
            run, info = build_variant(workload, dev, **kw)
            if info["compiled"]:
                info["prime_seconds"] = prime(name, run, batches, watch)
            variants.append(stepper(name, run, batches, watch, warmup))
            infos[name] = info
        res = compare(variants, rounds=rounds, block=block, warmup=warmup, device=dev)
        for i, v in enumerate(variants):
            tflops = round_tflops(workload, batches, res, i)
            infos[v.name].update(
                {
                    f"compile_seconds_{phase}": watch.seconds(0, float("inf"), f"{v.name}|{phase}")
                    for phase in ("prime", "warm-up", "rounds")
                },
                tflops=tflops.to_dict() if tflops else None,
                peak_tflops=peak_of(env, infos[v.name]["bf16"]),
            )
        out[workload] = {"paired": res.to_dict(), "variants": infos}
        torch._dynamo.reset()  # compiled graphs of one workload must not fill another's cache
    return {"workloads": out}


def report_verbs(part: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=150)
    for workload, data in part["workloads"].items():
        res = data["paired"]
        table = Table(
            title=f"verbs on {workload}: each alone against naive, in one process",
            caption=escape(
                f"median [q1–q3] over {res['rounds']} interleaved rounds of {res['block']} steps "
                f"per configuration, after {res['warmup']} warm-up steps; same initial weights, "
                "same pre-collated batches (no loader time); compiled configurations first ran "
                "one step per distinct batch shape (compile s: all their compiling, the first "
                "compile of the process with the compiler's start-up); TFLOP/s of the peak in "
                f"the configuration's precision; other load {other_load(res)}"
            ),
        )
        tokens = any(v["tokens_per_s"] for v in res["variants"])
        cols = ["configuration", "ms/step", "speed-up", "samples/s", "tokens/s"][: 4 + tokens]
        for col in (*cols, "TFLOP/s (of peak)", "compile s", "applied"):
            table.add_column(escape(col), justify="left" if col[0] in "ca" else "right")
        speedup = res["speedup"]
        for v in res["variants"]:
            x = data["variants"][v["name"]]
            ms = {k: v["step_seconds"][k] * 1e3 for k in ("median", "q1", "q3")}
            tf = x["tflops"]["median"] if x["tflops"] else None
            late = x["compile_seconds_warm-up"] + x["compile_seconds_rounds"]
            compiled = x["compile_seconds_prime"] + late
            row = [
                escape(v["name"]),
                escape(spread(ms, ".1f")),
                escape(spread(speedup[v["name"]]) + "×") if v["name"] in speedup else "baseline",
                f"{v['samples_per_s']['median']:,.0f}",
                *([f"{v['tokens_per_s']['median']:,.0f}"] if tokens else []),
                utilization(tf, x["peak_tflops"]),
                (f"{compiled:.1f}" + (f" ({late:.1f} after priming!)" if late else ""))
                if compiled
                else "—",
                escape(", ".join(x["techniques"]) or "; ".join(x["applied"]) or "—"),
            ]
            table.add_row(*row)
        console.print(table)
        for reason in res["noisy"]:
            print(f"  NOISY ({workload}): {reason}")


# -- part 2: fit against the naive scripts, fresh processes -----------------------------------
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
    of each (workload, plan name) (default: FIT_PLANS, as ``write_plans`` writes them);
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
                    else:
                        argv = ["fit", w, *plans[(w, side)], "--no-progress"]
                    argv += ["--steps", str(total), "--seed", str(seed)]
                    pad = PAD if w == "seqcls" else None
                    raw = run_child(
                        argv,
                        fit=side != "naive",
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


def goal_line(what: str, ratio: dict[str, Any], goal: float, above: int, rounds: int) -> str:
    """One line per goal: met (every round at or above it), or missed and by how much."""
    med, low = ratio["median"], ratio["min"]
    head = f"{what}: goal ≥{goal:g}×"
    if above == rounds:
        return f"{head} met: {med:.2f}× median, every round above it (lowest {low:.2f}×)"
    if med < goal:
        return (
            f"{head} MISSED by {goal - med:.2f}× at the median ({med:.2f}×); "
            f"{above} of {rounds} rounds above it"
        )
    return (
        f"{head} MISSED in {rounds - above} of {rounds} rounds: median {med:.2f}×, the lowest "
        f"round {low:.2f}× ({goal - low:.2f}× short)"
    )


# -- part 3: bucketing ------------------------------------------------------------------------
def choose_max_tokens(lengths: torch.Tensor, batch_size: int) -> tuple[int, float]:
    """The token budget whose epoch-0 mean batch size is closest to ``batch_size``: candidates
    are multiples of MAX_TOKENS_STEP from the longest sequence up (a budget below it is
    rejected); the mean batch grows with the budget, so the search stops once it passes."""
    n, longest = len(lengths), int(lengths.max())
    best: tuple[int, float] | None = None
    budget = -(-longest // MAX_TOKENS_STEP) * MAX_TOKENS_STEP
    while budget <= longest * batch_size:
        mean = n / len(TokenBudgetBatchSampler(lengths, budget, seed=SEED))
        if best is None or abs(mean - batch_size) < abs(best[1] - batch_size):
            best = (budget, mean)
        if mean >= batch_size:
            break
        budget += MAX_TOKENS_STEP
    assert best is not None
    return best


def take_batches(sampler: Any, n: int) -> tuple[list[list[int]], list[list[int]]]:
    """Epoch 0's batches (index lists), and the first ``n`` batches, from epoch 0 on (later
    epochs via ``set_epoch``, or, for a shuffling BatchSampler, its generator's next draw)."""
    epoch0 = [list(b) for b in sampler]
    out, epoch = epoch0[:n], 1
    while len(out) < n:
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        out += [list(b) for b in sampler][: n - len(out)]
        epoch += 1
    return epoch0, out


def bucketing_part(
    rounds: int, steps: int, warmup: int, dev: torch.device, env: dict[str, Any]
) -> dict[str, Any]:
    recipe = load("seqcls")
    data = recipe.dataset("train", seed=SEED)
    lengths, bs = data.lengths, recipe.batch_size
    max_tokens, mean_batch = choose_max_tokens(lengths, bs)
    loader = DataLoader(  # the recipe's loader, as torchpace fit builds it
        data,
        batch_size=bs,
        shuffle=True,
        drop_last=True,
        collate_fn=recipe.collate,
        generator=torch.Generator().manual_seed(SEED),
    )
    samplers: dict[str, Any] = {
        "random": loader.batch_sampler,
        "length-bucket": LengthBucketBatchSampler(lengths, bs, seed=SEED),
        "token-budget": TokenBudgetBatchSampler(lengths, max_tokens, seed=SEED),
    }
    block = max(1, steps // rounds)
    n = warmup + rounds * block
    variants, info = [], {}
    for name, sampler in samplers.items():
        epoch0, indices = take_batches(sampler, n)
        batches = [recipe.collate([data[i] for i in idx]) for idx in indices]
        run, _ = build_variant("seqcls", dev)  # the naive step: only the batches differ
        variants.append(stepper(name, run, batches, CompileWatch(), warmup))
        pad, pad_timed = padding_stats(epoch0, lengths), padding_stats(indices[warmup:], lengths)
        info[name] = {
            "batches_per_epoch": len(epoch0),
            "mean_batch_size": len(lengths) / len(epoch0),
            "useful_fraction_epoch": pad.useful_fraction,
            "useful_tokens_epoch": pad.useful_tokens,
            "padded_tokens_epoch": pad.padded_tokens,
            "useful_fraction_timed": pad_timed.useful_fraction,
            "real_tokens_per_step": [int(lengths[idx].sum()) for idx in indices],
            "flops_per_step": [step_flops("seqcls", b) for b in batches],
        }
    res = compare(variants, rounds=rounds, block=block, warmup=warmup, device=dev)
    rates = {}
    for v in res.variants:
        x = info[v.name]
        toks, secs = x["real_tokens_per_step"], v.block_seconds
        rates[v.name] = [
            sum(toks[warmup + r * block : warmup + (r + 1) * block]) / s for r, s in enumerate(secs)
        ]
        x["useful_tokens_per_s"] = summarize(rates[v.name]).to_dict()
        x["useful_tokens_per_s_overall"] = sum(toks[warmup:]) / sum(secs)
        x["tflops_overall"] = sum(x.pop("flops_per_step")[warmup:]) / sum(secs) / 1e12
    base = res.variants[0].name
    for v in res.variants[1:]:
        ratios = [a / b for a, b in zip(rates[v.name], rates[base], strict=True)]
        s = summarize(ratios)
        overall = info[v.name]["useful_tokens_per_s_overall"]
        info[v.name].update(
            ratio=s.to_dict(),
            ratio_overall=overall / info[base]["useful_tokens_per_s_overall"],
            rounds_above_goal=sum(x >= GOAL_BUCKETING for x in ratios),
            noisy=verdict(s.rel_iqr, res.foreign_cores),
        )
    paired = res.to_dict()
    paired.pop("speedup")  # time per step over different batches: not a comparable figure
    paired.pop("noisy")  # judged on the speedup above; the useful-token ratios' is per sampler
    return {
        "compared_over": f"the same number of steps ({block} per round per sampler); "
        "throughput as useful (unpadded) tokens per second",
        "batch_size": bs,
        "max_tokens": max_tokens,
        "max_tokens_how": f"the multiple of {MAX_TOKENS_STEP} from the longest sequence "
        f"({int(lengths.max())}) with the epoch-0 mean batch closest to {bs} ({mean_batch:.1f})",
        "configuration": "the naive step (recipe Adam, set_to_none=False, loss.item() every "
        "step), fp32, batches pre-collated",
        "paired": paired,
        "samplers": info,
    }


def report_bucketing(part: dict[str, Any]) -> list[str]:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    res = part["paired"]
    table = Table(
        title="seqcls batching: useful tokens per second, in one process",
        caption=escape(
            f"median [q1–q3] over {res['rounds']} interleaved rounds of {res['block']} steps per "
            f"sampler after {res['warmup']} warm-up steps; {part['configuration']}; same initial "
            "weights, different batches by construction; random: the recipe's shuffled "
            f"DataLoader, batches of {part['batch_size']} padded to their longest; useful "
            "tokens: padding_stats over epoch 0 (over the timed batches); × overall: summed "
            f"over all rounds; max_tokens: {part['max_tokens_how']}; other load {other_load(res)}"
        ),
    )
    cols = ("batching", "batches/epoch", "mean batch", "useful tokens", "ms/step", "samples/s")
    for col in (*cols, "useful tok/s", "× random", "× overall", "TFLOP/s"):
        table.add_column(escape(col), justify="left" if col == "batching" else "right")
    verdicts = []
    for v in res["variants"]:
        x = part["samplers"][v["name"]]
        name = v["name"] + (f" ({part['max_tokens']})" if v["name"] == "token-budget" else "")
        table.add_row(
            escape(name),
            f"{x['batches_per_epoch']}",
            f"{x['mean_batch_size']:.1f}",
            f"{x['useful_fraction_epoch']:.1%} ({x['useful_fraction_timed']:.1%})",
            f"{v['step_seconds']['median'] * 1e3:.1f}",
            f"{v['samples_per_s']['median']:,.0f}",
            f"{x['useful_tokens_per_s']['median']:,.0f}",
            escape(spread(x["ratio"]) + "×") if "ratio" in x else "baseline",
            f"{x['ratio_overall']:.2f}×" if "ratio" in x else "",
            f"{x['tflops_overall']:.3f}",
        )
        if "ratio" in x:
            what = f"bucketing, {name} against random batches (useful tokens/s)"
            verdicts.append(
                goal_line(what, x["ratio"], GOAL_BUCKETING, x["rounds_above_goal"], res["rounds"])
            )
    Console(width=150).print(table)
    for v in res["variants"]:
        for reason in part["samplers"][v["name"]].get("noisy", []):
            print(f"  NOISY ({v['name']}): {reason}")
    return verdicts


# -- main ---------------------------------------------------------------------------------------
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
