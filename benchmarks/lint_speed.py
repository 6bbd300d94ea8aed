"""Lint speed: `torchpace lint` against TorchFix, in files per second over the same files.

The corpus is every ``.py`` file of the installed torch package (found without importing torch),
or with ``--corpus DIR`` every ``.py`` and ``.ipynb`` file under DIR (the public training code of
``benchmarks/realworld``, notebooks included: TorchFix is given the sample's ``.py`` files, as
it reads no notebook, and the ratio is of files per second).
Both linters run as a user runs them, one subprocess per measurement, with all of their checks
(``torchpace lint --select`` every code of ``torchpace rules``, off-by-default ones included;
``torchfix --select ALL``) and the same number of processes (``--jobs``, passed to torchpace only
once its ``lint --help`` lists it). TorchFix takes about 1.4 CPU-seconds per file here, so it
runs on a deterministic sample: every k-th file of the sorted corpus, about ``--sample`` files.
torchpace runs on that sample too, which is what the ratio compares, and on the whole corpus.

    make bench-lint   # builds .venv-bench with TorchFix, then runs:
    python benchmarks/lint_speed.py --json benchmarks/results/<date>-lint-speed.json

Rounds alternate the order of the runs (A B C, C B A, ...); figures are the median over rounds
with the min–max beside them. Every file is read once, untimed, before round 1, and each tool runs
once on one file to warm its imports. torchpace crashes are counted: a traceback, an exit status
other than 0/1/2, exit 2 with no file error to explain it, an "internal error", or a file error
for a file that ``ast.parse`` accepts.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _provenance import git_state, sh

ROOT = Path(__file__).resolve().parents[1]
BENCH_TORCHFIX = ROOT / ".venv-bench" / "bin" / "torchfix"
TORCHPACE = [sys.executable, "-m", "torchpace"]
TORCHFIX_SELECT = "ALL"  # TorchFix's default leaves out TOR3, TOR4 and TOR9; ALL runs every check
# Runs start here, away from any pyproject.toml whose [tool.torchpace.lint] could change the rules.
NEUTRAL_CWD = Path(tempfile.gettempdir())


@dataclass(frozen=True)
class Run:
    seconds: float
    cpu_seconds: float  # user + system time of the linter and its worker processes
    rc: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Task:
    """One timed command: a linter's argv prefix and the file set it is given."""

    argv: tuple[str, ...]
    files: tuple[str, ...]

    def run(self, files: tuple[str, ...] | None = None) -> Run:
        return timed([*self.argv, *(self.files if files is None else files)])


def torch_sources() -> tuple[Path, list[Path]]:
    """The installed torch package's directory and its ``.py`` files, sorted; no torch import."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed in this interpreter; its source is the corpus")
    root = Path(next(iter(spec.submodule_search_locations)))
    return root, sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix())


def corpus_files(dirs: list[Path]) -> tuple[Path, list[Path]]:
    """The ``.py`` and ``.ipynb`` files under ``dirs``, sorted, and the folder they share."""
    roots = [d.resolve() for d in dirs]
    root = Path(os.path.commonpath(roots)) if roots else Path.cwd()
    files = {
        f for d in roots for f in d.rglob("*") if f.suffix in (".py", ".ipynb") and f.is_file()
    }
    return root, sorted(files, key=lambda p: p.relative_to(root).as_posix())


def compile_torchpace() -> str:
    """Byte-compile torchpace's modules where Python looks for them, as ``pip install`` does for
    TorchFix's: a checkout run with PYTHONDONTWRITEBYTECODE (this project's machines) would
    otherwise compile every module again in every run, about 0.1-0.3 s that no installed
    torchpace pays. Python rereads a module whose source changed since."""
    spec = importlib.util.find_spec("torchpace")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torchpace is not importable from this interpreter")
    package = next(iter(spec.submodule_search_locations))
    done = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", package], capture_output=True, text=True
    )
    if done.returncode != 0:
        return f"compileall failed ({done.stdout.strip()[-200:]}): timed with source compiles"
    return f"byte-compiled before timing (python -m compileall {package})"


def every_kth(files: list[Path], target: int) -> list[Path]:
    """About ``target`` files spread evenly over ``files`` (all of them when target <= 0)."""
    if target <= 0 or target >= len(files):
        return files
    return files[:: math.ceil(len(files) / target)]


def timed(cmd: list[str]) -> Run:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", cwd=NEUTRAL_CWD)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(seconds, cpu, done.returncode, done.stdout, done.stderr)


def unparsable(path: str) -> bool:
    """Whether ``ast.parse`` itself rejects the file: the one excuse for a torchpace file error."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(Path(path).read_bytes(), filename=path)
    except (SyntaxError, ValueError, RecursionError):
        return True
    return False


