"""How much a run trains, read off the script and its command line: its step options, and what
a batch-size change or a per-step speed-up does to the whole run. One home for tune, run, apply
and compare (issue 30: each says the same when a plan changes the work of a run bounded by steps).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path

_STEP_FLAG = re.compile(r"^--?(max|num|n|total|train)?[-_]?(steps?|iters?|iterations?)$")
# The same on a command line, where a config system may prefix the key with its section
# (minGPT's ``--trainer.max_iters=1001``; nanoGPT's configurator takes ``--max_iters=120``
# with no add_argument to read).
_GIVEN_STEP_FLAG = re.compile(
    r"^(--?(?:[A-Za-z_][\w-]*\.)*(?:max|num|n|total|train)?[-_]?(?:steps?|iters?|iterations?))"
    r"(?:=.*)?$"
)


def step_flags(script: str | Path, args: Sequence[str] = ()) -> list[tuple[str, int | None]]:
    """The script's command-line options that set how many steps it trains (``--max-steps``,
    ``--max_iters``, ``--num-iterations``…) with their integer defaults, read from its
    ``add_argument`` calls without running it; then those its command line ``args`` gives that
    no ``add_argument`` declares (a config system's ``--trainer.max_iters=1001``), with no
    default."""
    try:
        found = step_flags_in(Path(script).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        found = []
    known = {flag for flag, _ in found}
    for a in args:
        m = _GIVEN_STEP_FLAG.match(a)
        if m and m.group(1) not in known:
            known.add(m.group(1))
            found.append((m.group(1), None))
    return found


def step_flags_in(source: str) -> list[tuple[str, int | None]]:
    """:func:`step_flags` of a script's source text (its options, read by
    :func:`torchpace.lint.values.options`)."""
    from torchpace.lint.engine import parse
    from torchpace.lint.results import LintError
    from torchpace.lint.values import options

    ctx = parse("<script>", source.encode("utf-8"))
    if isinstance(ctx, LintError):
        return []
    found: list[tuple[str, int | None]] = []
    for option in options(ctx):
        flag = next((n for n in option.names if _STEP_FLAG.match(n)), None)
        if flag is None:
            continue
        default = option.default
        value = default.value if isinstance(default, ast.Constant) else None
        found.append((flag, value if type(value) is int else None))
    return found


def flag_value(args: Sequence[str], flag: str) -> int | None:
    for i, a in enumerate(args):
        text = None
        if a == flag and i + 1 < len(args):
            text = args[i + 1]
        elif a.startswith(flag + "="):
            text = a.split("=", 1)[1]
        if text is not None:
            try:
                return int(text)
            except ValueError:
                return None
    return None


def flag_text(args: Sequence[str], flag: str, value: int) -> str:
    """``flag`` with ``value`` as the command line ``args`` writes it: ``--max_iters=120`` where
    it was given so (a config system may take no other form), else ``--max-steps 150``."""
    if any(a.startswith(flag + "=") for a in args):
        return f"{flag}={value}"
    return f"{flag} {value}"


def batch_work_note(
    flags: Sequence[tuple[str, int | None]], args: Sequence[str], old: int | None, new: int | None
) -> str | None:
    """What a batch-size change does to the work of a run bounded by steps, for ``tune``,
    ``run``, ``apply`` and ``compare`` alike: each step trains ``new / old`` times the samples,
    so a script that stops after a number of steps trains that much more data; with the step
    option the script has (``flags``, :func:`step_flags`), the value that trains as many samples
    as before. None when the batch does not change."""
    if not old or not new or old == new:
        return None
    ratio = new / old
    note = f"the batch changes from {old} to {new}: each step trains {ratio:.3g}× the samples"
    if not flags:
        return note + (
            "; a run that stops after a number of steps now trains on that much more data "
            "(`torchpace compare` compares at equal samples and at equal loss)"
        )
    flag, default = flags[0]
    steps = flag_value(args, flag)
    steps = default if steps is None else steps
    if steps is None:
        return note + f"; scale {flag} by {1 / ratio:.3g} to train on as many samples as before"
    want = max(1, round(steps * old / new))
    return note + (
        f"; the script stops after {flag_text(args, flag, steps)} steps, so the run trains "
        f"{ratio:.3g}× the samples: pass {flag_text(args, flag, want)} to train on as many as "
        "before"
    )


def whole_run_effect(
    *, startup_s: float, step_s: float, steps: int, per_step: float, compile_s: float = 0.0
) -> float:
    """Amdahl over a run: the speed-up of a run of ``steps`` steps of ``step_s`` after
    ``startup_s`` of set-up that the plan does not touch, when each step is ``per_step`` times
    faster and the plan adds ``compile_s`` once. Work outside the steps that the start-up does not
    include (evaluation, generation) is not known here and is not counted: the estimate is an
    upper bound for a run that has such work, which ``compare`` measures."""
    if steps < 1 or step_s <= 0 or per_step <= 0:
        raise ValueError("a whole-run estimate needs steps, a step time and a speed-up above 0")
    before = startup_s + steps * step_s
    return before / (startup_s + compile_s + steps * step_s / per_step)
