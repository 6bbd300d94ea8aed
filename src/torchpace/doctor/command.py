"""``torchpace doctor``: the command line around ``script.run``."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import TYPE_CHECKING, Any

from torchpace._args import non_negative_int, positive_int
from torchpace.tune.command import parse_duration

if TYPE_CHECKING:
    from torchpace.doctor.children import Child

EPILOG = """\
The script runs in this process as `python SCRIPT ARGS` would. After --warmup steps, one probe
step (FLOPs, lines run; not timed) and --steps measured steps, it is stopped and the
report printed. Put the script's own arguments after `--`:

  torchpace doctor --steps 30 examples/naive_cnn.py -- --batch-size 128

exit status: the script's own (1 if it raised, 130 if interrupted); 1 if no optimizer step was
seen; 2 for a usage error or a script that cannot be read or parsed.

Processes the script started that still run when the doctor stops it are ended (SIGTERM, then
SIGKILL after 5 s); the report and --json name them.

Under torchrun (`torchrun --nproc-per-node N -m torchpace doctor train.py`) every rank measures
and rank 0 reports for all, with stragglers and data-wait imbalance.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "doctor",
        help="measure a training script and rank what slows it down",
        description="Run an unmodified training script, measure where each step's time goes, "
        "point at the lines that cost it, and rank the fixes by estimated gain.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--steps", type=non_negative_int, default=30, help="measured steps; 0 runs to the end"
    )
    p.add_argument(
        "--warmup", type=positive_int, default=3, help="warm-up steps, not measured (>= 1)"
    )
    p.add_argument("--json", metavar="PATH", help="write the full result as JSON")
    p.add_argument(
        "--html", metavar="PATH", help="write the report as one HTML file (torchpace report)"
    )
    p.add_argument("--no-lint", action="store_true", help="do not merge static lint findings")
    p.add_argument(
        "--first-step-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="give up if no training step (optimizer.step() or backward()) happens in S "
        "seconds (default 60)",
    )
    p.add_argument(
        "--step-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="after the first step, stop with the steps measured so far if no step comes for "
        "S seconds (default 600; 0 waits for ever)",
    )
    p.add_argument(
        "--top", type=non_negative_int, default=10, help="findings shown in the terminal"
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="then measure the top findings' changes on the script itself, each alone against "
        "the script as written in fresh processes (torchpace tune's trials and guard), and "
        "demote the ones that are not faster",
    )
    p.add_argument(
        "--verify-budget",
        type=parse_duration,
        default=300.0,
        metavar="T",
        help="time for --verify's trials, e.g. 90s, 5m (default 5m)",
    )
    p.add_argument("script", help="the training script")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments, after --")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.steps < 0:
        raise ValueError(f"--steps must be 0 (run to the end) or more, not {args.steps}")
    if args.warmup < 1:
        raise ValueError(f"--warmup must be at least 1, not {args.warmup}")
    from torchpace._files import output_file

    # Resolved now: the script may change directory, and an unwritable path fails before the run.
    if args.json:
        args.json = str(output_file(args.json, "--json"))
    if args.html:
        args.html = str(output_file(args.html, "--html"))
    command = ["torchpace", *sys.argv[1:]]  # before the script's run replaces sys.argv
    cwd = os.getcwd()  # the script may change directory; --verify runs it from here again
    script_args = list(args.args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]

    from torchpace.doctor import distributed, script
    from torchpace.doctor.children import describe, describe_stopped
    from torchpace.doctor.terminal import print_report

    ran = script.run(
        args.script,
        script_args,
        steps=args.steps,
        warmup=args.warmup,
        first_step_timeout=args.first_step_timeout,
        step_timeout=args.step_timeout,
        # Only rank 0 reports, so only rank 0 lints.
        lint=not args.no_lint and os.environ.get("RANK", "0") == "0",
    )
    stopped = (
        "torchpace doctor: ended the processes the script started that were still running "
        f"when the doctor stopped it: {describe_stopped(ran.stopped)}"
    )
    if not ran.stepped:
        print(f"torchpace doctor: {ran.outcome}; {ran.saw}", file=sys.stderr)
        if ran.stopped:
            print(stopped, file=sys.stderr)
        if ran.children:
            print(f"torchpace doctor: {_in_children(ran.children)}", file=sys.stderr)
        elif ran.exit_code == 0:
            print(
                "torchpace doctor: no training step observed, so there are no steps to "
                "measure; the doctor ends a step at each optimizer.step(), or at each "
                "backward() in a script that builds no optimizer",
                file=sys.stderr,
            )
        started = f"; the script started {describe(ran.children)}" if ran.children else ""
        distributed.publish_missing(f"{ran.outcome}; {ran.saw}{started}")  # rank 0 need not wait
        if args.json and os.environ.get("RANK", "0") == "0":  # only rank 0 reports
            _write_json(args.json, {**ran.result, "command": command})
        return ran.exit_code or 1
    if ran.stopped:
        print(stopped, file=sys.stderr)
    result = distributed.gather(ran.result)
    if result is None:  # not rank 0: rank 0 reports for every rank
        return ran.exit_code
    result["command"] = command
    if args.verify:
        result["verify"] = _verify(result, args, script_args, cwd)
    sys.stdout.flush()
    print_report(result, top=args.top)
    if args.json:
        _write_json(args.json, result)
    if args.html:
        from pathlib import Path

        from torchpace.report.command import write_html
        from torchpace.report.doctor_doc import build

        write_html(Path(args.html), [build(result)], [args.script])
        print(f"wrote {args.html}")
    return ran.exit_code


