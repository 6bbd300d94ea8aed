#!/usr/bin/env python
"""Kill `torchpace fit`, `doctor` and `tune` at random points and check what they leave behind.

    make test-faults                                   # 30 interruptions per verb (~20 min)
    python benchmarks/fault_injection.py --per-verb 30 --json benchmarks/results/<date>-faults.json

Each verb runs again and again in its own work directory, each run interrupted after a random
delay by SIGINT, SIGTERM or SIGKILL (in turn), the way a user, a scheduler or the OOM killer
would. After each interruption it checks:

- **nothing corrupt**: every checkpoint `fit` left loads (`checkpoint.load`); the tune cache
  reads with at most a torn last line (which the cache skips by design) and every other line
  is a valid trial; every JSON output (`--json`, the plan, the result) that exists parses;
- **no orphan process**: within 10 s, no process carrying this run's marker in its environment
  (children inherit it: trial workers, loader workers, the script) is left;
- **no finished work redone**: fit resumes with `--resume latest` and its checkpoints' steps
  only grow; the tune cache never holds two successful results for one trial key;
- **a clear message**: for SIGINT and SIGTERM the exit status is 130 or 143 (or 0/1 when the
  run had already ended) and stderr has no Python traceback; SIGKILL leaves no message to
  check.

Figures: interruptions tried per verb and signal, and each failed check with its run (zero is
the goal). Only the standard library and torchpace are used; the recipe is the built-in
``cnn`` workload, CPU-sized.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
MARK = "TORCHPACE_FAULT_MARK"
TUNE_CACHE_RUNS = 4  # tune runs per cache before a fresh one


@dataclass
class Verb:
    name: str
    argv: list[str]  # after `python -m torchpace`
    delay: tuple[float, float]  # seconds after the start to interrupt, uniform
    checks: list[str] = field(default_factory=list)


def verbs(work: Path) -> list[Verb]:
    script = work / "train.py"
    script.write_text(
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "ds = TensorDataset(torch.randn(512, 16), torch.randn(512, 1))\n"
        "loader = DataLoader(ds, batch_size=16, shuffle=True, num_workers=1)\n"
        "model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), "
        "torch.nn.Linear(64, 1))\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "for epoch in range(10**6):\n"
        "    for x, y in loader:\n"
        "        opt.zero_grad()\n"
        "        torch.nn.functional.mse_loss(model(x), y).backward()\n"
        "        opt.step()\n"
    )
    return [
        Verb(
            "fit",
            [
                "fit",
                "cnn",
                "--steps",
                "100000",
                "--checkpoint-dir",
                "ck",
                "--checkpoint-every",
                "10",
                "--resume",
                "latest",
                "--no-progress",
                "--json",
                "fit.json",
            ],
            (3.0, 12.0),
        ),
        Verb(
            "doctor",
            ["doctor", "--steps", "0", "--no-lint", "--json", "doctor.json", str(script)],
            (1.0, 10.0),
        ),
        Verb(
            "tune",
            ["tune", "cnn", "--budget", "2m", "--steps", "8", "--warmup", "2", "--out", "out"],
            (2.0, 20.0),
        ),
    ]


def _marked_pids(mark: str) -> list[int]:
    """Processes whose environment carries ``mark`` (this run's and its children's)."""
    found = []
    needle = f"{MARK}={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def _orphans(mark: str, wait_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + wait_s
    while True:
        left = _marked_pids(mark)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _check_json(path: Path) -> list[str]:
    if not path.exists():
        return []
    try:
        json.loads(path.read_text())
    except (ValueError, OSError) as e:
        return [f"{path.name} does not parse: {e}"]
    return []


def _check_fit(work: Path, state: dict[str, Any]) -> list[str]:
    from torchpace.train import checkpoint

    problems = _check_json(work / "fit.json")
    steps = []
    for ckpt in sorted((work / "ck").glob("step-*.pt")):
        try:
            steps.append(checkpoint.load(ckpt)["step"])
        except Exception as e:  # any failure to load is corruption
            problems.append(f"{ckpt.name} does not load: {e}")
    latest = max(steps, default=0)
    if latest < state.get("latest", 0):
        problems.append(f"checkpoints went back from step {state['latest']} to {latest}")
    state["latest"] = latest
    stale = list((work / "ck").glob(".step-*.tmp")) if (work / "ck").exists() else []
    state["stale_tmp"] = len(stale)  # removed by the next save; counted, not a failure
    return problems


def _check_doctor(work: Path, state: dict[str, Any]) -> list[str]:
    return _check_json(work / "doctor.json")


def _check_tune(work: Path, state: dict[str, Any]) -> list[str]:
    from torchpace.tune.results import ResultsFile

    problems = _check_json(work / "out" / "torchpace-tune.json")
    problems += _check_json(work / "out" / "torchpace-plan.json")
    cache = work / "cache"
    for trials in cache.glob("tune/*/trials.jsonl"):
        rf = ResultsFile(trials)
        rf.load()
        lines = [ln for ln in trials.read_bytes().splitlines() if ln.strip()]
        if rf.skipped > 1 or (rf.skipped == 1 and lines and _valid_line(lines[-1])):
            problems.append(f"{rf.skipped} unreadable lines in the cache beyond a torn last one")
        ok_keys: dict[str, int] = {}
        for line in lines:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and d.get("status") == "ok":
                ok_keys[d["key"]] = ok_keys.get(d["key"], 0) + 1
        again = [k for k, n in ok_keys.items() if n > 1]
        if again:
            problems.append(f"{len(again)} finished trial(s) run again: {again[:2]}")
    return problems


def _valid_line(line: bytes) -> bool:
    try:
        json.loads(line)
        return True
    except ValueError:
        return False


CHECKS = {"fit": _check_fit, "doctor": _check_doctor, "tune": _check_tune}


def interrupt_once(
    verb: Verb, work: Path, sig: signal.Signals, rng: random.Random, state: dict[str, Any]
) -> dict[str, Any]:
    mark = uuid.uuid4().hex
    env = {**os.environ, MARK: mark, "TORCHPACE_CACHE_DIR": str(work / "cache")}
    delay = rng.uniform(*verb.delay)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchpace", *verb.argv],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        proc.wait(timeout=delay)
        ended_first = True
    except subprocess.TimeoutExpired:
        ended_first = False
        proc.send_signal(sig)

    def record(code: int | None, problems: list[str], notes: list[str]) -> dict[str, Any]:
        return {
            "signal": sig.name,
            "delay_s": round(delay, 2),
            "ended_before_signal": ended_first,
            "exit": code,
            "wall_s": round(time.monotonic() - t0, 2),
            "problems": problems,
            "notes": notes,
        }

    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        return record(None, ["did not end within 120 s"], [])
    problems: list[str] = []
    notes: list[str] = []
    code = proc.returncode
    if not ended_first and sig != signal.SIGKILL:
        if code not in (0, 1, 2, 130, 143):
            problems.append(f"exit status {code}")
        # The doctor runs the user's script: Ctrl-C prints the script's own traceback, as
        # Python does, and the script's DataLoader workers print theirs when the main process
        # stops under them. Those are the script's (noted); torchpace's verbs print one line.
        if "Traceback (most recent call last)" in err:
            last = err.strip().splitlines()[-1][:200]
            if verb.name == "doctor":
                notes.append("the script printed a traceback: " + last)
            else:
                problems.append("a traceback on stderr: " + last)
    left = _orphans(mark)
    if left:
        problems.append(f"{len(left)} process(es) left running: {left[:5]}")
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    problems += CHECKS[verb.name](work, state)
    return record(code, problems, notes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--per-verb", type=int, default=30, help="interruptions per verb (30)")
    ap.add_argument("--verbs", default="fit,doctor,tune")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if not Path("/proc").is_dir():
        raise SystemExit("needs Linux /proc to find orphaned processes")
    rng = random.Random(args.seed)
    report: dict[str, Any] = {"per_verb": args.per_verb, "seed": args.seed, "verbs": {}}
    failed = 0
    with tempfile.TemporaryDirectory(prefix="torchpace-faults-") as tmp:
        for verb in verbs(Path(tmp)):
            if verb.name not in args.verbs.split(","):
                continue
            work = Path(tmp) / verb.name
            work.mkdir()
            (work / "train.py").write_text((Path(tmp) / "train.py").read_text())
            state: dict[str, Any] = {}
            runs = []
            for i in range(args.per_verb):
                sig = SIGNALS[i % len(SIGNALS)]
                if verb.name == "tune" and i and i % TUNE_CACHE_RUNS == 0:
                    # A cache that holds the whole search ends a run before its signal: start
                    # a new one now and then (the checks above covered the old one).
                    shutil.rmtree(work / "cache", ignore_errors=True)
                    shutil.rmtree(work / "out", ignore_errors=True)
                r = interrupt_once(verb, work, sig, rng, state)
                runs.append(r)
                failed += bool(r["problems"])
                mark = "FAIL " + "; ".join(r["problems"]) if r["problems"] else "ok"
                print(
                    f"{verb.name:6s} {i + 1:3d} {sig.name:7s} after {r.get('delay_s', 0):5.1f}s "
                    f"exit {r.get('exit')}: {mark}",
                    flush=True,
                )
            by_signal = {
                s.name: {
                    "tried": sum(1 for r in runs if r["signal"] == s.name),
                    "interrupted": sum(
                        1 for r in runs if r["signal"] == s.name and not r["ended_before_signal"]
                    ),
                    "failed": sum(1 for r in runs if r["signal"] == s.name and r["problems"]),
                    "script_tracebacks": sum(
                        1 for r in runs if r["signal"] == s.name and r["notes"]
                    ),
                }
                for s in SIGNALS
            }
            report["verbs"][verb.name] = {"by_signal": by_signal, "runs": runs}
    total = sum(len(v["runs"]) for v in report["verbs"].values())
    print(f"{total} runs, {failed} with a problem")
    report["runs"] = total
    report["failed"] = failed
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
