"""Issue 29's check on scripts nobody here tuned for: each script of this folder tuned twice,
once on a quiet machine and once beside two CPU-bound processes, and `doctor --verify` quiet.

    python benchmarks/tune_corpus/run.py tune --condition quiet --out /tmp/tc
    python benchmarks/tune_corpus/run.py tune --condition loaded --out /tmp/tc
    python benchmarks/tune_corpus/run.py verify --out /tmp/tc
    python benchmarks/tune_corpus/run.py ab --out /tmp/tc
    python benchmarks/tune_corpus/run.py judge --out /tmp/tc --json RESULT.json

`tune` and `verify` run one script at a time, each with a cache of its own (`--no-cache`), and
keep every `torchpace-tune.json` / doctor result under OUT. `judge` reads them back:

- quiet against loaded, verdict by verdict: the same class (kept, not worth it, slower, rejected,
  not applicable), or the loaded one says "noisy: not judged"; the same plan, or every verdict
  that differs is noisy in the loaded run;
- no "confirmed" figure outside the paired rounds' range, and none from a loaded confirmation;
- every `--verify` estimate that was judged (not noisy, not failed) against its measure: within
  ±25% (the measured speed-up over the promised one, 0.8-1.25);
- the estimates a plan applies (fused AdamW/Adam here) against a hand A/B: `torchpace compare
  --plan` with the change alone, 5 rounds alternating, time per step.

The load is recorded beside every run (`/proc/loadavg` before and after). Nothing else may run
on the machine meanwhile: a third process makes "loaded" mean more than two hogs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _provenance import git_state  # noqa: E402

# script -> its arguments for a tune (each run long enough for the survey and the trials)
SCRIPTS: dict[str, list[str]] = {
    "char_padded.py": [],
    "tiny_gpt.py": [],
    "diffusion_2d.py": [],
    "dqn_cartpole.py": [],
    "toy_bert.py": [],
    "io_images.py": [],
}
HOGS = 2
# A hand A/B of each estimate --verify can check: the script, shortened, with the change alone
# (`torchpace compare --plan`, rounds alternating), against the script as written.
AB: dict[str, tuple[str, list[str]]] = {
    "tiny_gpt.py": ("fused-optimizer", ["--max-iters", "200"]),
    "diffusion_2d.py": ("fused-optimizer", ["--epochs", "15"]),
    "dqn_cartpole.py": ("fused-optimizer", ["--total-steps", "2000"]),
}
AB_ROUNDS = 5
# Estimates no plan applies, checked against the change made by hand (ab/): the script as
# written at a commit of a scratch repository, the variant as its working tree
# (`torchpace compare SCRIPT --against HEAD`, rounds alternating; ratios are as written over the
# variant, so > 1 is the variant faster).
AB_BY_HAND: dict[str, tuple[str, str, list[str]]] = {
    "char_padded.py": ("length-bucketing", "ab/char_padded_trimmed.py", ["--steps", "150"]),
    "toy_bert.py": ("length-bucketing", "ab/toy_bert_bucketed.py", ["--steps", "150"]),
}
# the plan of the script as written with one change (what tune writes for it alone)
_AS_WRITTEN = {
    "version": 1,
    "amp": "off",
    "channels_last": False,
    "fold_conv_bias": False,
    "fused_optimizer": False,
    "grad_set_to_none": False,
    "fast_math": False,
    "compile": "off",
    "attention": "default",
    "loader": "keep",
    "loader_workers": None,
    "prefetch": False,
    "batching": "as-is",
    "max_tokens": None,
    "batch_size": None,
    "lr_scaling": "sqrt",
    "accumulate": 1,
    "schedule": "constant",
    "checkpoint_modules": [],
    "preallocate": False,
    "log_every": 50,
    "techniques": [],
}
_CHANGES = {"fused-optimizer": {"fused_optimizer": True}}


def _load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


@contextlib.contextmanager
def _hogs(n: int) -> Iterator[None]:
    """``n`` CPU-bound processes for the duration."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(1.0)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _torchpace(args: list[str], cwd: Path, cache: Path, log: Path) -> dict[str, Any]:
    env = {**os.environ, "TORCHPACE_CACHE_DIR": str(cache)}
    before, t0 = _load(), time.perf_counter()
    with log.open("w") as f:
        rc = subprocess.call(
            [sys.executable, "-m", "torchpace", *args], cwd=cwd, env=env, stdout=f, stderr=f
        )
    return {
        "rc": rc,
        "wall_s": round(time.perf_counter() - t0, 1),
        "loadavg_before": before,
        "loadavg_after": _load(),
    }


def tune(out: Path, condition: str, budget: str, only: list[str]) -> None:
    for script, args in SCRIPTS.items():
        if only and script not in only:
            continue
        dest = out / condition / Path(script).stem
        dest.mkdir(parents=True, exist_ok=True)
        cmd = ["tune", "--budget", budget, "--no-cache", "--out", str(dest), script, "--", *args]
        with _hogs(HOGS if condition == "loaded" else 0):
            run = _torchpace(cmd, HERE, dest / "cache", dest / "log.txt")
        run.update(condition=condition, command=cmd, source=git_state())
        (dest / "run.json").write_text(json.dumps(run, indent=2) + "\n")
        print(f"{condition} {script}: rc {run['rc']}, {run['wall_s']} s", flush=True)


