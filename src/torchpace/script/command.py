"""``torchpace run --plan PLAN.json SCRIPT.py -- ARGS``: run a training script to its end, as
``python SCRIPT.py ARGS`` would, with a plan applied by interposition (no code change).

What the plan changes is printed to stderr when the first training forward starts (the loaders
and optimizers are built by then, the models are found), and again at the end for what applied
later or never, with why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EPILOG = """\
The plan is one `torchpace tune train.py -- ARGS` wrote (torchpace-plan.json), or any plan file.
Put the script's own arguments after `--`:

  torchpace run --plan torchpace-plan.json train.py -- --epochs 10

exit status: the script's own; 2 for a plan or script that cannot be used.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run a training script to its end with a tuned plan applied, unmodified",
        description="Run an unmodified training script with a plan's techniques applied by "
        "interposition, and say which applied and which did not, and why.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--plan", type=Path, required=True, help="the plan (torchpace-plan.json)")
    p.add_argument(
        "--device",
        default="auto",
        help="cpu, cuda or auto: where the plan's "
        "device-wide settings (loader, fast math, autocast) are chosen for",
    )
    p.add_argument(
        "--seed",
        type=int,
        help="seed torch, random and numpy before the script starts, as the tune's trials do",
    )
    p.add_argument("script", help="the training script")
    p.set_defaults(func=run, script_args=None)


def _lines(applied: list[Any], start: int = 0) -> list[str]:
    out = []
    for a in applied[start:]:
        if a.changed:
            out += [f"  applied  {a.technique}: {c}" for c in a.changes[:3]]
            if len(a.changes) > 3:
                out.append(f"  applied  {a.technique}: ... and {len(a.changes) - 3} more")
        elif a.reason:
            out.append(f"  not      {a.technique}: {a.reason}")
    return out


def _work_notes(ip: Any, args: argparse.Namespace) -> list[str]:
    """What a batch-size change does to a run bounded by steps (``compare.batch_work_note``)."""
    from torchpace.runtime.work import batch_work_note, step_flags

    flags = step_flags(args.script, list(args.script_args or ()))
    out = []
    for info in ip.loaders:
        note = batch_work_note(
            flags,
            list(args.script_args or ()),
            info.get("batch_size_as_written"),
            info.get("batch_size"),
        )
        if note:
            out.append(note)
    return out


def run(args: argparse.Namespace) -> int:
    from torchpace.runtime.kind import kind_of
    from torchpace.train.plan import Plan

    plan = Plan.load(args.plan)
    if note := Plan.noise_note(args.plan):
        print(f"torchpace run: {note}", file=sys.stderr)
    if not Path(args.script).is_file():
        raise FileNotFoundError(f"script not found: {args.script}")
    if kind_of(args.script) == "recipe":
        raise ValueError(
            f"{args.script} is a recipe; train it with `torchpace fit {args.script} --plan "
            f"{args.plan}`"
        )
    from torchpace.measure.clock import resolve_device
    from torchpace.script.interpose import Interposer
    from torchpace.script.main import run_as_main
    from torchpace.script.trial import seed_everything
    from torchpace.techniques import fit_only

    wanted = [t for t in plan.techniques() if t not in fit_only()]
    say = sys.stderr
    print(
        f"torchpace run: {args.script} with {args.plan}: {', '.join(wanted) or 'nothing'}",
        file=say,
    )
    if args.seed is not None:
        seed_everything(args.seed)
    ip = Interposer(plan, device=resolve_device(args.device))
    shown = [0]

    def first_forward() -> None:
        lines = _lines(ip.applied)
        lines += [f"  work     {n}" for n in _work_notes(ip, args)]
        done = {a.technique for a in ip.applied}
        waiting = [t for t in wanted if t not in done]
        if waiting:
            lines.append(f"  later    {', '.join(waiting)}: at the first optimizer step or call")
        print("torchpace run: training starts:\n" + "\n".join(lines), file=say, flush=True)
        shown[0] = len(ip.applied)

    ip.on_first_forward = first_forward
    ip.install()
    try:
        ended = run_as_main(args.script, list(args.script_args or ()))
    finally:
        ip.uninstall()
    late = _lines(ip.applied, shown[0])
    missing = ip.not_applied()
    never = [
        f"  never    {t}: {why}"
        for t, why in missing.items()
        if t not in {a.technique for a in ip.applied}
    ]
    if late or never:
        print("torchpace run: after training started:\n" + "\n".join(late + never), file=say)
    print(f"torchpace run: {ended.outcome}", file=say)
    return ended.exit_code
