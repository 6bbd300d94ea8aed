"""Run a user's script in this process, exactly as ``python script.py args`` would
(``torchpace.script.main``), under a doctor session."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from torchpace.doctor.session import Session
from torchpace.script.main import load, print_script_error, run_as_main

__all__ = ["ScriptRun", "load", "print_script_error", "run"]


@dataclass
class ScriptRun:
    exit_code: int
    outcome: str
    result: dict[str, Any] | None  # None when no optimizer step was seen
    saw: str  # what the doctor saw, for the "no optimizer step" message


def _saw(session: Session) -> str:
    rec = session.rec
    batches = len(rec.fetches)
    models = len(session.modules.roots) if session.modules is not None else 0
    return (
        f"saw {batches} DataLoader batches, {models} models or loss modules called and "
        f"{rec.backward_calls} backward() calls"
    )


def run(
    script: str,
    args: list[str],
    *,
    steps: int,
    warmup: int,
    first_step_timeout: float = 60.0,
    lint: bool = True,
) -> ScriptRun:
    path = load(script).co_filename  # a script that cannot be read fails before any instrument
    session = Session(steps=steps, warmup=warmup, stop=steps > 0)
    session.start()  # before sys is touched: if it fails, nothing needs restoring
    try:
        ended = run_as_main(
            script,
            args,
            watchdog_s=first_step_timeout,
            watchdog_fires=lambda: session.rec.boundaries == 0,
            watchdog_outcome=f"no optimizer.step() observed in {first_step_timeout:g} s",
        )
    finally:
        session.finish()
    exit_code, outcome = ended.exit_code, ended.outcome
    saw = _saw(session)
    if session.rec.boundaries == 0:
        return ScriptRun(exit_code, outcome, None, saw)
    from torchpace.doctor.result import build

    result = build(
        session,
        target={"kind": "script", "script": script, "args": list(args), "cwd": os.getcwd()},
        outcome=outcome,
        lint=lint,
        script=path,
    )
    return ScriptRun(exit_code, outcome, result, saw)
