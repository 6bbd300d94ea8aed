"""``torchpace apply PLAN.json SCRIPT.py [--diff | --write]``: a plan as a reviewed source change.

The edits with a sound static form are shown as a unified diff (``--diff``, the default) or
written in place (``--write``, atomically, keeping the file's permissions); what has no sound edit
is printed as an instruction. Applying twice changes nothing the second time. This command does
not import torch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "apply",
        help="write a tuned plan into a training script's source, as a diff to review",
        description="Turn a plan into edits of the script itself: a unified diff by default, "
        "or the file rewritten with --write; techniques without a sound edit are listed with "
        "what to do by hand.",
    )
    p.add_argument("plan", type=Path, help="the plan (torchpace-plan.json)")
    p.add_argument("script", type=Path, help="the training script to change")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--diff", action="store_true", help="print the change (the default)")
    how.add_argument("--write", action="store_true", help="rewrite the script in place")
    p.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="the device the script trains on (device-dependent values: workers, pinning, "
        "matmul precision, autocast's device_type); default auto: cuda where the script "
        "moves tensors or modules to a CUDA device, else cpu",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchpace.lint.fixes import apply_fixes, unified_diff, write_fixed
    from torchpace.script.edits import plan_edits, script_device
    from torchpace.train.plan import Plan

    plan = Plan.load(args.plan)
    if note := Plan.noise_note(args.plan):
        print(f"torchpace apply: {note}", file=sys.stderr)
    path = str(args.script)
    try:
        data = args.script.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        device = args.device if args.device != "auto" else script_device(data, path)
        findings, notes = plan_edits(data, path, plan, device=device)
    except SyntaxError as e:
        raise ValueError(f"{path}:{e.lineno}: the script does not parse: {e.msg}") from None
    fixed = apply_fixes(data, findings)
    for f in fixed.refused:
        notes.append(_refused(f))
    if fixed.source != data:
        if args.write:
            write_fixed(path, fixed.source)
            techniques = ", ".join(dict.fromkeys(f.technique for f in fixed.applied))
            print(f"torchpace apply: wrote {path} ({techniques})", file=sys.stderr)
        else:
            sys.stdout.write(unified_diff(path, data, fixed.source))
    elif notes:  # not "every edit the plan makes": the rest of the plan is by hand
        print(f"torchpace apply: {path} has every edit apply can make for this plan; the rest "
              "is by hand:", file=sys.stderr)  # fmt: skip
    else:
        print(f"torchpace apply: {path} already has every edit the plan makes", file=sys.stderr)
    for n in notes:
        where = f"{path}:{n.line}: " if n.line else ""
        print(f"torchpace apply: by hand: {where}{n.technique}: {n.text}", file=sys.stderr)
    return 0


def _refused(f: Any) -> Any:
    from torchpace.script.edits import Instruction

    return Instruction(
        f.technique, f.location.line, f"{f.message} (its edit would not apply cleanly here)"
    )