def verify(out: Path, budget: str, only: list[str]) -> None:
    for script, args in SCRIPTS.items():
        if only and script not in only:
            continue
        dest = out / "verify" / Path(script).stem
        dest.mkdir(parents=True, exist_ok=True)
        cmd = [
            "doctor",
            "--verify",
            "--verify-budget",
            budget,
            "--json",
            str(dest / "doctor.json"),
            script,
            "--",
            *args,
        ]
        run = _torchpace(cmd, HERE, dest / "cache", dest / "log.txt")
        run.update(condition="quiet", command=cmd, source=git_state())
        (dest / "run.json").write_text(json.dumps(run, indent=2) + "\n")
        print(f"verify {script}: rc {run['rc']}, {run['wall_s']} s", flush=True)


def ab(out: Path, only: list[str]) -> None:
    for script, (technique, args) in AB.items():
        if only and script not in only:
            continue
        dest = out / "ab" / Path(script).stem
        dest.mkdir(parents=True, exist_ok=True)
        plan = {**_AS_WRITTEN, **_CHANGES[technique], "techniques": [technique]}
        (dest / "plan.json").write_text(json.dumps(plan, indent=2) + "\n")
        cmd = ["compare", script, "--plan", str(dest / "plan.json"), "--rounds", str(AB_ROUNDS)]
        cmd += ["--json", str(dest / "compare.json"), "--", *args]
        run = _torchpace(cmd, HERE, dest / "cache", dest / "log.txt")
        run.update(condition="quiet", command=cmd, source=git_state(), technique=technique)
        (dest / "run.json").write_text(json.dumps(run, indent=2) + "\n")
        print(f"ab {script}: rc {run['rc']}, {run['wall_s']} s", flush=True)


def ab_by_hand(out: Path, only: list[str]) -> None:
    import shutil

    for script, (technique, variant, args) in AB_BY_HAND.items():
        if only and script not in only:
            continue
        dest = out / "ab" / Path(script).stem
        repo = dest / "repo"
        shutil.rmtree(repo, ignore_errors=True)
        repo.mkdir(parents=True)
        shutil.copy(HERE / script, repo / script)
        git = ["git", "-c", "user.name=ab", "-c", "user.email=ab@localhost"]
        for cmd in (["init", "-q"], ["add", script], ["commit", "-qm", "as written"]):
            subprocess.run([*git, *cmd], cwd=repo, check=True)
        shutil.copy(HERE / variant, repo / script)  # the change by hand, in the working tree
        cmd = ["compare", script, "--against", "HEAD", "--rounds", str(AB_ROUNDS)]
        cmd += ["--json", str(dest / "compare.json"), "--", *args]
        run = _torchpace(cmd, repo, dest / "cache", dest / "log.txt")
        run.update(condition="quiet", command=cmd, source=git_state(), technique=technique)
        run["variant"] = variant
        (dest / "run.json").write_text(json.dumps(run, indent=2) + "\n")
        print(f"ab by hand {script}: rc {run['rc']}, {run['wall_s']} s", flush=True)


def judge_ab(out: Path) -> list[dict[str, Any]]:
    """Each hand A/B's time per step against the doctor's estimate for the same change (the
    survey of the quiet --verify run)."""
    report = []
    plans = {k: (t, a) for k, (t, a) in AB.items()}
    by_hand = {k: (t, a) for k, (t, _, a) in AB_BY_HAND.items()}
    for script, (technique, args) in {**plans, **by_hand}.items():
        dest = out / "ab" / Path(script).stem
        doctor = out / "verify" / Path(script).stem / "doctor.json"
        entry: dict[str, Any] = {"script": script, "technique": technique, "args": args}
        if (dest / "compare.json").exists():
            c = json.loads((dest / "compare.json").read_text())
            step = c["ratios"].get("time per step")
            entry["run"] = json.loads((dest / "run.json").read_text())
            entry["measured"] = step
        if doctor.exists():
            findings = json.loads(doctor.read_text())["findings"]
            f = next((f for f in findings if f.get("technique") == technique), None)
            gain = None if f is None else (f.get("verified") or {}).get("estimated_gain")
            gain = gain if gain is not None else (None if f is None else f.get("gain"))
            entry["estimated_speedup"] = None if gain is None else 1.0 / (1.0 - gain)
        got, est = (entry.get("measured") or {}).get("speedup"), entry.get("estimated_speedup")
        if got and est:
            entry["ratio"] = round(got / est, 3)
            entry["within_25"] = 0.8 <= got / est <= 1.25
        report.append(entry)
    return report


_CLASSES = ("kept", "not worth it", "slower", "rejected", "trained lower", "not applicable")


