"""Doctor overhead: a training script's step time under `torchpace doctor` against a plain run.

Each workload's naive example script runs in fresh subprocesses, in rounds of two: *plain* (the
script under a harness that only installs a global optimizer step post hook recording
``perf_counter()``) and *doctored* (the same script under ``torchpace.doctor.script.run``, every
instrument on, with the same hook registered after the doctor's, so each step's time includes
what the doctor does at its end). Rounds alternate the order (A B, B A, ...). Both runs take the
same seeded batches; both are timed on the same step indices: after the doctor's warm-up (3
steps) and its probe step (FLOPs and line tracing, never timed), ``--measured`` steps.

    make bench-doctor
    python benchmarks/doctor_overhead.py --json benchmarks/results/<date>-doctor-overhead.json

``--corpus NAME`` adds a public script of ``benchmarks/script_corpus`` (materialised under
``.corpus/scripts``), run with its own arguments, working directory and environment; its plain
side is stopped once it has the steps the doctored side measures, and its loss lines are read
with the entry's ``loss_pattern``.

Per round: the ratio doctored / plain of the median step times (cnn, lm), or, for seqcls whose
batch lengths vary from step to step, the median of the per-step ratios (same step index, same
batch). Across rounds: the median ratio with its min–max; overhead = ratio - 1. ``--off`` turns
instruments off on the doctored side, to find which one costs the time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _provenance import finished, started

from torchpace.measure.noise import MAX_FOREIGN_CORES

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {
    "cnn": "examples/naive_cnn.py",
    "lm": "examples/naive_lm.py",
    "seqcls": "examples/naive_seqcls.py",
}
# seqcls pads each batch to its longest sequence, so its step time follows the batch: its
# rounds compare step i with step i. The others' steps are alike: their medians are compared.
PAIR_BY_STEP = {"seqcls"}
WARMUP = 3  # the doctor's default (`torchpace doctor --warmup`)
# 3%: the limit on the doctor's cost per step on the reference workloads.
LIMIT = 0.03
INSTRUMENTS = ("backward", "loaders", "syncs", "modules", "sampler")


CORPUS_ROOT = ROOT / ".corpus" / "scripts"


def workload_spec(name: str) -> dict[str, Any]:
    """How to run a workload: a naive example (``--steps`` appended) or a corpus entry."""
    if name in WORKLOADS:
        return {
            "script": str(ROOT / WORKLOADS[name]),
            "args": [],
            "steps_arg": True,
            "cwd": str(ROOT),
            "env": dict(os.environ),
            "loss_re": r"^step \d+ loss",
        }
    corpus = str(ROOT / "benchmarks" / "script_corpus")
    if corpus not in sys.path:  # once, though every run asks
        sys.path.insert(0, corpus)
    from run_corpus import entry_env, load_entries

    (entry,) = load_entries([name])
    return {
        "script": str(CORPUS_ROOT / entry["script"]),
        "args": list(entry["args"]),
        "steps_arg": False,
        "cwd": str(CORPUS_ROOT / entry["cwd"]),
        "env": entry_env(entry, CORPUS_ROOT),
        "loss_re": entry["loss_pattern"],
    }


class _Enough(BaseException):
    """Ends a plain run once it has the steps the doctored side measures."""


# -- the child: one run of one script, timed by a global optimizer step post hook -------------
def turn_off(names: list[str]) -> None:
    """Replace doctor instruments with no-ops before the session starts (diagnosis only)."""
    from torchpace.doctor import hooks, loaders, syncs

    def nothing(*args: Any) -> None:
        return None

    for name in names:
        if name == "backward":
            hooks.install_backward = nothing
        elif name == "sampler":
            from torchpace.doctor.sampler import StackSampler

            StackSampler.start = nothing  # type: ignore[method-assign]
        elif name == "loaders":
            loaders.install = nothing
        elif name == "syncs":
            syncs.install = nothing
        elif name == "modules":  # hooks stay registered but do nothing: no roots are found
            hooks.ModuleHooks._pre = nothing  # type: ignore[method-assign]
            hooks.ModuleHooks._post = nothing  # type: ignore[method-assign]
        else:
            raise SystemExit(f"--off: unknown instrument {name!r}; one of {INSTRUMENTS}")


def child(
    mode: str, script: str, script_args: list[str], *, measured: int, off: list[str], out: str
) -> None:
    from time import perf_counter, process_time

    from torch.optim.optimizer import register_optimizer_step_post_hook

    from torchpace.measure.noise import LoadProbe

    stamps: list[float] = []
    cpu: list[float] = []  # process CPU time, every thread: less moved by other load than wall
    load: dict[str, Any] = {}

    def stamp(opt: object, args: object, kwargs: object) -> None:
        stamps.append(perf_counter())
        cpu.append(process_time())
        if len(stamps) == WARMUP + 1:  # end of the probe step: the measured window starts
            load["probe"] = LoadProbe()
        elif "probe" in load:
            load["foreign_cores"] = load["probe"].foreign_cores()
        if mode == "plain" and len(stamps) >= WARMUP + 1 + measured + 2:
            raise _Enough

    doctor_steps: list[tuple[str, float]] = []
    outcome = "the script finished"
    sys.argv = [script, *script_args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    start = perf_counter()
    if mode == "plain":
        register_optimizer_step_post_hook(stamp)
        try:
            runpy.run_path(script, run_name="__main__")
        except _Enough:
            outcome = "stopped after the measured steps"
    else:
        from torchpace.doctor import script as runner
        from torchpace.doctor.session import Session

        turn_off(off)
        sessions: list[Session] = []
        original = Session.start

        def start_then_stamp(self: Session) -> None:
            original(self)
            sessions.append(self)
            register_optimizer_step_post_hook(stamp)  # after the doctor's own post hook

        Session.start = start_then_stamp  # type: ignore[method-assign]
        # One step more than measured: the doctor stops the script in its post hook, before ours.
        ran = runner.run(script, script_args, steps=measured + 1, warmup=WARMUP)
        outcome = ran.outcome
        doctor_steps = [(s.kind, s.seconds) for s in sessions[0].rec.records.steps]
    Path(out).write_text(
        json.dumps(
            {
                "first_step_s": stamps[0] - start if stamps else None,
                "step_s": [b - a for a, b in itertools.pairwise(stamps)],
                "step_cpu_s": [b - a for a, b in itertools.pairwise(cpu)],
                "doctor_steps": doctor_steps,
                "foreign_cores": load.get("foreign_cores"),
                "outcome": outcome,
            }
        )
    )


# -- the parent: rounds, pairing, summary ---------------------------------------------------------
def run_once(
    mode: str, workload: str, measured: int, off: list[str], tmp: str
) -> tuple[dict[str, Any], list[str], float]:
    """One fresh subprocess; its step times, the script's loss lines, and its wall time."""
    out = os.path.join(tmp, f"{workload}-{mode}.json")
    spec = workload_spec(workload)
    steps = WARMUP + 1 + measured + 1
    child_cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--out", out]
    cmd = [*child_cmd, "--measured", str(measured)]
    cmd += ["--off", ",".join(off)] if off else []
    cmd += ["--", spec["script"], *spec["args"]]
    cmd += ["--steps", str(steps)] if spec["steps_arg"] else []
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=spec["cwd"], env=spec["env"])
    wall = time.perf_counter() - t0
    if done.returncode != 0 or not os.path.exists(out):
        raise SystemExit(f"{workload} {mode} failed (exit {done.returncode}):\n{done.stderr}")
    data = json.loads(Path(out).read_text())
    os.remove(out)
    # The loss lines: the same losses in both runs show they trained on the same batches.
    pattern = re.compile(spec["loss_re"])
    found = (pattern.search(ln) for ln in done.stdout.splitlines())
    losses = [m.group(0) for m in found if m]  # the loss text only, not a line's timings
    return data, losses, wall


