"""SIGTERM as an exception that is raised again until handled (torchpace._signals)."""

from __future__ import annotations

import signal
import subprocess
import sys

# Every place a Terminated may land is inside a try that handles it, whatever the machine's
# load does to the timing: a signal that arrives before the swallowing `except` is entered, or a
# repeat that fires before the next `try`, is caught by the outer one.
CHILD = """
import sys, time
from torchpace._signals import Terminated, catch_sigterm, handled
catch_sigterm()
try:
    try:
        print("ready", flush=True)  # inside the try: the signal may land while this returns
        time.sleep(60)
    except BaseException:
        pass  # swallowed, as Python does to an exception raised in a __del__
    time.sleep(60)  # a Terminated that was not raised again would leave the child here
except Terminated:
    handled()
    print("raised again and handled", flush=True)
    sys.exit(143)
"""


def test_a_swallowed_terminated_is_raised_again() -> None:
    # Found by benchmarks/fault_injection.py: a Terminated that lands in a DataLoader
    # iterator's __del__ is dropped, and a script that trains for ever then ran for ever.
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    # raised again after REPEAT_S (3 s), not after the 60 s sleep: 45 s leaves load 15x room
    out, _ = proc.communicate(timeout=45)
    assert proc.returncode == 143 and "raised again and handled" in out


AGAIN = """
import sys, time
from torchpace import _signals
from torchpace._signals import Terminated, catch_sigterm, handled
_signals.REPEAT_S = 0.2
catch_sigterm()
try:
    print("ready", flush=True)
    time.sleep(60)
except Terminated:
    handled()
time.sleep(1)  # five repeat periods: a handled SIGTERM is not raised again
try:
    try:
        print("quiet", flush=True)  # inside the try: the second SIGTERM may land at once
        time.sleep(60)
    except BaseException:
        pass  # the second one is swallowed, and raised again
    time.sleep(60)
except Terminated:
    handled()
    print("second raised again and handled", flush=True)
"""


def test_a_handled_terminated_stops_and_a_later_one_repeats_again() -> None:
    # pytorch/examples' mnist_hogwild: the doctor caught its own watchdog's Terminated without
    # saying so, and the SIGTERM raised again killed it at exit, leaving the children orphaned.
    proc = subprocess.Popen([sys.executable, "-c", AGAIN], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().strip() == "quiet"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "second raised again and handled" in out