def verdict_class(verdict: str) -> str:
    """A row's verdict reduced to what a user acts on."""
    v = verdict.lower()
    if v.startswith("noisy"):
        return "noisy"
    if v.startswith("not run"):
        return "not run"
    for c in _CLASSES:
        if v.startswith(c) or c in v.split(":")[0]:
            return c
    return v.split(":")[0].split("(")[0].strip()


def _rows(tune_json: dict[str, Any]) -> dict[str, str]:
    return {r["name"]: r["verdict"] for r in tune_json["rows"]}


def judge_tunes(out: Path) -> list[dict[str, Any]]:
    report = []
    for script in SCRIPTS:
        stem = Path(script).stem
        sides: dict[str, Any] = {}
        for condition in ("quiet", "loaded"):
            path = out / condition / stem / "torchpace-tune.json"
            run_path = out / condition / stem / "run.json"
            run = json.loads(run_path.read_text()) if run_path.exists() else None
            sides[condition] = {
                "run": run,
                "tune": json.loads(path.read_text()) if path.exists() else None,
            }
        entry: dict[str, Any] = {"script": script}
        for condition, side in sides.items():
            t = side["tune"]
            entry[condition] = {
                "run": side["run"],
                "plan": None if t is None else t["plan"]["techniques"],
                "rows": None if t is None else _rows(t),
                "noisy": None if t is None else t["noisy"],
                "confirm": None if t is None else t["confirm"],
                "trials": None if t is None else len(t["trials"]),
            }
        q, lo = sides["quiet"]["tune"], sides["loaded"]["tune"]
        problems: list[str] = []
        if q is None or lo is None:
            problems.append("a tune wrote no result")
        else:
            qr, lr = _rows(q), _rows(lo)
            differing = []
            for name in qr.keys() & lr.keys():
                a, b = verdict_class(qr[name]), verdict_class(lr[name])
                if a != b and b not in ("noisy", "not run") and a not in ("noisy", "not run"):
                    differing.append(f"{name}: quiet {qr[name]!r}, loaded {lr[name]!r}")
            problems += differing
            same_plan = sorted(q["plan"]["techniques"]) == sorted(lo["plan"]["techniques"])
            entry["same_plan"] = same_plan
            # each technique in one plan and not the other: what the other run said of it
            explained = {}
            for t in set(q["plan"]["techniques"]) ^ set(lo["plan"]["techniques"]):
                said = {
                    c: [r["verdict"] for r in side["rows"] if t in r["techniques"]]
                    for c, side in (("quiet", q), ("loaded", lo))
                }
                explained[t] = said
                loaded_classes = {verdict_class(v) for v in said["loaded"]}
                if loaded_classes - {"noisy", "not run"}:
                    problems.append(f"{t}: in one plan only, and the loaded run drew a verdict")
            entry["plan_differences"] = explained
            for condition, t in (("quiet", q), ("loaded", lo)):
                c = t["confirm"]
                ratios = c.get("ratios") or []
                confirmed = c.get("median") is not None and ratios and not c.get("noise")
                if confirmed and not min(ratios) <= c["median"] <= max(ratios):
                    problems.append(f"{condition}: confirmed figure outside its rounds")
        entry["problems"] = problems
        report.append(entry)
    return report


def judge_verify(out: Path) -> list[dict[str, Any]]:
    report = []
    for script in SCRIPTS:
        path = out / "verify" / Path(script).stem / "doctor.json"
        run_path = out / "verify" / Path(script).stem / "run.json"
        entry: dict[str, Any] = {
            "script": script,
            "run": json.loads(run_path.read_text()) if run_path.exists() else None,
            "checked": [],
        }
        if path.exists():
            result = json.loads(path.read_text())
            for f in result["findings"]:
                v = f.get("verified")
                if not v:
                    continue
                item = {
                    "technique": f["technique"],
                    "estimated_speedup": v["estimated_speedup"],
                    "speedup": v["speedup"],
                    "verdict": v["verdict"],
                    "noise": v["noise"],
                }
                est, got = v["estimated_speedup"], v["speedup"]
                judged = not v["noise"] and est is not None and got is not None
                judged = judged and not v["verdict"].startswith(("rejected", "failed", "not "))
                item["judged"] = judged
                if judged:
                    item["ratio"] = round(got / est, 3)
                    item["within_25"] = 0.8 <= got / est <= 1.25
                entry["checked"].append(item)
        report.append(entry)
    return report


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("tune", "verify", "ab", "judge"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--condition", choices=("quiet", "loaded"), default="quiet")
    p.add_argument("--budget", default="3m")
    p.add_argument("--only", nargs="*", default=[])
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    if a.what == "tune":
        tune(a.out, a.condition, a.budget, a.only)
    elif a.what == "verify":
        verify(a.out, "2m" if a.budget == "3m" else a.budget, a.only)
    elif a.what == "ab":
        ab(a.out, a.only)
        ab_by_hand(a.out, a.only)
    else:
        result = {
            "source": git_state(),
            "tunes": judge_tunes(a.out),
            "verify": judge_verify(a.out),
            "ab": judge_ab(a.out),
        }
        text = json.dumps(result, indent=2) + "\n"
        if a.json:
            a.json.write_text(text)
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