def window(step_s: list[float], measured: int) -> list[float]:
    """The measured steps: after WARMUP warm-up steps and the probe step.

    ``step_s[i]`` is the step that ends at optimizer step i + 2 (the first step, from the start
    of the script, has no start stamp)."""
    first = WARMUP + 2  # 1-based index of the first measured step
    return step_s[first - 2 : first - 2 + measured]


def pair(plain: list[float], doctored: list[float], *, by_step: bool) -> dict[str, float]:
    """One round's ratio doctored / plain: of the medians, or the median of per-step ratios."""
    per_step = statistics.median(d / p for p, d in zip(plain, doctored, strict=True))
    of_medians = statistics.median(doctored) / statistics.median(plain)
    return {
        "ratio": per_step if by_step else of_medians,
        "ratio_of_medians": of_medians,
        "median_per_step_ratio": per_step,
    }


def spread(values: list[float]) -> dict[str, float]:
    xs = sorted(values)
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else xs * 3
    return {"median": statistics.median(xs), "q1": q1, "q3": q3, "min": xs[0], "max": xs[-1]}


def measure(
    workloads: list[str], rounds: int, measured: int, off: list[str], *, control: bool = False
) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {w: [] for w in workloads}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            order = ("plain", "doctored") if r % 2 == 0 else ("doctored", "plain")
            for w in workloads:
                # --control: both sides plain, to show the harness's own bias (an A/A test).
                runs = {
                    side: run_once("plain" if control else side, w, measured, off, tmp)
                    for side in order
                }
                (plain, plain_losses, plain_wall) = runs["plain"]
                (doc, doc_losses, doc_wall) = runs["doctored"]
                p, d = window(plain["step_s"], measured), window(doc["step_s"], measured)
                if len(p) != measured or len(d) != measured:
                    raise SystemExit(f"{w}: fewer steps than asked ({len(p)}, {len(d)})")
                p_cpu, d_cpu = (
                    window(plain["step_cpu_s"], measured),
                    window(doc["step_cpu_s"], measured),
                )
                probe = [s for k, s in doc["doctor_steps"] if k == "probe"]
                foreign = [
                    v for v in (plain["foreign_cores"], doc["foreign_cores"]) if v is not None
                ]
                row = {
                    "round": r + 1,
                    "order": list(order),
                    "plain_median_s": statistics.median(p),
                    "doctored_median_s": statistics.median(d),
                    **pair(p, d, by_step=w in PAIR_BY_STEP),
                    "cpu": pair(p_cpu, d_cpu, by_step=w in PAIR_BY_STEP),
                    # Near 1 when both runs' step times follow the same batches.
                    "step_time_correlation": statistics.correlation(p, d),
                    "same_losses": bool(doc_losses)
                    and plain_losses[: len(doc_losses)] == doc_losses,
                    "foreign_cores": {
                        "plain": plain["foreign_cores"],
                        "doctored": doc["foreign_cores"],
                    },
                    "quiet": bool(foreign) and max(foreign) <= MAX_FOREIGN_CORES,
                    "plain_step_s": p,
                    "doctored_step_s": d,
                    "plain_step_cpu_s": p_cpu,
                    "doctored_step_cpu_s": d_cpu,
                    "doctor_own_step_s": [s for k, s in doc["doctor_steps"] if k == "measured"],
                    "probe_step_s": probe[0] if probe else None,
                    "first_step_s": {
                        "plain": plain["first_step_s"],
                        "doctored": doc["first_step_s"],
                    },
                    "wall_s": {"plain": plain_wall, "doctored": doc_wall},
                    "doctor_outcome": doc["outcome"],
                    "losses": {"plain": plain_losses, "doctored": doc_losses},
                }
                out[w].append(row)
                print(
                    f"  round {r + 1} {w:7s} plain {row['plain_median_s'] * 1e3:6.1f} ms"
                    f"  doctored {row['doctored_median_s'] * 1e3:6.1f} ms"
                    f"  ratio {row['ratio']:.3f} (CPU time {row['cpu']['ratio']:.3f})"
                    f"  other load {max(foreign, default=float('nan')):.2f} cores"
                    f"{'' if row['same_losses'] else '  LOSSES DIFFER'}",
                    flush=True,
                )
    return out


