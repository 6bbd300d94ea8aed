"""``torchpace compare SCRIPT.py (--plan PLAN | --against GIT_REF) -- ARGS``: the whole run, as a
user lives it, on both sides, in fresh processes, each run of the candidate between two runs of
the baseline.

``--plan``: the script as written against the script with the plan applied (as ``torchpace run``
applies it). ``--against REF``: the script at another commit (a git worktree, removed after)
against the working tree: a gate for CI, exiting 1 when the working tree is slower beyond the
noise or its loss ends above the reference's seed band.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchpace.script.compare import DEFAULT_MAX_SLOWDOWN
from torchpace.tune.whole_run import Run

EPILOG = """\
Put the script's own arguments after `--`; both sides get the same ones:

  torchpace compare train.py --plan torchpace-plan.json -- --epochs 2
  torchpace compare train.py --against origin/main --format github -- --max-steps 200

The sides run A B A B ... A: each candidate run between two runs of the baseline, and judged
against both, so a machine that drifts moves both sides alike. Round i seeds torch, random and
numpy with --seed + i on both sides (a script that seeds itself keeps its own seed), and the
baseline's --rounds + 1 runs give the loss's seed band.

exit status: 0 when the candidate is not slower beyond the noise and its loss stays in the band
("noisy" verdicts do not fail); 1 when it regressed; 2 for a script, plan or ref that cannot be
used, or a run that failed.
"""


def _slowdown(text: str) -> float:
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a share such as 0.05 or 5%") from None
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"{text!r}: a slowdown from 0 (0%) to 10 (1000%)")
    return value


def _rounds(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 2:
        raise argparse.ArgumentTypeError(
            f"{n} rounds: at least 2, so each side's rounds give a spread and a seed band"
        )
    return n


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="the whole run, as written against a plan or another commit: wall time, time to "
        "the same loss, a gate for CI",
        description="Run the whole script on both sides in fresh processes, each candidate run "
        "between two runs of the baseline, "
        "and compare wall time, time inside and outside the training steps, samples, the loss "
        "curve and the time to the loss the baseline ends at.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--plan", type=Path, help="compare the script with this plan applied")
    what.add_argument(
        "--against",
        metavar="GIT_REF",
        help="compare the working tree's script with the same script at this commit",
    )
    p.add_argument(
        "--rounds",
        type=_rounds,
        default=3,
        help="rounds: the candidate runs this often, the baseline once more (default 3)",
    )
    p.add_argument("--seed", type=int, default=0, help="round i seeds with SEED + i (default 0)")
    p.add_argument(
        "--max-slowdown",
        type=_slowdown,
        default=DEFAULT_MAX_SLOWDOWN,
        metavar="SHARE",
        help="the slowdown allowed before the gate fails, e.g. 0.05 or 5%% (default 5%%)",
    )
    p.add_argument(
        "--format", choices=("text", "json", "github"), default="text", help="what to print"
    )
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the result as JSON")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto, for the plan's settings")
    p.add_argument(
        "--run-timeout",
        type=float,
        metavar="S",
        help="kill a run after S seconds (default: none; a whole run takes what it takes)",
    )
    p.add_argument("script", help="the training script")
    p.set_defaults(func=run, script_args=None)


@dataclass(frozen=True)
class Side:
    name: str
    script: str
    cwd: str
    plan: dict[str, Any] | None


def _git(*args: str, cwd: str | Path) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise RuntimeError("--against needs git on PATH") from None
    if proc.returncode != 0:
        raise ValueError(f"git {' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


@contextlib.contextmanager
def _reference(script: Path, ref: str) -> Iterator[Side]:
    """The script at ``ref`` in a detached git worktree, removed afterwards (the user's working
    tree, index and branches are not touched)."""
    folder = script.resolve().parent
    try:
        root = Path(_git("rev-parse", "--show-toplevel", cwd=folder))
    except ValueError:
        raise ValueError(f"--against: {script} is not in a git repository") from None
    commit = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=root)
    rel = script.resolve().relative_to(root.resolve())
    with tempfile.TemporaryDirectory(prefix="torchpace-compare-ref-") as tmp:
        tree = Path(tmp) / "tree"
        _git("worktree", "add", "--detach", "--quiet", str(tree), commit, cwd=root)
        try:
            if not (tree / rel).is_file():
                raise ValueError(f"--against {ref}: {rel} does not exist at {commit[:12]}")
            cwd = Path.cwd().resolve()
            try:
                ref_cwd = tree / cwd.relative_to(root.resolve())
            except ValueError:
                ref_cwd = cwd  # run from outside the repository: the same folder on both sides
            yield Side(f"{ref} ({commit[:12]})", str(tree / rel), str(ref_cwd), None)
        finally:
            with contextlib.suppress(ValueError, RuntimeError):
                _git("worktree", "remove", "--force", str(tree), cwd=root)


def _one_run(
    side: Side,
    round_: int,
    args: argparse.Namespace,
    work: Path,
) -> Run:
    from torchpace.tune.whole_run import whole_run

    slug = "".join(ch if ch.isalnum() else "-" for ch in side.name)[:40]
    spec = {
        "script": side.script,
        "args": list(args.script_args or ()),
        "cwd": side.cwd,
        "plan": side.plan,
        "seed": args.seed + round_,
        "device": args.device,
    }
    # a WholeRunError is a RuntimeError: the command line prints it and exits 2
    return whole_run(
        spec,
        side=side.name,
        round_=round_,
        stem=work / f"round{round_ + 1}-{slug}",
        timeout_s=args.run_timeout,
        timeout_option="--run-timeout",
    )


def measure(base: Side, cand: Side, args: argparse.Namespace) -> tuple[list[Run], list[Run]]:
    """Each run of the candidate between two runs of the baseline (A B A B … A: ``--rounds``
    candidate runs, one baseline more), each a fresh process; ``compare_runs`` judges each
    candidate run against the geometric mean of its two neighbours. A machine that speeds up
    or slows down steadily over the rounds then moves both sides alike. An ABBA order over an
    odd number of rounds did not: three A/A comparisons run right after a tune read 1.06-1.09x
    as the machine sped up from one run to the next."""
    work = Path(tempfile.mkdtemp(prefix="torchpace-compare-"))
    b: list[Run] = [_one_run(base, 0, args, work)]
    c: list[Run] = []
    for i in range(args.rounds):
        c.append(_one_run(cand, i, args, work))
        b.append(_one_run(base, i + 1, args, work))
        print(
            f"torchpace compare: round {i + 1}/{args.rounds}: {base.name} {b[-2].wall_s:.1f} s, "
            f"{cand.name} {c[-1].wall_s:.1f} s, {base.name} {b[-1].wall_s:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return b, c


def run(args: argparse.Namespace) -> int:
    from torchpace.runtime.kind import kind_of
    from torchpace.runtime.work import step_flags
    from torchpace.script.compare import compare_runs

    script = Path(args.script)
    if not script.is_file():
        raise FileNotFoundError(f"script not found: {args.script}")
    if kind_of(args.script) == "recipe":
        raise ValueError(f"{args.script} is a recipe; compare runs training scripts")
    here = Side("as written", str(script.resolve()), os.getcwd(), None)
    if args.plan is not None:
        from torchpace.train.plan import Plan

        plan = Plan.load(args.plan)
        cand = Side("with the plan", here.script, here.cwd, plan.to_dict())
        base_runs, cand_runs = measure(here, cand, args)
        base_name, cand_name = here.name, cand.name
    else:
        with _reference(script, args.against) as ref:
            tree = Side("working tree", here.script, here.cwd, None)
            base_runs, cand_runs = measure(ref, tree, args)
            base_name, cand_name = ref.name, tree.name
    result = compare_runs(
        base_runs,
        cand_runs,
        base_name=base_name,
        cand_name=cand_name,
        max_slowdown=args.max_slowdown,
        flags=step_flags(script, list(args.script_args or ())),
        args=list(args.script_args or ()),
    )
    doc = result.to_json(
        script=str(script),
        args=list(args.script_args or ()),
        plan=str(args.plan) if args.plan else None,
        against=args.against,
    )
    if args.json:
        from torchpace._files import atomic_write_text

        atomic_write_text(args.json, json.dumps(doc, indent=2) + "\n")
    if args.format == "json":
        print(json.dumps(doc, indent=2))
    else:
        from torchpace.script.compare_table import render

        print(render(result, github=args.format == "github"))
    return 1 if result.regressed else 0
