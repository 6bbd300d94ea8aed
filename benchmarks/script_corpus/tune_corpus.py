"""`torchpace tune` and `torchpace run --plan` on each public script of the corpus, unmodified.

    python benchmarks/script_corpus/tune_corpus.py --json benchmarks/results/<date>-corpus-tune.json
    python benchmarks/script_corpus/tune_corpus.py --only nanogpt-shakespeare-char --budget 2m

For each corpus entry (``corpus.json``; materialise the corpus first with ``make_corpus.py``):

1. ``torchpace tune SCRIPT --budget B --steps S --out OUT -- ARGS`` in the entry's cwd, with its
   PYTHONPATH: the doctor's survey, the trials, the plan (kept: rc, the table, the rows);
2. when the plan changes something: ``python SCRIPT ARGS`` and ``torchpace run --plan PLAN
   SCRIPT -- ARGS``, alternating, ``--rounds`` times each, timed on the wall clock from start to
   exit (the script's set-up included on both sides; compile time is part of ``run``'s).

The scripts' own output goes to OUT/NAME/*.log. Every figure names the CPU, the load and the
command that produced it (``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from run_corpus import REPO_ROOT, entry_env, load_entries, run_logged


def _env(entry: dict[str, Any], root: Path, cache: Path) -> dict[str, str]:
    return entry_env(entry, root) | {"TORCHPACE_CACHE_DIR": str(cache)}


def _timed(cmd: list[str], cwd: Path, env: dict[str, str], log: Path, timeout: float) -> dict:
    t0 = time.perf_counter()
    rc = run_logged(cmd, cwd, env, log, timeout)
    return {"rc": rc, "wall_s": round(time.perf_counter() - t0, 2), "log": str(log)}


def tune_entry(entry: dict[str, Any], root: Path, out: Path, args: argparse.Namespace) -> dict:
    name = entry["name"]
    dest = out / name
    dest.mkdir(parents=True, exist_ok=True)
    cwd = root / entry["cwd"]
    env = _env(entry, root, out / "cache")
    script = str(root / entry["script"])
    tune = [
        sys.executable,
        "-m",
        "torchpace",
        "tune",
        script,
        "--budget",
        args.budget,
        "--steps",
        str(args.steps),
        "--out",
        str(dest),
        "--",
        *entry["args"],
    ]
    res: dict[str, Any] = {"name": name, "repo": entry["repo"], "commit": entry["commit"]}
    res["tune_command"] = shlex.join(["python", *tune[1:]])
    res["tune"] = _timed(tune, cwd, env, dest / "tune.log", args.timeout)
    found = dest / "torchpace-tune.json"
    if res["tune"]["rc"] != 0 or not found.exists():
        log = Path(res["tune"]["log"]).read_text(errors="replace").splitlines()
        res["error"] = next((x for x in reversed(log) if x.strip()), "")[:400]
        return res
    result = json.loads(found.read_text())
    res["plan"] = result["plan"]["techniques"]
    res["survey"] = result.get("survey")
    res["rows"] = [
        {k: r[k] for k in ("name", "speedup", "cumulative", "loss_delta", "verdict")}
        for r in result["rows"]
    ]
    res["confirm"] = result["confirm"]
    res["trials"] = {t["name"]: t["status"] for t in result["trials"]}
    if not res["plan"] or args.rounds == 0:
        return res
    plain = [sys.executable, script, *entry["args"]]
    run = [
        sys.executable,
        "-m",
        "torchpace",
        "run",
        "--plan",
        str(dest / "torchpace-plan.json"),
        script,
        "--",
        *entry["args"],
    ]
    rounds: list[dict[str, Any]] = []
    for i in range(args.rounds):
        sides = [("plain", plain), ("run", run)]
        r = {}
        for side, cmd in sides if i % 2 == 0 else sides[::-1]:
            r[side] = _timed(cmd, cwd, env, dest / f"{side}-{i + 1}.log", args.timeout)
        rounds.append(r)
    ratios = [
        r["plain"]["wall_s"] / r["run"]["wall_s"]
        for r in rounds
        if r["plain"]["rc"] == 0 and r["run"]["rc"] == 0
    ]
    res["run"] = {
        "rounds": rounds,
        "wall_ratios": ratios,
        "median": statistics.median(ratios) if ratios else None,
        "commands": [shlex.join(["python", *plain[1:]]), shlex.join(["python", *run[1:]])],
    }
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=REPO_ROOT / ".corpus" / "scripts")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--budget", default="3m", help="each tune's --budget (3m)")
    ap.add_argument("--steps", type=int, default=8, help="each tune's --steps (8)")
    ap.add_argument("--rounds", type=int, default=2, help="plain/run pairs per script (2)")
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--out", type=Path, default=REPO_ROOT / ".corpus" / "tuned")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    root = args.root.resolve()
    import platform

    env = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "loadavg_before": os.getloadavg(),
        "settings": vars(args) | {"root": str(root), "out": str(args.out), "json": str(args.json)},
    }
    results = []
    for entry in load_entries(args.only):
        print(f"{entry['name']}: tune ({time.strftime('%H:%M:%S')})", flush=True)
        res = tune_entry(entry, root, args.out.resolve(), args)
        results.append(res)
        run = res.get("run") or {}
        print(
            f"  tune rc={res['tune']['rc']} {res['tune']['wall_s']:.0f} s; plan "
            f"{', '.join(res.get('plan') or []) or '(as written)'}; "
            + (f"run/plain wall {run['median']:.2f}× " if run.get("median") else "")
            + (f"ERROR {res['error']}" if "error" in res else ""),
            flush=True,
        )
        if args.json:
            env["loadavg_after"] = os.getloadavg()
            args.json.write_text(json.dumps({"environment": env, "scripts": results}, indent=1))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