def summarise(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    summary = {}
    for w, rs in rows.items():
        ratio = spread([r["ratio"] for r in rs])
        quiet = [r["ratio"] for r in rs if r["quiet"]]
        summary[w] = {
            "ratio": ratio,
            "ratio_is": "median_per_step_ratio" if w in PAIR_BY_STEP else "ratio_of_medians",
            "overhead_pct": (ratio["median"] - 1) * 100,
            "over_limit": ratio["median"] - 1 > LIMIT,
            "quiet_rounds": len(quiet),
            "ratio_quiet_rounds": spread(quiet) if quiet else None,
            "cpu_ratio": spread([r["cpu"]["ratio"] for r in rs]),
            "plain_ms": spread([r["plain_median_s"] * 1e3 for r in rs]),
            "doctored_ms": spread([r["doctored_median_s"] * 1e3 for r in rs]),
            "step_time_correlation": spread([r["step_time_correlation"] for r in rs]),
            "same_losses_every_round": all(r["same_losses"] for r in rs),
            "foreign_cores_max": max(
                (v for r in rs for v in r["foreign_cores"].values() if v is not None), default=None
            ),
        }
    return summary


def report(summary: dict[str, Any], rounds: int, measured: int) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        title="torchpace doctor overhead (doctored ÷ plain step time)",
        caption=escape(
            f"median [min–max] over {rounds} rounds; {measured} measured steps per run, after "
            f"{WARMUP} warm-up steps and the probe step; limit {LIMIT:.0%}"
        ),
    )
    cols = ("workload", "plain ms/step", "doctored ms/step", "ratio [min–max]", "overhead")
    for col in (*cols, "CPU-time ratio", "paired by", "quiet rounds"):
        table.add_column(escape(col), justify="left" if col == "workload" else "right")
    for w, s in summary.items():
        r, c = s["ratio"], s["cpu_ratio"]
        table.add_row(
            w,
            f"{s['plain_ms']['median']:.1f}",
            f"{s['doctored_ms']['median']:.1f}",
            escape(f"{r['median']:.3f} [{r['min']:.3f}–{r['max']:.3f}]"),
            f"[{'bold red' if s['over_limit'] else 'green'}]{s['overhead_pct']:+.1f}%[/]",
            escape(f"{c['median']:.3f} [{c['min']:.3f}–{c['max']:.3f}]"),
            "step" if s["ratio_is"] == "median_per_step_ratio" else "median",
            f"{s['quiet_rounds']}/{rounds}",
        )
    Console(width=132).print(table)
    for w, s in summary.items():
        if not s["same_losses_every_round"]:
            print(f"WARNING: {w}: the two runs printed different losses; the pairing is broken")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--measured", type=int, default=20, help="measured steps per run")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated")
    ap.add_argument("--off", default="", help=f"doctored side without these: {INSTRUMENTS}")
    ap.add_argument("--control", action="store_true", help="both sides plain (an A/A test)")
    ap.add_argument(
        "--corpus", action="append", default=[], help="a script_corpus entry to add (repeatable)"
    )
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--child", choices=("plain", "doctored"), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("script", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args()
    off = [n for n in args.off.split(",") if n]
    if args.child:
        script = args.script[1:] if args.script[:1] == ["--"] else args.script
        child(args.child, script[0], script[1:], measured=args.measured, off=off, out=args.out)
        return

    import torch

    from torchpace.measure.env import fingerprint

    workloads = [w for w in args.workloads.split(",") if w] + args.corpus
    env = started(fingerprint(torch.device("cpu"), measure_peak=False).to_dict())
    fp = env["fingerprint"]
    print(
        f"{fp['cpu_model']}, {fp['cores']} cores, torch {env['torch']}, "
        f"torchpace {env['torchpace_git']}; load: {env['uptime_before']}"
    )
    rows = measure(workloads, args.rounds, args.measured, off, control=args.control)
    finished(env)
    summary = summarise(rows)
    report(summary, args.rounds, args.measured)
    print(f"load: {env['uptime_after']}")
    if args.json:
        out = {
            "environment": env,
            "settings": {
                "rounds": args.rounds,
                "measured_steps": args.measured,
                "warmup": WARMUP,
                "doctored_off": off,
                "control": args.control,
                "workloads": {w: WORKLOADS.get(w, f"corpus: {w}") for w in workloads},
                "limit": LIMIT,
            },
            "summary": summary,
            "rounds": rows,
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
