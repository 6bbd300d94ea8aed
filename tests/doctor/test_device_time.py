"""On CUDA a step's pace is the later of the host's and the device's clocks: a host with no sync
in the step queues work and runs ahead of the GPU, so its clock alone overstates throughput (MFU
610% on an H100, benchmarks/results/2026-11-25-gpu-check.json)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from torchpace.doctor.records import Records, Step
from torchpace.doctor.summary import summarize_steps, utilisation
from torchpace.runtime.phases import PHASES


@dataclass
class FakeEvent:
    """A CUDA event's timestamp on the device, in milliseconds."""

    at_ms: float

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, other: FakeEvent) -> float:
        return other.at_ms - self.at_ms


def _step(index: int, host_s: float, trail_ms: list[tuple[str, float]]) -> Step:
    host = {**dict.fromkeys(PHASES, 0.0), "forward": host_s / 2, "backward": host_s / 2}
    events = [("", FakeEvent(trail_ms[0][1]))] + [(p, FakeEvent(t)) for p, t in trail_ms[1:]]
    return Step(
        index=index, seconds=host_s, host=host,
        events=events, fetches=[], backward_calls=1, forward_samples=8, eval_calls=0,
        syncs={}, sync_time={}, compiled=False, kind="measured",
    )  # fmt: skip


def test_a_host_running_ahead_is_paced_by_the_device() -> None:
    records = Records()
    # host: 2 ms a step; device: 5 ms forward and 15 ms backward a step
    for i in range(8):
        t = 20.0 * i
        records.steps.append(
            _step(i + 1, 0.002, [("", t), ("forward", t + 5.0), ("backward", t + 20.0)])
        )
    summary = summarize_steps(records, cuda=True)
    assert summary["step_seconds"]["median"] == pytest.approx(0.020)
    assert summary["samples_per_s"]["median"] == pytest.approx(8 / 0.020)
    device = summary["device_breakdown"]
    assert device["forward"]["share"] == pytest.approx(0.25)
    assert device["backward"]["share"] == pytest.approx(0.75)
    # 10 TFLOP a step at 20 ms on a 1000 TFLOP/s device: 50%, not 500%
    u = utilisation(10 * 10**12, summary["step_seconds"]["median"], 1000.0)
    assert u["mfu"] == pytest.approx(0.5)


def test_a_host_bound_step_keeps_the_host_clock() -> None:
    records = Records()
    for i in range(8):
        t = 30.0 * i  # the device trail follows the host: idle between its short kernels
        records.steps.append(
            _step(i + 1, 0.030, [("", t), ("forward", t + 1.0), ("backward", t + 2.0)])
        )
    summary = summarize_steps(records, cuda=True)
    assert summary["step_seconds"]["median"] == pytest.approx(0.030)
