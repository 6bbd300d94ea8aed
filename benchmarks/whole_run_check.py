"""The tune's stated whole-run effect against `torchpace compare`'s measurement (issue 30):
tune a script, read the plan's `expected.whole_run`, then run the whole script as written and
with the plan, rounds alternating, and report both with the paired range.

    python benchmarks/whole_run_check.py --json benchmarks/results/X.json \\
        examples/naive_cnn.py -- --steps 150 --eval-every 50
    python benchmarks/whole_run_check.py --entry nanogpt-shakespeare-char --json X.json
        # a public script of benchmarks/script_corpus (its cwd, arguments and PYTHONPATH),
        # materialised under --corpus (default .corpus/scripts) by make_corpus.py

Run it once per script. The record: the plan's techniques, its per-step and whole-run
estimates, the compare's whole-run, in-step and time-to-loss ratios with their ranges, and the
estimate's error against the measured median.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import finished, started  # noqa: E402


def _run(
    *args: str, timeout: float, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = env if env is not None else dict(os.environ)
    path = os.pathsep.join(p for p in (str(ROOT / "src"), base.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "torchpace", *args],
        capture_output=True,
        text=True,
        env={**base, "PYTHONPATH": path},
        timeout=timeout,
        cwd=cwd,
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("script", nargs="?")
    p.add_argument("--entry", help="a script_corpus entry (corpus.json name) instead of a script")
    p.add_argument("--corpus", type=Path, default=ROOT / ".corpus" / "scripts")
    p.add_argument("--budget", default="4m")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", type=Path)
    argv = sys.argv[1:]
    script_args: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, script_args = argv[:i], argv[i + 1 :]
    args = p.parse_args(argv)
    cwd, run_env = ROOT, None
    if args.entry:
        sys.path.insert(0, str(ROOT / "benchmarks" / "script_corpus"))
        from run_corpus import entry_env, load_entries

        (entry,) = load_entries([args.entry])
        root = args.corpus.resolve()
        args.script = str(root / entry["script"])
        script_args = [*entry["args"], *script_args]
        cwd, run_env = root / entry["cwd"], entry_env(entry, root)
    elif not args.script:
        p.error("give a script or --entry NAME")
    import torch

    from torchpace.measure.env import fingerprint

    env = started(fingerprint(torch.device("cpu"), measure_peak=False).to_dict())
    record: dict = {"script": args.script, "entry": args.entry, "args": script_args,
                    "environment": env}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        tune = _run("tune", args.script, "--budget", args.budget, "--out", str(out), "--no-cache",
                    "--", *script_args, timeout=3600, cwd=cwd, env=run_env)  # fmt: skip
        record["tune_tail"] = (tune.stdout + tune.stderr)[-3000:]
        plan_path = out / "torchpace-plan.json"
        if tune.returncode != 0 or not plan_path.exists():
            record["error"] = f"tune exited {tune.returncode}"
        else:
            plan = json.loads(plan_path.read_text())
            record["plan"] = {k: plan.get(k) for k in ("techniques", "expected")}
            cmp_json = out / "compare.json"
            compare = _run("compare", args.script, "--plan", str(plan_path), "--rounds",
                           str(args.rounds), "--json", str(cmp_json), "--", *script_args,
                           timeout=3600, cwd=cwd, env=run_env)  # fmt: skip
            record["compare_tail"] = (compare.stdout + compare.stderr)[-3000:]
            if cmp_json.exists():
                doc = json.loads(cmp_json.read_text())
                record["compare"] = {
                    "ratios": doc["ratios"],
                    "loss": doc["loss"],
                    "work": doc["work"],
                    "load": doc["load"],
                    "runs": [
                        {k: r[k] for k in ("side", "round", "wall_s", "in_steps_s", "outside_s",
                                           "steps", "samples", "final_loss", "foreign_cores")}
                        for r in doc["runs"]
                    ],
                }  # fmt: skip
                expected = (plan.get("expected") or {}).get("whole_run")
                if not plan.get("techniques"):
                    expected = 1.0  # the plan is the script as written: the tune expects 1.00x
                whole = doc["ratios"].get("whole run", {})
                # a plan that changes the work of a run bounded by steps (a larger batch) is
                # stated at equal samples: compared with the time to the as-written samples
                against = "whole run"
                if whole.get("verdict") == "other work":
                    against = "time to the baseline's samples"
                measured = doc["ratios"].get(against, {}).get("speedup")
                record["estimate_against"] = against
                if expected and measured:
                    record["estimate_error"] = expected / measured - 1
    finished(env)
    print(json.dumps({k: record.get(k) for k in ("plan", "estimate_against", "estimate_error")},
                     indent=1))  # fmt: skip
    if "compare" in record:
        print(json.dumps({k: (v["speedup"], v["lo"], v["hi"], v["verdict"])
                          for k, v in record["compare"]["ratios"].items()}, indent=1))  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
