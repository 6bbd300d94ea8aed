"""Many ranks, one report: rank 0 gathers every rank's measurement through torchrun's store and
flags stragglers and uneven data waits."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from torchpace.doctor import distributed
from torchpace.doctor.ranks import aggregate, summarize_rank
from torchpace.findings import DoctorFinding

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests/doctor/scripts/ddp_gloo.py"
LOADER_SITE = {"path": "/proj/train.py", "line": 12}


def _result(step: float, phases: dict[str, float], *, workers: int = 0) -> dict[str, Any]:
    """The parts of a doctor result that a rank summary reads; ``phases`` in seconds a step."""
    phases = {**phases, "other": step - sum(phases.values())}
    return {
        "outcome": "stopped after the measured steps",
        "steps": {"kept": 10},
        "step_seconds": {"n": 10, "median": step, "q1": step, "q3": step},
        "breakdown": {
            name: {"share": s / step, "seconds": {"median": s}} for name, s in phases.items()
        },
        "samples_per_s": {"median": 32 / step},
        "memory": {"peak_bytes": 1 << 30},
        "loaders": [{"role": "train", "num_workers": workers, "site": LOADER_SITE}],
        "findings": [],
    }


# Under DDP both ranks' steps take 40 ms: rank 1 waits 30 ms for data, rank 0 waits as long for
# the gradient all-reduce inside backward().
RANK0 = _result(0.040, {"data": 0.001, "forward": 0.004, "backward": 0.034, "optimizer": 0.0005})
RANK1 = _result(0.040, {"data": 0.031, "forward": 0.004, "backward": 0.004, "optimizer": 0.0005})


def _patterns(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = [DoctorFinding.of(f) for f in result["findings"]]  # live, or from the JSON file
    return {f.pattern: f for f in found if f.pattern}


def test_a_rank_slowed_by_its_data_is_a_straggler_even_when_step_times_agree() -> None:
    out = aggregate(
        RANK0, [summarize_rank(RANK1, 1), summarize_rank(RANK0, 0)], world_size=2, missing={}
    )
    assert [r["rank"] for r in out["ranks"]] == [0, 1]
    dist = out["distributed"]
    assert dist["step_spread"] == pytest.approx(0.0)
    wait0, wait1 = (r["wait_s"] for r in dist["per_rank"])
    assert (wait0, wait1) == (pytest.approx(0.030), 0.0)
    assert dist["work_spread"] == pytest.approx(0.040 / 0.010 - 1)
    assert dist["data_share_range"] == pytest.approx(0.75)
    found = _patterns(out)
    straggler = found["rank-straggler"]
    assert straggler.technique == "rank-load-balance"
    assert straggler.measured["slowest_rank"] == 1
    assert straggler.gain == pytest.approx(0.030 / 0.040)
    assert straggler.message.startswith("rank 1 is a straggler: its own work takes 40.0 ms")
    assert "most of the difference is time waiting for data" in straggler.message
    data = found["rank-data-wait-imbalance"]
    assert data.technique == "loader-workers"  # rank 1 loads in the training process
    assert (data.path, data.line) == ("/proj/train.py", 12)
    assert data.gain == pytest.approx(0.030 / 0.040)
    assert dist["note"] is None


def test_uneven_step_times_without_an_all_reduce_are_judged_directly() -> None:
    slow = _result(0.060, {"data": 0.002, "forward": 0.020, "backward": 0.036}, workers=4)
    fast = _result(0.040, {"data": 0.002, "forward": 0.010, "backward": 0.026}, workers=4)
    out = aggregate(
        fast, [summarize_rank(fast, 0), summarize_rank(slow, 1)], world_size=2, missing={}
    )
    straggler = _patterns(out)["rank-straggler"]
    assert straggler.measured["measure"] == "step_median_s"
    assert straggler.gain == pytest.approx(0.020 / 0.060)
    assert "waiting for data" not in straggler.message
    assert "rank-data-wait-imbalance" not in _patterns(out)


def test_balanced_ranks_raise_nothing_and_a_missing_rank_is_named() -> None:
    out = aggregate(RANK0, [summarize_rank(RANK0, 0)], world_size=3, missing={2: "it crashed"})
    assert _patterns(out) == {}
    assert out["distributed"]["missing"] == [{"rank": 2, "reason": "it crashed"}]
    assert (
        out["distributed"]["note"]
        == "1 of 3 ranks are missing from this report (rank 2: it crashed)"
    )


def test_the_data_imbalance_of_a_rank_with_workers_is_a_balance_problem() -> None:
    slow = _result(0.040, {"data": 0.010, "forward": 0.004, "backward": 0.025}, workers=4)
    fast = _result(0.040, {"data": 0.001, "forward": 0.004, "backward": 0.034}, workers=4)
    out = aggregate(
        fast, [summarize_rank(fast, 0), summarize_rank(slow, 1)], world_size=2, missing={}
    )
    assert _patterns(out)["rank-data-wait-imbalance"].technique == "rank-load-balance"


def test_a_cross_rank_finding_on_a_lint_line_is_one_entry_with_the_rule_code() -> None:
    lint = {
        "source": "lint",
        "code": "TP101",
        "pattern": None,
        "technique": "loader-workers",
        "severity": "info",
        "message": "DataLoader loads every batch in the training process",
        "fix": "Load batches in DataLoader worker processes",
        "path": "/proj/train.py",
        "line": 12,
        "gain": None,
        "measured": {},
        "status": "seen running",
        "applies": {"verb": None, "tune": False},
    }
    own = {**RANK0, "findings": [lint]}
    out = aggregate(
        own, [summarize_rank(own, 0), summarize_rank(RANK1, 1)], world_size=2, missing={}
    )
    (entry,) = [f for f in out["findings"] if f.technique == "loader-workers"]
    assert (entry.source, entry.code) == ("lint+runtime", "TP101")
    assert entry.pattern == "rank-data-wait-imbalance"


# -- through a store ---------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _torchrun_env(monkeypatch: pytest.MonkeyPatch, port: int, rank: int) -> None:
    for key, value in {
        "WORLD_SIZE": "2",
        "RANK": str(rank),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RUN_ID": "test-run",
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCHPACE_DOCTOR_GATHER_TIMEOUT": "5",
    }.items():
        monkeypatch.setenv(key, value)


def test_rank_0_gathers_through_the_agents_store(monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as dt

    import torch.distributed as dist

    agent = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=dt.timedelta(seconds=5))
    _torchrun_env(monkeypatch, agent.port, rank=1)
    assert distributed.gather(RANK1) is None
    _torchrun_env(monkeypatch, agent.port, rank=0)
    out = distributed.gather(RANK0)
    assert out is not None
    assert [r["rank"] for r in out["ranks"]] == [0, 1]
    assert "rank-straggler" in _patterns(out)
    assert agent.num_keys() <= 1  # rank 1's key is gone; only the store's own bookkeeping stays


def test_a_rank_without_a_result_says_so_and_rank_0_does_not_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import datetime as dt

    import torch.distributed as dist

    agent = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=dt.timedelta(seconds=5))
    _torchrun_env(monkeypatch, agent.port, rank=1)
    distributed.publish_missing("the script raised KeyError")
    _torchrun_env(monkeypatch, agent.port, rank=0)
    monkeypatch.setenv("TORCHPACE_DOCTOR_GATHER_TIMEOUT", "120")
    start = time.monotonic()
    out = distributed.gather(RANK0)
    assert time.monotonic() - start < 60  # read the missing note, not waited out the 120 s
    assert out is not None
    assert out["distributed"]["missing"] == [{"rank": 1, "reason": "the script raised KeyError"}]


def test_an_unreachable_store_leaves_rank_0_reporting_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _torchrun_env(monkeypatch, _free_port(), rank=0)
    monkeypatch.setenv("TORCHPACE_DOCTOR_GATHER_TIMEOUT", "1")
    out = distributed.gather(RANK0)
    assert out is not None
    assert [r["rank"] for r in out["ranks"]] == [0]
    (missing,) = out["distributed"]["missing"]
    assert missing["reason"].startswith("could not reach the store at 127.0.0.1:")


def test_without_torchrun_rank_0_reports_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    out = distributed.gather(RANK0)
    assert out is not None
    assert "not started by torchrun" in out["distributed"]["note"]


# -- under torchrun ------------------------------------------------------------------------------
def test_torchrun_two_gloo_ranks_report_once_with_the_planted_straggler(tmp_path: Path) -> None:
    out_json = tmp_path / "doctor.json"
    logs = tmp_path / "logs"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    for key in [k for k in env if k.startswith(("TORCHELASTIC_", "MASTER_", "TORCHPACE_DOCTOR"))]:
        del env[key]  # a test run under torchrun must not leak its run into this one
    proc = subprocess.run(
        [
            sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
            "--standalone", "--log-dir", str(logs), "--redirects", "3",
            "-m", "torchpace", "doctor", "--steps", "4", "--warmup", "1",
            "--json", str(out_json), "--html", str(tmp_path / "doctor.html"), str(SCRIPT),
        ],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out_json.read_text())
    assert [r["rank"] for r in result["ranks"]] == [0, 1]
    assert result["distributed"]["missing"] == []
    assert result["command"][:3] == ["torchpace", "doctor", "--steps"]
    # The page draws a bar per rank (their names are the chart's y labels) and the ranks table.
    page = (tmp_path / "doctor.html").read_text()
    assert "rank 0, rank 1" in page and "Ranks (2 of 2 reported)" in page
    straggler = _patterns(result)["rank-straggler"]
    assert straggler.measured["slowest_rank"] == 1
    (rank0,) = logs.glob("*/attempt_0/0/stdout.log")
    (rank1,) = logs.glob("*/attempt_0/1/stdout.log")
    assert "Findings, ranked by estimated gain" in rank0.read_text()
    assert rank1.read_text() == ""  # rank 1 prints no report
    stderr1 = (rank1.parent / "stderr.log").read_text()
    assert "rank 1 sent its measurement; rank 0 reports" in stderr1
