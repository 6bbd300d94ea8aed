"""The GPU kit's runner: ``make gpu-check [STAGE=A|B|C|all] [GPU_PYTHON=python3]``.

Runs on a GPU machine as it is: its own Python and torch, ``PYTHONPATH=src``, no pip, no network,
no ``.venv``. Pure-Python packages it lacks come as wheels that ``make gpu-wheels`` downloaded
into ``.gpu-wheels/`` on a machine with network; they are unpacked here with ``zipfile`` (a wheel
is a zip) into ``.gpu-wheels/site``, put on ``PYTHONPATH``. Each check runs in its own process
with a timeout; a failure or a timeout never stops the stage. Every result is appended to one
JSON file with the machine's nvidia-smi, torch, CUDA and cuDNN versions. Without CUDA the same
command is a dry run: the checks that need CUDA say "skipped: no CUDA", the rest run.

Exit status: 0 when every check passed or was skipped, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from checks import STAGES  # noqa: E402  (beside this file, not a package)

WHEELS = ROOT / ".gpu-wheels"


def unpack_wheels(python: str) -> Path | None:
    """The wheels in ``.gpu-wheels/`` that ``python`` lacks and can run, unpacked (a wheel is a
    zip) into ``.gpu-wheels/site-<tag>``; None when there is nothing to add."""
    probe = (
        "import sys, importlib.metadata as m\n"
        "print(f'cp{sys.version_info[0]}{sys.version_info[1]}')\n"
        "for name in sys.argv[1:]:\n"
        "    try: m.version(name); print(name)\n"
        "    except m.PackageNotFoundError: pass\n"
    )
    wheels = sorted(WHEELS.glob("*.whl"))
    if not wheels:
        return None
    dists = [w.name.split("-")[0] for w in wheels]
    q = subprocess.run([python, "-c", probe, *dists], capture_output=True, text=True, timeout=60)
    lines = q.stdout.split()
    if q.returncode != 0 or not lines:
        return None
    tag, present = lines[0], {n.lower().replace("-", "_") for n in lines[1:]}
    wanted = []
    for wheel, dist in zip(wheels, dists, strict=True):
        python_tag = wheel.name.split("-")[-3]  # name-version-PYTHON-ABI-PLATFORM.whl
        runs = python_tag.startswith("py3") or tag in python_tag.split(".")
        if runs and dist.lower().replace("-", "_") not in present:
            wanted.append(wheel)
    if not wanted:
        return None
    site = WHEELS / f"site-{tag}"
    stamp = site / ".unpacked"
    names = "\n".join(w.name for w in wanted)
    if not (stamp.exists() and stamp.read_text() == names):
        shutil.rmtree(site, ignore_errors=True)
        site.mkdir(parents=True)
        for wheel in wanted:
            with zipfile.ZipFile(wheel) as z:
                z.extractall(site)
        stamp.write_text(names)
    return site


def machine(python: str, env: dict[str, str]) -> dict[str, Any]:
    """nvidia-smi and the versions of torch, CUDA and cuDNN on ``python``."""
    out: dict[str, Any] = {"host": os.uname().nodename}
    smi = shutil.which("nvidia-smi")
    if smi:
        q = subprocess.run([smi], capture_output=True, text=True, timeout=60)
        out["nvidia_smi"] = q.stdout
    probe = (
        "import json, sys, torch\n"
        "cuda = torch.cuda.is_available()\n"
        "print(json.dumps({'python': sys.version.split()[0], 'torch': torch.__version__,"
        " 'cuda': torch.version.cuda, 'cudnn': torch.backends.cudnn.version() if cuda else None,"
        " 'device': torch.cuda.get_device_name() if cuda else None,"
        " 'capability': list(torch.cuda.get_device_capability()) if cuda else None}))"
    )
    q = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    try:
        out.update(json.loads(q.stdout.strip().splitlines()[-1]))
    except (IndexError, json.JSONDecodeError):
        out["probe_error"] = q.stderr[-2000:]
    return out


def run_check(
    python: str, name: str, timeout: int, work: Path, env: dict[str, str]
) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [python, str(HERE / "checks.py"), name, "--work", str(work)],
            capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        out = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        return {"status": "fail", "detail": f"timed out after {timeout} s\n{out[-2000:]}",
                "figures": {}}  # fmt: skip
    finally:
        wall = time.perf_counter() - t0
    lines = proc.stdout.strip().splitlines()
    try:
        verdict: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        detail = f"rc {proc.returncode}, no verdict:\n{proc.stderr[-3000:]}"
        verdict = {"status": "fail", "figures": {}, "detail": detail}
    verdict["wall_s"] = round(wall, 1)
    return verdict


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stage", default="all", help="A, B, C or all (default)")
    p.add_argument("--python", default="python3", help="the Python that holds torch")
    p.add_argument("--json", type=Path, default=ROOT / "gpu-check.json", help="results, appended")
    p.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temp one)")
    p.add_argument("--only", nargs="*", default=None, help="run only these checks")
    args = p.parse_args()
    stages = list(STAGES) if args.stage == "all" else [s.strip().upper() for s in args.stage]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        p.error(f"unknown stage {''.join(unknown)!r}: choose A, B, C or all")
    python = shutil.which(args.python) or args.python
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    paths = [str(ROOT / "src")]
    site = unpack_wheels(python)
    if site is not None:
        paths.append(str(site))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env.update(PYTHONPATH=os.pathsep.join(paths), PYTHONUNBUFFERED="1", PIP_NO_INDEX="1")
    work = args.work or Path(os.environ.get("TMPDIR", "/tmp")) / f"torchpace-gpu-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)

    record: dict[str, Any] = {"runs": []}
    if args.json.exists():
        try:
            record = json.loads(args.json.read_text())
        except json.JSONDecodeError:
            args.json.rename(args.json.with_suffix(".damaged.json"))  # kept, never overwritten
    run: dict[str, Any] = {
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "stages": stages,
        "machine": machine(python, env),
        "wheels_added": str(site) if site else None,
        "checks": [],
    }
    # Probed once: a check that needs CUDA skips without importing torch when there is none.
    env["TORCHPACE_KIT_CUDA"] = "1" if run["machine"].get("device") else "0"
    record.setdefault("runs", []).append(run)
    failed = 0
    for stage in stages:
        for name, _fn, timeout in STAGES[stage]:
            if args.only and name not in args.only:
                continue
            verdict = run_check(python, name, timeout, work / name, env)
            run["checks"].append({"stage": stage, "name": name, **verdict})
            failed += verdict["status"] == "fail"
            first = (verdict.get("detail") or "").splitlines()[:1]
            print(f"[{stage}] {name:<22} {verdict['status']:<18} {verdict['wall_s']:>6.1f} s  "
                  f"{first[0][:90] if first else ''}", flush=True)  # fmt: skip
            tmp = args.json.with_name(args.json.name + ".tmp")
            tmp.write_text(json.dumps(record, indent=1, default=str) + "\n")
            os.replace(tmp, args.json)  # a kill mid-write keeps the previous results
    print(f"{failed} failed; results in {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
