"""Run a user's script in this process, exactly as ``python script.py args`` would, under a
doctor session: its own ``sys.argv``, ``__name__ == "__main__"``, ``sys.path[0]`` set to its
folder, the working directory left as it is, and its output untouched."""

from __future__ import annotations

import _thread
import builtins
import os
import signal
import sys
import threading
import traceback
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchpace.doctor.recorder import DoctorStop
from torchpace.doctor.session import Session

_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass
class ScriptRun:
    exit_code: int
    outcome: str
    result: dict[str, Any] | None  # None when no optimizer step was seen
    saw: str  # what the doctor saw, for the "no optimizer step" message


def load(path: str) -> types.CodeType:
    """Compile the script, or raise an error that says what is wrong with it."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"script not found: {path}")
    if not p.is_file():
        raise ValueError(f"{path} is not a file; give the training script to run")
    source = p.read_bytes()
    try:
        return compile(source, str(p.resolve()), "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else path
        raise ValueError(f"{where}: the script does not parse: {exc.msg}") from None


def _without_doctor(te: traceback.TracebackException, first: str) -> None:
    """Drop the doctor's frames: the runner's above the script, and the instruments' wrappers."""
    frames = list(te.stack)
    while frames and frames[0].filename != first:
        frames.pop(0)
    te.stack = traceback.StackSummary.from_list(
        [f for f in frames if not f.filename.startswith(_OWN_DIR)]
    )
    for nested in (te.__cause__, te.__context__):
        if nested is not None:
            _without_doctor(nested, first)


def print_script_error(exc: BaseException, script: str) -> None:
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    _without_doctor(te, script)
    sys.stderr.write("".join(te.format()))
    sys.stderr.flush()


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1, as Python does
    return 1


def _saw(session: Session) -> str:
    rec = session.rec
    batches = len(rec.fetches)
    models = len(session.modules.roots) if session.modules is not None else 0
    return (
        f"saw {batches} DataLoader batches, {models} models or loss modules called and "
        f"{rec.backward_calls} backward() calls"
    )


def _interrupt_main() -> None:
    """Raise KeyboardInterrupt in the main thread, even while it is blocked in a system call.

    ``_thread.interrupt_main()`` only sets a flag, which a blocked call (``time.sleep``, a lock, a
    read) never checks; a real SIGINT interrupts the call, as Ctrl-C does.
    """
    kill = getattr(signal, "pthread_kill", None)  # not on Windows
    main = threading.main_thread().ident
    if kill is not None and main is not None and callable(signal.getsignal(signal.SIGINT)):
        kill(main, signal.SIGINT)
    else:
        _thread.interrupt_main()


def _ensure_sigint_handler() -> signal.Handlers | None:
    """Install Python's KeyboardInterrupt handler where SIGINT is ignored or defaulted; return
    what to restore, or None when nothing changed (or this is not the main thread)."""
    current = signal.getsignal(signal.SIGINT)
    if callable(current) or threading.current_thread() is not threading.main_thread():
        return None
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return current  # type: ignore[return-value]


def run(
    script: str,
    args: list[str],
    *,
    steps: int,
    warmup: int,
    first_step_timeout: float = 60.0,
    lint: bool = True,
) -> ScriptRun:
    code = load(script)
    path = code.co_filename
    module = types.ModuleType("__main__")
    module.__dict__.update(
        __file__=path, __builtins__=builtins, __cached__=None, __package__=None, __spec__=None
    )
    saved = (sys.argv, sys.path[0] if sys.path else None, sys.modules.get("__main__"))
    session = Session(steps=steps, warmup=warmup, stop=steps > 0)
    fired = threading.Event()

    def no_step() -> None:
        if session.rec.boundaries == 0:
            fired.set()
            _interrupt_main()

    watchdog = threading.Timer(first_step_timeout, no_step)
    watchdog.daemon = True
    # A process started in the background (`cmd &`, nohup, some CI runners) inherits SIGINT
    # ignored, and then the watchdog's SIGINT would be lost while the script sleeps: Python's
    # own handler goes in for the run, as in a foreground process, and the old one comes back.
    session.start()  # before sys is touched: if it fails, nothing needs restoring
    previous_sigint = _ensure_sigint_handler()
    sys.argv = [script, *args]
    if sys.path:
        sys.path[0] = os.path.dirname(path)
    else:
        sys.path.insert(0, os.path.dirname(path))
    sys.modules["__main__"] = module
    exit_code = 0
    watchdog.start()
    try:
        exec(code, module.__dict__)
        outcome = "the script finished"
    except DoctorStop:
        outcome = "stopped after the measured steps"
    except SystemExit as exc:
        exit_code = _exit_code(exc)
        outcome = f"the script exited with status {exit_code}"
    except KeyboardInterrupt as exc:
        if not fired.is_set():
            print_script_error(exc, path)
            exit_code = 130
            outcome = "interrupted"
        else:
            exit_code = 1
            outcome = f"no optimizer.step() observed in {first_step_timeout:g} s"
    except BaseException as exc:  # the script's own error, shown as Python would
        print_script_error(exc, path)
        exit_code = 1
        outcome = f"the script raised {type(exc).__name__}"
    finally:
        watchdog.cancel()
        if previous_sigint is not None:
            signal.signal(signal.SIGINT, previous_sigint)
        session.finish()
        sys.argv = saved[0]
        if saved[1] is not None:
            sys.path[0] = saved[1]
        if saved[2] is not None:
            sys.modules["__main__"] = saved[2]
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
