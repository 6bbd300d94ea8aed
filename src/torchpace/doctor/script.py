"""Run a user's script in this process, exactly as ``python script.py args`` would
(``torchpace.script.main``), under a doctor session."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torchpace.doctor.children import describe
from torchpace.doctor.session import Session
from torchpace.script.main import load, print_script_error, run_as_main

__all__ = ["ScriptRun", "load", "print_script_error", "run"]


@dataclass
class ScriptRun:
    exit_code: int
    outcome: str
    result: dict[str, Any] | None  # None when no optimizer step was seen
    saw: str  # what the doctor saw, for the "no optimizer step" message
    children: int = 0  # processes the script started (not DataLoader workers)


def _saw(session: Session) -> str:
    rec = session.rec
    batches = len(rec.fetches)
    models = len(session.modules.roots) if session.modules is not None else 0
    started = rec.records.children
    return (
        f"saw {batches} DataLoader batches, {models} models or loss modules called and "
        f"{rec.backward_calls} backward() calls"
        + (f"; the script started {describe(started)}" if started else "")
    )


def _stall_watch(
    session: Session, first_step_timeout: float, step_timeout: float
) -> Callable[[], str | None]:
    """The watchdog: a reason to stop when neither a step nor a backward() came in
    ``first_step_timeout`` seconds from the start, or when no step came in ``step_timeout``
    seconds (0: never) since the last one, or since the first backward(): a script stuck after
    its first step hung the doctor for ever (issue 17). A backward() is progress for the first
    step: an LBFGS step runs many closures (40 s for pytorch/examples' time-sequence-prediction
    on a 2-core CPU) before it ends."""
    start = time.monotonic()
    seen: dict[str, Any] = {"steps": 0, "since": start}

    def stalled() -> str | None:
        rec, now = session.rec, time.monotonic()
        steps = rec.boundaries
        if steps != seen["steps"] or (steps == 0 and rec.backward_calls and "first" not in seen):
            seen.update(steps=steps, since=now)
            if steps == 0:
                seen["first"] = now
            return None
        waited = now - seen["since"]
        if steps == 0 and rec.backward_calls == 0 and waited > first_step_timeout:
            return f"no training step and no backward() observed in {first_step_timeout:g} s"
        if steps == 0 and step_timeout and waited > step_timeout:
            return (
                f"backward() ran {rec.backward_calls} times in {waited:.0f} s, but no "
                "optimizer.step() ended a step (--step-timeout sets the limit; 0 waits for ever)"
            )
        if steps and step_timeout and waited > step_timeout:
            return (
                f"no optimizer step for {step_timeout:g} s after step {steps}: the script seems "
                "stuck (--step-timeout sets the limit; 0 waits for ever)"
            )
        return None

    return stalled


def run(
    script: str,
    args: list[str],
    *,
    steps: int,
    warmup: int,
    first_step_timeout: float = 60.0,
    step_timeout: float = 600.0,
    lint: bool = True,
) -> ScriptRun:
    path = load(script).co_filename  # a script that cannot be read fails before any instrument
    session = Session(steps=steps, warmup=warmup, stop=steps > 0)
    session.start()  # before sys is touched: if it fails, nothing needs restoring
    try:
        ended = run_as_main(
            script,
            args,
            watchdog=_stall_watch(session, first_step_timeout, step_timeout),
        )
    finally:
        session.finish()
    exit_code, outcome = ended.exit_code, ended.outcome
    saw = _saw(session)
    if session.rec.boundaries == 0:
        return ScriptRun(exit_code, outcome, None, saw, len(session.rec.records.children))
    from torchpace.doctor.result import build

    result = build(
        session,
        target={"kind": "script", "script": script, "args": list(args), "cwd": os.getcwd()},
        outcome=outcome,
        lint=lint,
        script=path,
    )
    return ScriptRun(exit_code, outcome, result, saw)
