"""tune.py's results in words: one verdict line per goal (the speed-up with the convergence
guard, the tune's wall time, the cached re-run's), and the table, on the terminal."""

from __future__ import annotations

from typing import Any

from _speedups_common import goal_line, spread, utilization

from torchpace.measure.noise import MAX_FOREIGN_CORES

# The goals on time of issue 6 ("Goals"); the speed-up goals are tune.py's GOALS, which each
# workload's fit part carries in its summary.
GOAL_TUNE_S = 300.0  # a whole tune of one workload, on the wall clock (issue 6)
GOAL_CACHED_S = 5.0  # an unchanged re-run, answered from the cache (issue 6)


def verdicts_of(w: str, x: dict[str, Any]) -> list[str]:
    """One line per goal: the speed-up with the guard, the tune's wall time, the re-run's."""
    if x["tune"]["result"] is None:
        return [f"{w}: every goal MISSED: {x['error']}"]
    t = x["tune"]["wall_s"]
    out = [
        f"{w}: tune ≤{GOAL_TUNE_S:.0f} s wall: "
        + (
            f"met ({t:.0f} s)"
            if t <= GOAL_TUNE_S
            else f"MISSED by {t - GOAL_TUNE_S:.0f} s ({t:.0f} s)"
        )
    ]
    r = x["rerun"]
    if "trials" in r:
        how = f"{r['cached_trials']} of {r['trials']} trials from the cache"
        how += f"; ran afresh: {', '.join(r['ran_afresh'])}" if r["ran_afresh"] else ""
        how += "" if r["same_plan"] else "; its plan DIFFERS from the cold tune's"
    else:
        how = f"exit {r['rc']}"
    s = r["wall_s"]
    met = s <= GOAL_CACHED_S
    out.append(
        f"{w}: cached re-run ≤{GOAL_CACHED_S:g} s: "
        + (
            f"met ({s:.1f} s; {how})"
            if met
            else f"MISSED by {s - GOAL_CACHED_S:.1f} s ({s:.1f} s; {how})"
        )
    )
    if "speedup" not in x:
        out.append(f"{w}: speed-up goal MISSED: {x.get('error', 'not measured')}")
        return out
    sp, g = x["speedup"], x["guard"]
    if not sp["goal"]:
        out.append(f"{w}: no speed-up goal on this device ({spread(sp['ratio'], quart=False)}×)")
        return out
    line = goal_line(
        f"{w}, tuned plan against naive",
        sp["ratio"],
        sp["goal"],
        sp["rounds_above_goal"],
        sp["rounds"],
    )
    if not x["added"]:
        line += "; the plan adds nothing to the recipe as written"
    elif g["passed"]:
        line += "; convergence guard passed"
    else:
        why = "; ".join(g["why_not"])
        line = (
            f"{w}: goal ≥{sp['goal']:g}× MISSED: the convergence guard did not pass ({why}); {line}"
        )
    out.append(line)
    return out


def report(results: dict[str, Any], env: dict[str, Any]) -> list[str]:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    fit, fp = env["settings"]["fit"], env["fingerprint"]
    table = Table(
        title="torchpace tune, then its plan against the naive example script",
        caption=escape(
            f"tune: `torchpace tune W --budget {env['settings']['budget']} --no-cache`, seconds "
            "from start to exit, compile cache cold; re-run: the same without --no-cache, "
            f"trials from the cache / all; speed-up: median [min–max] over {fit['rounds']} "
            f"round{'s' * (fit['rounds'] != 1)} of fresh processes, the order alternating, "
            f"{fit['measured']} steps after {fit['warmup']} warm-up steps per run, "
            "of median step times (samples/s where the batches differ: ratio by); goal: "
            "rounds at or above it; guard: the tune's convergence guard on what the plan "
            "adds; TFLOP/s of the fp32 (naive) / the plan's precision peak; load: most "
            "other load, cores"
        ),
    )
    cols = ("workload", "tune s", "re-run s", "plan adds", "ms/step", "speed-up", "by")
    for col in (*cols, "goal", "guard", "TFLOP/s (of peak)", "load"):
        left = col in ("workload", "plan adds", "by", "guard")
        table.add_column(escape(col), justify="left" if left else "right")
    verdicts: list[str] = []
    for w, x in results.items():
        verdicts += verdicts_of(w, x)
        if x["tune"]["result"] is None:
            table.add_row(w, f"{x['tune']['wall_s']:.0f}", *["—"] * 9)
            continue
        r = x["rerun"]
        cached = f" ({r['cached_trials']}/{r['trials']})" if "trials" in r else ""
        cells = [
            w,
            f"{x['tune']['wall_s']:.0f}",
            f"{r['wall_s']:.1f}{cached}",
            escape(", ".join(x["added"]) or "nothing"),
        ]
        if "speedup" not in x:
            table.add_row(*cells, *["—"] * 7)
            continue
        s = x["speedup"]
        naive_ms, fit_ms = (s[f"{k}_median_step_s"]["median"] * 1e3 for k in ("naive", "fit"))
        goal = "—"
        if s["goal"]:
            color = "green" if s["rounds_above_goal"] == s["rounds"] else "bold red"
            goal = f"[{color}]≥{s['goal']:g}×: {s['rounds_above_goal']}/{s['rounds']}[/]"
        g = x["guard"]
        guard = (
            ("[green]passed[/]" if g["passed"] else "[bold red]NOT passed[/]")
            if x["added"]
            else "—"
        )
        peak = fp["peak_tflops_bf16" if "amp-bf16" in x["added"] else "peak_tflops_fp32"]
        tflops = (
            f"{utilization(s['naive_tflops']['median'], fp['peak_tflops_fp32'])} → "
            f"{utilization(s['fit_tflops']['median'], peak)}"
        )
        load = s["foreign_cores_max"]
        table.add_row(
            *cells,
            f"{naive_ms:.0f} → {fit_ms:.0f}",
            escape(spread(s["ratio"], quart=False) + "×"),
            "samples/s" if s["ratio_is"].startswith("samples") else "step time",
            goal,
            guard,
            escape(tflops),
            "—" if load is None else f"{load:.2f}",
        )
    Console(width=150).print(table)
    for w, x in results.items():
        load = x.get("speedup", {}).get("foreign_cores_max")
        if load is not None and load > MAX_FOREIGN_CORES:
            print(f"  NOISY ({w}): other load reached {load:.2f} cores (limit {MAX_FOREIGN_CORES})")
        for name, why in x.get("guard", {}).get("rejected", {}).items():
            print(f"  {w}: {name}: {why}")
    return verdicts
