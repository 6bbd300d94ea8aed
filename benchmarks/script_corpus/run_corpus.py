#!/usr/bin/env python
"""Run each corpus script plainly (no torchpace) and record wall time, CPU time and loss lines.

    python benchmarks/script_corpus/run_corpus.py --root .corpus/scripts [--only NAME ...]
        [--python PATH] [--timeout 300] [--json results.json]

Each entry of corpus.json is run as ``PYTHON SCRIPT ARGS`` in its cwd, with its ``pythonpath``
entries (relative to ROOT; ``{script_corpus}`` stands for this folder, for the stand-in packages
under ``stand_ins/``) put in front of PYTHONPATH and its ``env`` added.  The full output of
each run goes to ROOT/_logs/NAME.log.  Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent


def load_entries(names: list[str]) -> list[dict]:
    entries = json.loads((HERE / "corpus.json").read_text())
    if names:
        known = {e["name"] for e in entries}
        missing = [n for n in names if n not in known]
        if missing:
            raise SystemExit(f"unknown entries: {missing}; known: {sorted(known)}")
        entries = [e for e in entries if e["name"] in names]
    return entries


def pythonpath_entry(path: str, root: Path) -> Path:
    """A corpus.json ``pythonpath`` entry as a folder: relative to ROOT (the materialised corpus),
    except that a leading ``{script_corpus}`` names this folder in the checkout (where the
    stand-in packages live, e.g. ``{script_corpus}/stand_ins``)."""
    mark = "{script_corpus}"
    if path == mark or path.startswith(mark + "/"):
        return HERE.joinpath(*path[len(mark) :].split("/")[1:])
    return root / path


def entry_env(entry: dict, root: Path) -> dict[str, str]:
    """This process's environment with the entry's ``pythonpath`` in front and its ``env``."""
    env = dict(os.environ)
    extra = [str(pythonpath_entry(p, root)) for p in entry.get("pythonpath", [])]
    if extra:
        env["PYTHONPATH"] = os.pathsep.join([*extra, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(entry.get("env", {}))
    return env


def run_logged(
    cmd: list[str], cwd: Path, env: dict[str, str], log: Path, timeout: float
) -> int | str:
    """Run ``cmd`` with its output (stdout and stderr) in ``log``; its exit status, or
    "timeout" when it ran past ``timeout`` seconds."""
    with log.open("wb") as f:
        try:
            return subprocess.run(
                cmd,
                cwd=cwd,
                env=env,
                stdout=f,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
            ).returncode
        except subprocess.TimeoutExpired:
            return "timeout"


def run_entry(entry: dict, root: Path, python: str, timeout: float) -> dict:
    env = entry_env(entry, root)
    cwd = root / entry["cwd"]
    cmd = [python, str(root / entry["script"]), *entry["args"]]
    logs = root / "_logs"
    logs.mkdir(exist_ok=True)
    log_path = logs / f"{entry['name']}.log"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    rc = run_logged(cmd, cwd, env, log_path, timeout)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    text = log_path.read_text(errors="replace").replace("\r", "\n")
    losses = re.findall(entry["loss_pattern"], text, flags=re.MULTILINE)
    return {
        "name": entry["name"],
        "rc": rc,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "loadavg_1min_before": round(load, 2),
        "loss_lines": len(losses),
        "last_loss_line": losses[-1] if losses else None,
        "ok": rc == 0 and len(losses) > 0,
        "log": str(log_path),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--root", type=Path, default=REPO_ROOT / ".corpus" / "scripts")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    root = args.root.resolve()
    results = []
    for entry in load_entries(args.only):
        res = run_entry(entry, root, args.python, args.timeout)
        results.append(res)
        print(
            f"{res['name']:26s} rc={res['rc']!s:7s} wall={res['wall_s']:6.1f}s "
            f"cpu={res['cpu_s']:6.1f}s load={res['loadavg_1min_before']:.1f} "
            f"loss_lines={res['loss_lines']}",
            flush=True,
        )
        if args.json:
            args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
