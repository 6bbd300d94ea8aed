"""SIGTERM as an exception that is raised again until handled (torchpace._signals)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

CHILD = """
import sys, time
from torchpace._signals import Terminated, catch_sigterm, handled
catch_sigterm()
try:
    print("ready", flush=True)  # inside the try: the signal may land while this returns
    time.sleep(60)
except BaseException:
    pass  # swallowed, as Python does to an exception raised in a __del__
try:
    time.sleep(60)
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
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 143 and "raised again and handled" in out
    assert time.monotonic() - t0 < 15


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
print("quiet", flush=True)
try:
    time.sleep(60)
except BaseException:
    pass  # the second one is swallowed, and raised again
try:
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
