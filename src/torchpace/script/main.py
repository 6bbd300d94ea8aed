"""Run a user's script in this process, exactly as ``python script.py args`` would: its own
``sys.argv``, ``__name__ == "__main__"``, ``sys.path[0]`` set to its folder, the working directory
left as it is, and its output untouched. The doctor, the tune's script trials and
``torchpace run`` all start scripts through ``run_as_main``.
"""

from __future__ import annotations

import _thread
import builtins
import os
import signal
import sys
import threading
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchpace._signals import Terminated, catch_sigterm, handled
from torchpace.runtime.stop import DoctorStop

# Frames of torchpace itself (the runner above the script, the instruments' wrappers) are left
# out of the script's tracebacks: the user sees their own error as Python would show it.
_OWN_DIR = str(Path(__file__).resolve().parents[1]) + os.sep


@dataclass(frozen=True)
class Ended:
    """How a script run ended: ``exit_code`` as ``python`` would return it, ``outcome`` in words,
    ``watchdog`` when the run was interrupted by ``run_as_main``'s timer."""

    exit_code: int
    outcome: str
    watchdog: bool = False
    error: BaseException | None = None  # what the script raised, if it raised
    # Cut short from outside the script's own code: a DoctorStop, the watchdog, SIGTERM or
    # Ctrl-C. Processes it started may still run, with nobody left to join them.
    interrupted: bool = False


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


def _without_torchpace(te: traceback.TracebackException, first: str) -> None:
    frames = list(te.stack)
    while frames and frames[0].filename != first:
        frames.pop(0)
    te.stack = traceback.StackSummary.from_list(
        [f for f in frames if not f.filename.startswith(_OWN_DIR)]
    )
    for nested in (te.__cause__, te.__context__):
        if nested is not None:
            _without_torchpace(nested, first)


def print_script_error(exc: BaseException, script: str) -> None:
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    _without_torchpace(te, script)
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


# How often the watchdog asks whether the script is stuck (seconds).
WATCHDOG_POLL_S = 0.5


def _interrupt_main(*, terminate: bool = False) -> None:
    """Interrupt the main thread, even while it is blocked in a system call: with SIGTERM
    (:class:`Terminated`, where our handler is in) or SIGINT (KeyboardInterrupt).

    ``_thread.interrupt_main()`` only sets a flag, which a blocked call (``time.sleep``, a lock, a
    read) never checks; a real signal interrupts the call, as Ctrl-C does.
    """
    kill = getattr(signal, "pthread_kill", None)  # not on Windows
    main = threading.main_thread().ident
    if kill is not None and main is not None and terminate:
        kill(main, signal.SIGTERM)
    elif kill is not None and main is not None and callable(signal.getsignal(signal.SIGINT)):
        kill(main, signal.SIGINT)
    else:
        _thread.interrupt_main()


def _catch_sigterm() -> Any:
    """SIGTERM raises :class:`Terminated` during the run (torchpace._signals)."""
    return catch_sigterm()


def _ensure_sigint_handler() -> signal.Handlers | None:
    """Install Python's KeyboardInterrupt handler where SIGINT is ignored or defaulted; return
    what to restore, or None when nothing changed (or this is not the main thread)."""
    current = signal.getsignal(signal.SIGINT)
    if callable(current) or threading.current_thread() is not threading.main_thread():
        return None
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return current  # type: ignore[return-value]


def run_as_main(
    script: str,
    args: list[str],
    *,
    stopped: str = "stopped after the measured steps",
    watchdog: Callable[[], str | None] | None = None,
) -> Ended:
    """Execute ``script`` as ``__main__`` with ``args``; everything of ``sys`` it changes is put
    back. A ``DoctorStop`` raised by an instrument ends it with ``stopped``. ``watchdog`` is
    asked every :data:`WATCHDOG_POLL_S` seconds; when it returns a reason, the script is
    interrupted and the run ends with that reason (the doctor's: no first step, or a stall
    after it). The interruption is a :class:`Terminated`, which a script's own ``except
    Exception`` or ``except KeyboardInterrupt`` does not catch, where SIGTERM is ours to use;
    a SIGINT otherwise. Raises only for a script that cannot be read or compiled."""
    code = load(script)
    path = code.co_filename
    module = types.ModuleType("__main__")
    module.__dict__.update(
        __file__=path, __builtins__=builtins, __cached__=None, __package__=None, __spec__=None
    )
    saved = (sys.argv, sys.path[0] if sys.path else None, sys.modules.get("__main__"))
    fired: list[str] = []
    done = threading.Event()

    def watch() -> None:
        assert watchdog is not None
        while not done.wait(WATCHDOG_POLL_S):
            reason = watchdog()
            if reason:
                fired.append(reason)
                _interrupt_main(terminate=previous_sigterm is not None)
                return

    timer = threading.Thread(target=watch, daemon=True) if watchdog is not None else None
    # A process started in the background (`cmd &`, nohup, some CI runners) inherits SIGINT
    # ignored, and then the watchdog's SIGINT would be lost while the script sleeps: Python's
    # own handler goes in for the run, as in a foreground process, and the old one comes back.
    previous_sigint = _ensure_sigint_handler()
    previous_sigterm = _catch_sigterm()
    sys.argv = [script, *args]
    if sys.path:
        sys.path[0] = os.path.dirname(path)
    else:
        sys.path.insert(0, os.path.dirname(path))
    sys.modules["__main__"] = module
    if timer is not None:
        timer.start()
    try:
        exec(code, module.__dict__)
        ended = Ended(0, "the script finished")
    except DoctorStop:
        ended = Ended(0, stopped, interrupted=True)
    except SystemExit as exc:
        code_ = _exit_code(exc)
        ended = Ended(code_, f"the script exited with status {code_}")
    except Terminated:
        # Caught where it was meant to be: torchpace._signals stops raising it again. Left
        # raising, it killed the doctor at exit, while multiprocessing joined the script's
        # children (pytorch/examples' mnist_hogwild).
        handled()
        ended = (
            Ended(1, fired[0], watchdog=True, interrupted=True)
            if fired
            else Ended(143, "terminated (SIGTERM)", interrupted=True)
        )
    except KeyboardInterrupt as exc:
        if fired:
            ended = Ended(1, fired[0], watchdog=True, interrupted=True)
        else:
            print_script_error(exc, path)
            ended = Ended(130, "interrupted", interrupted=True)
    except BaseException as exc:  # the script's own error, shown as Python would
        print_script_error(exc, path)
        ended = Ended(1, f"the script raised {type(exc).__name__}", error=exc)
    finally:
        done.set()
        if previous_sigint is not None:
            signal.signal(signal.SIGINT, previous_sigint)
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)
        sys.argv = saved[0]
        if saved[1] is not None:
            sys.path[0] = saved[1]
        if saved[2] is not None:
            sys.modules["__main__"] = saved[2]
    return ended
