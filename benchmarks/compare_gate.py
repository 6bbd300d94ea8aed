"""The `torchpace compare --against` gate on planted pairs, quiet or beside CPU-bound processes
(issue 30's "done when"): an A/A comparison must raise no alarm, a step planted 10% slower and
a worse learning rate must fail the gate.

    python benchmarks/compare_gate.py --aa 10 --hogs 0 --json benchmarks/results/X.json
    python benchmarks/compare_gate.py --aa 10 --hogs 2 --json ...   # beside two busy loops

Each comparison runs `tests/script/scripts/planted_whole_run.py` (a sleep per step, a
least-squares loss) committed in a temporary git repository, as a user's CI would: the working
tree against HEAD, --rounds 3. The record per comparison: exit code, each figure's verdict and
paired range, the loss verdict, the load the compare measured, and its wall time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "script" / "scripts" / "planted_whole_run.py"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import finished, started  # noqa: E402


@contextlib.contextmanager
def hogs(n: int) -> Iterator[None]:
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def _ratio(r: dict) -> dict:
    keep = ("speedup", "lo", "hi")
    return {**{k: round(r[k], 3) for k in keep}, "verdict": r["verdict"]}


def compare(repo: Path, rounds: int, steps: int) -> dict:
    out = repo.parent / "compare.json"
    out.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "torchpace", "compare", "train.py", "--against", "HEAD",
         "--rounds", str(rounds), "--json", str(out), "--", "--max-steps", str(steps)],
        cwd=repo, capture_output=True, text=True, env=env, timeout=1800,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    if not out.exists():
        return {"rc": proc.returncode, "error": proc.stderr[-2000:], "wall_s": wall}
    doc = json.loads(out.read_text())
    return {
        "rc": proc.returncode,
        "wall_s": round(wall, 1),
        "ratios": {k: _ratio(r) for k, r in doc["ratios"].items()},
        "loss": {"ok": doc["loss"]["ok"], "why": doc["loss"]["why"]},
        "load": doc["load"],
        "regressed": doc["regressed"],
        "noisy": doc["noisy"],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--aa", type=int, default=10, help="A/A comparisons (default 10)")
    p.add_argument("--hogs", type=int, default=0, help="CPU-bound processes beside (default 0)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    import torch

    from torchpace.measure.env import fingerprint

    env = started(fingerprint(torch.device("cpu"), measure_peak=False).to_dict())
    results: dict = {"what": __doc__.split("\n\n")[0], "environment": env,
                     "hogs": args.hogs, "rounds": args.rounds, "steps": args.steps}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, hogs(args.hogs):
        repo = Path(tmp) / "repo"
        repo.mkdir()
        script = repo / "train.py"
        script.write_text(PLANTED.read_text())
        _git(repo, "init", "-q")
        _git(repo, "add", "train.py")
        _git(repo, "commit", "-qm", "planted")
        aa = []
        for i in range(args.aa):
            aa.append(compare(repo, args.rounds, args.steps))
            print(f"A/A {i + 1}/{args.aa}: rc={aa[-1]['rc']} {aa[-1].get('noisy') or ''}",
                  flush=True)  # fmt: skip
        results["aa"] = aa
        original = script.read_text()
        script.write_text(original.replace("STEP_MS = 20.0", "STEP_MS = 22.0"))
        results["step_10pct_slower"] = compare(repo, args.rounds, args.steps)
        print(f"step +10%: rc={results['step_10pct_slower']['rc']}", flush=True)
        script.write_text(original.replace("LR = 0.05", "LR = 0.005"))
        results["lr_10x_lower"] = compare(repo, args.rounds, args.steps)
        print(f"LR / 10: rc={results['lr_10x_lower']['rc']}", flush=True)
    alarms = sum(r["rc"] == 1 for r in results["aa"])
    noisy = sum(bool(r.get("noisy")) for r in results["aa"])
    results["summary"] = {
        "aa_alarms": alarms,
        "aa_noisy": noisy,
        "aa_runs": args.aa,
        "step_regression_caught": results["step_10pct_slower"]["rc"] == 1,
        "lr_regression_caught": results["lr_10x_lower"]["rc"] == 1,
    }
    finished(env)
    print(json.dumps(results["summary"]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
