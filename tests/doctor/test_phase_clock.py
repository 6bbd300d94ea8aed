"""The phase clock's step ends at the step's own end time (found in make test beside two
CPU-bound processes: a thread switch between the step's end and the clock's cut made a 1 ms
step's phases add up to 1.9 times its length, and the result broke its schema)."""

from __future__ import annotations

import time

import pytest

from torchpace.doctor.phases import PhaseClock


def test_a_cut_at_the_steps_end_time_adds_up_to_the_step():
    clock = PhaseClock(cuda=False)
    start = time.perf_counter()
    clock.restart(start)
    clock.enter("forward")
    clock.exit()
    end = time.perf_counter()
    time.sleep(0.05)  # the bookkeeping between the step's end and the cut, stretched
    phases = clock.cut(end)
    assert sum(phases.host.values()) == pytest.approx(end - start, abs=1e-9)
    # The next step starts where this one ended: the 50 ms are in it, not lost or counted twice.
    later = time.perf_counter()
    assert sum(clock.cut(later).host.values()) == pytest.approx(later - end, abs=1e-9)


def test_a_cut_never_runs_the_clock_backwards():
    clock = PhaseClock(cuda=False)
    clock.enter("forward")
    before = time.perf_counter() - 1.0  # a time before the last flush
    phases = clock.cut(before)
    assert min(phases.host.values()) >= 0.0
