"""`torchpace doctor --verify` on each public script of the corpus, unmodified.

    python benchmarks/script_corpus/doctor_corpus.py --json benchmarks/results/DATE-doctor.json
    python benchmarks/script_corpus/doctor_corpus.py --only word-language-model --verify-budget 2m

For each corpus entry (``corpus.json``; materialise the corpus first with ``make_corpus.py``):
``torchpace doctor --steps S --warmup W --verify --verify-budget B --json OUT SCRIPT -- ARGS`` in
the entry's cwd, with its PYTHONPATH and environment. From the result it keeps what the doctor
found (how steps were marked, how many, child processes), the top findings with their estimated
gain and the speed-up ``--verify`` measured for them, the FLOP count, MFU and the ops it could
not count, and the run's noise; or, when no step was measured, the doctor's own words why.

``--results DIR`` keeps each script's whole doctor result as ``DIR/NAME.json`` (the repository
keeps the newest run's in ``benchmarks/results/corpus-doctor/``): tests/doctor/test_schema.py
checks every one of them against the published schema.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from run_corpus import REPO_ROOT, entry_env, load_entries, run_logged

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _provenance import finished, started

from torchpace.measure.env import fingerprint


def _last_line(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines()
    said = [x for x in lines if x.startswith("torchpace doctor")]
    return (said[-1] if said else next((x for x in reversed(lines) if x.strip()), ""))[:400]


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    util = result.get("utilisation") or {}
    top = []
    for f in result["findings"][:5]:
        v = f.get("verified") or {}
        top.append(
            {
                "technique": f["technique"],
                "pattern": f.get("pattern"),
                "code": f.get("code"),
                "gain": f.get("gain"),
                "estimated_speedup": v.get("estimated_speedup"),
                "measured_speedup": v.get("speedup"),
                "verdict": v.get("verdict"),
                "demoted": f.get("demoted"),
                "where": f"{Path(f['path']).name}:{f['line']}" if f.get("path") else None,
            }
        )
    return {
        "steps_marked_by": result["run"].get("steps_marked_by"),
        "steps_seen": result["run"].get("optimizer_steps_seen"),
        "kept": result["steps"]["kept"],
        "micro_steps": result.get("micro_steps"),
        "step_ms": (result.get("step_seconds") or {}).get("median", 0) * 1e3 or None,
        "child_processes": result["run"].get("child_processes"),
        "flops_per_step": util.get("flops_per_step"),
        "mfu": util.get("mfu"),
        "mfu_impossible": util.get("mfu_impossible"),
        "uncounted_ops": util.get("uncounted_ops"),
        "hot_spots": [
            {k: s[k] for k in ("function", "line", "phase", "share")}
            for s in (result.get("hot_spots") or {}).get("spots", [])[:3]
        ],
        "noise": result.get("noise"),
        "top": top,
        "verify": result.get("verify"),
    }


def doctor_entry(entry: dict[str, Any], root: Path, out: Path, args: argparse.Namespace) -> dict:
    name = entry["name"]
    dest = out / name
    dest.mkdir(parents=True, exist_ok=True)
    cwd = root / entry["cwd"]
    env = entry_env(entry, root) | {
        "TORCHPACE_CACHE_DIR": str(out / "cache"),
        "TORCHPACE_VALIDATE_RESULTS": "1",  # each result checked against the published schema
    }
    result_path = dest / "doctor.json"
    result_path.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "torchpace",
        "doctor",
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        "--json",
        str(result_path),
        *(["--verify", "--verify-budget", args.verify_budget] if args.verify_budget else []),
        str(root / entry["script"]),
        "--",
        *entry["args"],
    ]
    res: dict[str, Any] = {"name": name, "repo": entry["repo"], "commit": entry["commit"]}
    res["command"] = shlex.join(["python", *cmd[1:]])
    t0 = time.perf_counter()
    res["rc"] = run_logged(cmd, cwd, env, dest / "doctor.log", args.timeout)
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    if not result_path.exists():
        res["not_measured"] = _last_line(dest / "doctor.log")
        return res
    result = json.loads(result_path.read_text())
    if args.results:
        args.results.mkdir(parents=True, exist_ok=True)
        (args.results / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    res |= _summary(result)
    if not res["steps_seen"]:  # a run with no step writes its result too: outcome, no figures
        res["not_measured"] = _last_line(dest / "doctor.log")
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=REPO_ROOT / ".corpus" / "scripts")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--steps", type=int, default=10, help="the doctor's --steps (10)")
    ap.add_argument("--warmup", type=int, default=3, help="the doctor's --warmup (3)")
    ap.add_argument(
        "--verify-budget", default="2m", help="--verify's budget per script (2m; '' skips it)"
    )
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--out", type=Path, default=REPO_ROOT / ".corpus" / "doctored")
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--results", type=Path, help="a folder for each script's whole doctor result (NAME.json)"
    )
    args = ap.parse_args(argv)
    root = args.root.resolve()
    import torch

    env = started(fingerprint(torch.device("cpu")).to_dict())
    results = []
    for entry in load_entries(args.only):
        print(f"{entry['name']}: doctor ({time.strftime('%H:%M:%S')})", flush=True)
        res = doctor_entry(entry, root, args.out.resolve(), args)
        results.append(res)
        top = (res.get("top") or [{}])[0]
        print(
            f"  rc={res['rc']} {res['wall_s']:.0f} s; steps by {res.get('steps_marked_by')}; "
            f"top {top.get('technique')} gain {top.get('gain')}; verified "
            f"{top.get('measured_speedup')}; mfu {res.get('mfu')}"
            + (f"; NOT MEASURED: {res['not_measured']}" if "not_measured" in res else ""),
            flush=True,
        )
        if args.json:
            args.json.write_text(json.dumps({"environment": env, "scripts": results}, indent=1))
    finished(env)
    if args.json:
        args.json.write_text(json.dumps({"environment": env, "scripts": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