def torchpace_health(run: Run) -> tuple[list[tuple[str, str]], list[str], int]:
    """One torchpace run's file errors (path, cause), crashes, and number of findings.

    A rule that crashes on a file is reported as a file error "internal error in TPxxx: ..."
    beside that file's other findings.
    """
    errors: list[tuple[str, str]] = []
    for line in run.stderr.splitlines():
        path, sep, cause = line.partition(": error: ")
        if sep and not line.startswith("torchpace:"):
            errors.append((path, cause))
    crashes: list[str] = []
    if "Traceback (most recent call last)" in run.stderr:
        crashes.append("traceback: " + run.stderr.strip().splitlines()[-1])
    if run.rc not in (0, 1, 2):
        crashes.append(f"exit status {run.rc}")
    if run.rc == 2 and not errors:
        crashes.append("exit 2 and no file error: " + " | ".join(run.stderr.splitlines()[-2:]))
    for path, cause in errors:
        if "internal error" in cause:
            crashes.append(f"{path}: {cause}")
        elif not unparsable(path):
            crashes.append(f"{path}: {cause} (but ast.parse accepts the file)")
    try:
        findings = len(json.loads(run.stdout))
    except ValueError:
        findings = -1
        crashes.append("stdout is not the JSON list of findings")
    return errors, crashes, findings


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(torchfix: str | None, jobs: int, torchpace_jobs: int) -> dict[str, Any]:
    tf_python = str(Path(torchfix).with_name("python")) if torchfix else ""
    pyver = (
        "import importlib.metadata as m, platform as p; "
        "print(p.python_version(), m.version('libcst'))"
    )
    tf_py, _, libcst = sh(tf_python, "-c", pyver).partition(" ") if torchfix else ("", "", "")
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(["python", *sys.argv]),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "loadavg_before": os.getloadavg(),
        "platform": platform.platform(),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "python": platform.python_version(),
        "torch": importlib.metadata.version("torch"),
        "torchpace": importlib.metadata.version("torchpace"),
        "torchpace_git": git_state(),
        "torchpace_rules": sh(*TORCHPACE, "rules").splitlines(),
        "torchfix": sh(torchfix, "--version") if torchfix else None,
        "torchfix_select": TORCHFIX_SELECT,
        "torchfix_python": tf_py,
        "libcst": libcst,
        "jobs": {"torchfix": jobs, "torchpace": torchpace_jobs},
    }


def measure(tasks: dict[str, Task], rounds: int) -> dict[str, list[Run]]:
    """Each task once untimed on one file (imports, bytecode caches), then ``rounds`` rounds in
    alternating order."""
    for task in tasks.values():
        task.run(task.files[:1])
    runs: dict[str, list[Run]] = {name: [] for name in tasks}
    for r in range(rounds):
        for name in list(tasks) if r % 2 == 0 else list(reversed(tasks)):
            run = tasks[name].run()
            runs[name].append(run)
            print(f"  round {r + 1}: {name:17s} {run.seconds:8.2f} s  exit {run.rc}", flush=True)
    return runs


