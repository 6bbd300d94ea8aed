"""Run a user's script in this process, exactly as ``python script.py args`` would
(``torchpace.script.main``), under a doctor session."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torchpace.doctor.children import Child, stop_running
from torchpace.doctor.session import Session
from torchpace.script.main import load, print_script_error, run_as_main

__all__ = ["ScriptRun", "load", "print_script_error", "run"]


@dataclass
class ScriptRun:
    exit_code: int
    outcome: str
    # The result, also of a run with no optimizer step (``stepped`` False): its outcome and the
    # processes the script started, with no steps and no figures.
    result: dict[str, Any]
    saw: str  # what the doctor saw, for the "no optimizer step" message
    children: list[Child]  # processes the script started (not DataLoader workers)

    @property
    def stepped(self) -> bool:
        return bool(self.result["run"]["optimizer_steps_seen"])

    @property
    def stopped(self) -> list[Child]:
        """The children still running when the script was stopped, which the doctor ended."""
        return [c for c in self.children if c.stopped_by is not None]


def _saw(session: Session) -> str:
    rec = session.rec
    batches = len(rec.fetches)
    models = len(session.modules.roots) if session.modules is not None else 0
    return (
        f"saw {batches} DataLoader batches, {models} models or loss modules called and "
        f"{rec.backward_calls} backward() calls"
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
        # --step-timeout runs from the first backward(): before it, only the first-step limit
        # (a script that imports for longer than the step limit is not stuck; beside two
        # CPU-bound processes torch's import took over the 3 s a test gave steps)
        if steps == 0 and rec.backward_calls and step_timeout and waited > step_timeout:
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
    children = session.rec.records.children
    if ended.interrupted:  # the script never joins what it started: end it, or exit waits on it
        stop_running(children)
    from torchpace.doctor.result import build

    result = build(
        session,
        target={"kind": "script", "script": script, "args": list(args), "cwd": os.getcwd()},
        outcome=ended.outcome,
        lint=lint,
        script=path,
    )
    return ScriptRun(ended.exit_code, ended.outcome, result, _saw(session), children)