def _in_children(children: list[Child]) -> str:
    """Why a script that trains in the processes it starts has no step to measure, and what to
    do about it."""
    from torchpace.doctor.children import describe

    functions = sorted({c.target for c in children if c.target != "Pool worker"})
    how = (
        f"call {', '.join(functions)} in the main process instead of in new processes,"
        if functions
        else "run it in the main process"
    )
    return (
        f"the script took no training step in its own process; it started {describe(children)}. "
        "The doctor measures only the process it runs in, so it measured no step. To diagnose "
        f"the training, {how} and run the doctor on that"
    )


def _write_json(path: str, result: dict[str, Any]) -> None:
    from torchpace._files import atomic_write_text
    from torchpace.doctor.result import validate_if_asked

    validate_if_asked(result)
    atomic_write_text(path, _strict_json(result) + "\n")
    print(f"wrote {path}")


def _verify(
    result: dict[str, Any], args: argparse.Namespace, script_args: list[str], cwd: str
) -> dict[str, Any]:
    from torchpace.doctor.verify import candidates_to_verify, verify

    if result.get("distributed"):
        return {"tried": [], "note": "--verify runs one process; under torchrun it is skipped"}
    tried = candidates_to_verify(result["findings"])
    if tried:
        print(
            f"torchpace doctor --verify: {', '.join(tried)}, each against the script as "
            f"written in fresh processes (budget {args.verify_budget:g} s)",
            file=sys.stderr,
            flush=True,
        )
    os.chdir(cwd)
    return verify(
        result,
        args.script,
        script_args,
        budget_s=args.verify_budget,
        warmup=args.warmup,
    )


def _finite(value: Any, path: str, bad: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        bad.append(path)
        return None
    if isinstance(value, dict):
        return {k: _finite(v, f"{path}.{k}", bad) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v, f"{path}[{i}]", bad) for i, v in enumerate(value)]
    return value


def _strict_json(result: dict[str, Any]) -> str:
    """The result as strict JSON (no NaN or Infinity, which strict parsers reject). A
    non-finite figure is a bug, but the run's result is the user's data: it is written with
    null there, and the fields are named on stderr."""
    from torchpace.findings import jsonable

    result = jsonable(result)
    try:
        return json.dumps(result, indent=2, allow_nan=False)
    except ValueError:
        bad: list[str] = []
        clean = _finite(result, "result", bad)
        print(
            f"torchpace doctor: non-finite values written as null at {', '.join(bad[:5])}"
            + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            + "; please report it",
            file=sys.stderr,
        )
        return json.dumps(clean, indent=2, allow_nan=False)
