"""Where the unnamed time goes: stack samples of the main thread during the measured steps.

Step time outside the model's forward and backward, the optimizer and a DataLoader's wait
("other"), and the DataLoader's own wait ("data"), is time the phase clock can only name by
phase. A background thread looks at the main thread's stack every ``INTERVAL_S`` and, when the
step is in one of those phases, charges the sample to the innermost frame of the user's own code
(not torch's, torchpace's, the standard library's or an installed package's): a custom
``get_batch()`` at its line, a dataset's ``__getitem__`` when the loader has no workers. Samples
are uniform in time, so a function's share of the samples taken in the kept steps is its share
of their time. Reading another thread's frame costs a few microseconds; waking the thread costs
more on a machine whose cores torch's threads fill (INTERVAL_S).
"""

from __future__ import annotations

import os
import random
import sys
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING

from torchpace.runtime.user_code import is_user_code

if TYPE_CHECKING:
    from torchpace.doctor.recorder import Recorder

# 10 ms: each wake costs the step about 85 us on the 2-core EPYC (the woken thread takes a core
# from torch's intra-op threads mid-op): at 5 ms, the interpreter's GIL switch interval, a VAE's
# 11 ms steps lost 1.7% to the sampler alone. A 100 ms step gets 10 samples.
INTERVAL_S = 0.01
# The phases whose time the sampler names; the others have their call site already.
SAMPLED = ("other", "data")


@dataclass(frozen=True)
class Spot:
    """A function of the user's code: where it is defined, and the line a sample caught."""

    path: str
    function: str
    def_line: int
    line: int


def user_spot(frame: FrameType | None) -> Spot | None:
    """The innermost frame of user code on this stack, or None."""
    while frame is not None:
        code = frame.f_code
        if is_user_code(code):
            name = getattr(code, "co_qualname", code.co_name)
            return Spot(
                os.path.abspath(code.co_filename), name, code.co_firstlineno, frame.f_lineno
            )
        frame = frame.f_back
    return None


class StackSampler:
    """Samples the recorder's main thread while its measured steps run (``start``/``stop``).
    ``counts[(step, phase, spot)]``: samples taken during step ``step`` (1-based, as the
    recorder numbers them) in ``phase``; ``spot`` is None for phases not in SAMPLED or when no
    user frame was on the stack."""

    def __init__(self, rec: Recorder, interval_s: float = INTERVAL_S) -> None:
        self.rec = rec
        self.interval_s = interval_s
        self.counts: Counter[tuple[int, str, Spot | None]] = Counter()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="torchpace-sampler", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)

    def _run(self) -> None:
        rec, main = self.rec, self.rec.main_thread
        # Jittered intervals (0.5-1.5x), so a loop whose period is a multiple of the interval is
        # not sampled at the same point of every step; a private generator, as the script's own
        # random stream must not move.
        jitter = random.Random(0)
        while not self._done.wait(self.interval_s * (0.5 + jitter.random())):
            if rec.finished:
                return
            step = rec.boundaries + 1
            phase = rec.clock.current
            spot = None
            if phase in SAMPLED:
                spot = user_spot(sys._current_frames().get(main))
            self.counts[(step, phase, spot)] += 1


# 1%: below it a function holds fewer samples than a 100-step run's sampling error resolves
# (1,000 samples at 10 ms over 10 s: one percent is 10 samples, a relative error near 32%).
FLOOR = 0.01
TOP = 10  # spots listed; the JSON and the report keep the largest
# 20 samples (0.2 s of measured steps at 10 ms): below it a share is a sample or two, not a
# measurement. pytorch/examples' regression script (10 steps of 0.2 ms) put its one sample in
# get_batch() and reported it as 100% of the step.
MIN_SAMPLES = 20


def hot_spots(
    counts: Mapping[tuple[int, str, Spot | None], int],
    kept: set[int],
    interval_s: float = INTERVAL_S,
) -> dict[str, object]:
    """The user functions that hold the sampled phases' time in the ``kept`` steps: each with
    its share of all samples of those steps, the line most often caught, and its phase."""
    total = 0
    by_function: Counter[tuple[str, str, int, str]] = Counter()
    lines: dict[tuple[str, str, int, str], Counter[int]] = {}
    for (step, phase, spot), n in counts.items():
        if step not in kept:
            continue
        total += n
        if spot is None:
            continue
        key = (spot.path, spot.function, spot.def_line, phase)
        by_function[key] += n
        lines.setdefault(key, Counter())[spot.line] += n
    if total < MIN_SAMPLES:
        return {"interval_s": interval_s, "samples": total, "spots": []}
    spots = [
        {
            "function": function,
            "path": path,
            "def_line": def_line,
            "line": lines[key].most_common(1)[0][0],
            "phase": phase,
            "share": n / total,
            "samples": n,
        }
        for key, n in by_function.most_common(TOP)
        if n / total >= FLOOR
        for path, function, def_line, phase in [key]
    ]
    return {"interval_s": interval_s, "samples": total, "spots": spots}