def summarise(runs: dict[str, list[Run]], tasks: dict[str, Task]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    errors: set[tuple[str, str]] = set()
    crashes: set[str] = set()
    for name, rs in runs.items():
        files = tasks[name].files
        text = [Path(f).read_bytes() for f in files]
        res = results[name] = {
            "files": len(files),
            "lines": sum(t.count(b"\n") for t in text),
            "bytes": sum(len(t) for t in text),
            "seconds": [r.seconds for r in rs],
            "cpu_seconds": [r.cpu_seconds for r in rs],
            "files_per_s": spread([len(files) / r.seconds for r in rs]),
            # Per CPU-second: less moved than wall-clock by other load on a shared machine.
            "files_per_cpu_s": spread([len(files) / r.cpu_seconds for r in rs]),
            "cores_busy": spread([r.cpu_seconds / r.seconds for r in rs]),
            "exit_status": sorted({r.rc for r in rs}),
        }
        if name.startswith("torchpace"):
            for run in rs:
                errs, bad, res["findings"] = torchpace_health(run)
                errors |= set(errs)
                crashes |= set(bad)
        else:  # TorchFix skips files without the text "torch" before parsing
            checked = re.findall(r"Finished checking (\d+) files", rs[-1].stderr)
            res["files_checked_by_torchfix"] = int(checked[0]) if checked else None
            res["stderr_tail"] = rs[-1].stderr.strip().splitlines()[-3:]
    ratio = cpu_ratio = None
    if "torchfix/sample" in runs:  # ratios per round, then their median and range
        pairs = list(zip(runs["torchfix/sample"], runs["torchpace/sample"], strict=True))
        # files per second: TorchFix reads no notebook, so on a corpus with notebooks it is
        # given fewer of the sample's files than torchpace
        n_tf, n_tp = len(tasks["torchfix/sample"].files), len(tasks["torchpace/sample"].files)
        ratio = spread([(n_tp / tp.seconds) / (n_tf / tf.seconds) for tf, tp in pairs])
        cpu_ratio = spread([(n_tp / tp.cpu_seconds) / (n_tf / tf.cpu_seconds) for tf, tp in pairs])
    return {
        "ratio_files_per_s": ratio,
        "ratio_files_per_cpu_s": cpu_ratio,
        "ratio_over": "the sampled files (TorchFix: their .py files), files per second",
        "results": results,
        "torchpace_file_errors": [{"path": p, "cause": c} for p, c in sorted(errors)],
        "torchpace_crashes": sorted(crashes),
    }


def report(summary: dict[str, Any]) -> None:
    print(
        f"\n{'run':17s} {'files':>6s} {'lines':>10s}  files/s median [min–max]  cores  files/CPU-s"
    )
    for name, res in summary["results"].items():
        fps, busy, cpu = res["files_per_s"], res["cores_busy"], res["files_per_cpu_s"]
        span = f"[{fps['min']:.2f}–{fps['max']:.2f}]"
        print(
            f"{name:17s} {res['files']:6d} {res['lines']:10,d}  {fps['median']:8.2f} {span:15s}"
            f" {busy['median']:5.2f} {cpu['median']:12.2f}"
        )
    if ratio := summary["ratio_files_per_s"]:
        n = summary["results"]["torchpace/sample"]["files"]
        print(
            f"torchpace ÷ TorchFix files/s over the {n} sampled files: "
            f"{ratio['median']:.1f}× [{ratio['min']:.1f}–{ratio['max']:.1f}]"
        )
        cpu = summary["ratio_files_per_cpu_s"]
        print(
            f"  per CPU-second (user + system): "
            f"{cpu['median']:.1f}× [{cpu['min']:.1f}–{cpu['max']:.1f}]"
        )
    errors, crashes = summary["torchpace_file_errors"], summary["torchpace_crashes"]
    print(f"torchpace file errors: {len(errors)}; crashes: {len(crashes)}")
    for error in errors:
        print(f"  {error['path']}: {error['cause']}")
    for crash in crashes:
        print(f"  CRASH {crash}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sample", type=int, default=300, help="about this many files for TorchFix")
    ap.add_argument("--limit", type=int, help="only the first N files of the sorted corpus")
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--torchfix", help="the torchfix executable (default: .venv-bench's)")
    ap.add_argument("--no-torchfix", action="store_true", help="time torchpace alone")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument(
        "--corpus",
        type=Path,
        action="append",
        default=[],
        help="lint the .py and .ipynb files under this folder (repeatable), not torch's source",
    )
    args = ap.parse_args()
    torchfix = None
    if not args.no_torchfix:
        torchfix = args.torchfix or (
            str(BENCH_TORCHFIX) if BENCH_TORCHFIX.exists() else shutil.which("torchfix")
        )
        if not torchfix or not shutil.which(torchfix):
            raise SystemExit("torchfix not found: run `make bench-lint` or pass --torchfix PATH")
        torchfix = str(Path(torchfix).resolve()) if os.sep in torchfix else torchfix  # runs in /tmp

    root, corpus = corpus_files(args.corpus) if args.corpus else torch_sources()
    corpus = corpus[: args.limit]
    sample = every_kth(corpus, args.sample)
    env_bytecode = compile_torchpace()
    has_jobs = "--jobs" in timed([*TORCHPACE, "lint", "--help"]).stdout
    # Every code by name: a prefix such as TP leaves out the rules that are off by default.
    codes = ",".join(ln.split()[0] for ln in sh(*TORCHPACE, "rules").splitlines())
    lint: tuple[str, ...] = (*TORCHPACE, "lint", "--format", "json", "--select", codes)
    lint += ("--jobs", str(args.jobs)) if has_jobs else ()
    tasks = {"torchpace/sample": Task(lint, tuple(map(str, sample)))}
    if torchfix:
        tf = (torchfix, "--select", TORCHFIX_SELECT, "--jobs", str(args.jobs))
        tasks["torchfix/sample"] = Task(tf, tuple(str(p) for p in sample if p.suffix == ".py"))
    if len(sample) < len(corpus):
        tasks["torchpace/corpus"] = Task(lint, tuple(map(str, corpus)))

    env = environment(torchfix, args.jobs, args.jobs if has_jobs else 1)
    env["torchpace_bytecode"] = env_bytecode
    print(
        f"{env['cpu']}, {env['usable_cores']} cores; Python {env['python']}; torch {env['torch']};"
        f" torchfix {env['torchfix']}; torchpace {env['torchpace']} ({env['torchpace_git']})"
    )
    step = math.ceil(len(corpus) / len(sample))
    print(f"corpus: {len(corpus)} files under {root}; sample: every k-th (k={step}), {len(sample)}")
    if not has_jobs:
        print(f"note: `torchpace lint` has no --jobs yet: 1 process against TorchFix's {args.jobs}")
    for path in corpus:
        path.read_bytes()  # page cache: no run pays for the first read from disk
    summary = summarise(measure(tasks, args.rounds), tasks)
    env["loadavg_after"] = os.getloadavg()  # other load on the machine skews every figure
    env["torchpace_git_after"] = git_state()
    if env["torchpace_git_after"] != env["torchpace_git"]:
        print(
            f"WARNING: torchpace's source changed during the run ({env['torchpace_git']} ->"
            f" {env['torchpace_git_after']}); measure again on a quiet tree"
        )
    report(summary)
    if args.json:
        out = {
            "environment": env,
            "commands": {k: shlex.join(t.argv) + " FILES..." for k, t in tasks.items()},
            "corpus": {"root": str(root), "files": len(corpus), "sample_every": step},
            **summary,
            "sample_files": [p.relative_to(root).as_posix() for p in sample],
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
