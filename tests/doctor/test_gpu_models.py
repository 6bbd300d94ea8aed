"""GPU-only behaviours of the doctor's models, decided by the documentation and tested on the CPU
with the CUDA calls stood in for."""

from __future__ import annotations

import time

import pytest
import torch

from torchpace.doctor import replay
from torchpace.doctor.ranks import figures, summarize_rank


def test_a_slow_first_call_on_cuda_is_a_warm_up_not_the_measure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # cudnn.benchmark autotunes a new shape on its first call (every algorithm tried): that
    # call is not what the op costs. On a CPU a slow first call is the measure.
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    calls = []

    def run() -> None:
        time.sleep(0.3 if not calls else 0.001)
        calls.append(1)

    assert replay.per_call(run, torch.device("cuda", 0)) < 0.05
    calls.clear()
    assert replay.per_call(run, torch.device("cpu")) >= 0.3


def _result(host_backward: float, device_backward: float | None) -> dict[str, object]:
    def phases(backward: float) -> dict[str, object]:
        return {
            "backward": {"share": 0.5, "seconds": {"median": backward}},
            "forward": {"share": 0.5, "seconds": {"median": 0.010}},
        }

    out: dict[str, object] = {
        "outcome": "stopped after the measured steps",
        "steps": {"kept": 10},
        "step_seconds": {"median": 0.040},
        "breakdown": phases(host_backward),
        "loaders": [],
    }
    if device_backward is not None:
        out["device_breakdown"] = phases(device_backward)
    return out


def test_a_cuda_ranks_wait_is_read_on_its_device_not_its_host() -> None:
    # NCCL's all-reduce does not block the host: both hosts spend 5 ms in backward, while the
    # fast rank's GPU spins 20 ms longer in the all-reduce, waiting for the slow rank.
    fast = summarize_rank(_result(0.005, 0.030), 0)
    slow = summarize_rank(_result(0.005, 0.010), 1)
    waits = {r["rank"]: r["wait_s"] for r in figures([fast, slow])["per_rank"]}
    assert waits == {0: pytest.approx(0.020), 1: pytest.approx(0.0)}
    # on the CPU (gloo blocks the host) the host's backward is the one to read
    cpu = figures(
        [summarize_rank(_result(0.030, None), 0), summarize_rank(_result(0.010, None), 1)]
    )
    assert cpu["per_rank"][0]["wait_s"] == pytest.approx(0.020)


def test_a_cuda_process_group_is_bound_to_its_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.distributed as dist

    from torchpace.speedups import distributed

    calls: list[tuple[tuple[object, ...], dict[str, object]]] = []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **k: calls.append((a, k)))
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    distributed.init_from_env("cuda")
    distributed.init_from_env("cpu")
    assert calls == [
        ((), {"backend": "nccl", "device_id": torch.device("cuda", 1)}),
        ((), {"backend": "gloo"}),
    ]
