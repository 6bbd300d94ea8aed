"""`torchpace doctor --verify`: the top findings' changes measured on the script itself, and a
finding whose change measured no faster demoted below the rest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchpace.doctor.verify import annotate, candidates_to_verify
from torchpace.tune.table import Row

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def _finding(technique: str, gain: float | None, tune: bool = True) -> dict:  # type: ignore[type-arg]
    return {"technique": technique, "gain": gain, "applies": {"tune": tune, "verb": None}}


def test_the_top_findings_with_a_gain_a_plan_applies_are_tried() -> None:
    findings = [
        _finding("loader-workers", 0.5),
        _finding("avoid-syncs", None),
        _finding("fused-optimizer", 0.1),
        _finding("padding", 0.2, tune=False),
        _finding("loader-workers", 0.05),
        _finding("amp-bf16", 0.3),
        _finding("channels-last", 0.2),
    ]
    assert candidates_to_verify(findings) == ["loader-workers", "fused-optimizer", "amp-bf16"]


def test_a_finding_measured_no_faster_is_demoted_and_says_so() -> None:
    # The VAE's "loader workers, gain 53-62%" made its steps slower on 2 cores.
    findings = [_finding("loader-workers", 0.55), _finding("fused-optimizer", 0.1)]
    rows = [
        Row("baseline", (), 1.0, None, None, 1.0, None, 0.0, "kept"),
        Row("loader workers", ("loader-workers",), 0.85, 0.8, 0.9, None, None, 0.0, "not worth it"),
        Row(
            "fused optimizer", ("fused-optimizer",), 1.09, 1.05, 1.12, None, None, 0.0, "kept alone"
        ),
        Row("+ fused optimizer", ("fused-optimizer",), None, None, None, 1.09, None, 0.0, "kept"),
    ]
    annotate(findings, rows, ["loader-workers", "fused-optimizer"])
    assert [f["technique"] for f in findings] == ["fused-optimizer", "loader-workers"]
    fused, workers = findings
    assert "demoted" not in fused and fused["verified"]["speedup"] == 1.09
    assert abs(fused["verified"]["estimated_speedup"] - 1 / 0.9) < 1e-9
    assert workers["demoted"] == "--verify measured 0.85x with the change alone"
    assert abs(workers["verified"]["estimated_speedup"] - 1 / 0.45) < 1e-9


def test_a_rejected_change_is_demoted_with_the_guards_reason() -> None:
    findings = [_finding("amp-bf16", 0.3)]
    rows = [
        Row("bf16", ("amp-bf16",), 1.8, 1.7, 1.9, None, None, 0.2, "rejected: loss 2.1 is above")
    ]
    annotate(findings, rows, ["amp-bf16"])
    assert findings[0]["demoted"] == "--verify: rejected: loss 2.1 is above"


def test_verify_demotes_loader_workers_that_cannot_hide_a_serial_input(tmp_path) -> None:
    # A planted truth on any core count: the samples are read under one lock the workers share.
    import os

    out = tmp_path / "doctor.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchpace",
            "doctor",
            "--steps",
            "20",
            "--warmup",
            "3",
            "--verify",
            "--verify-budget",
            "3m",
            "--json",
            str(out),
            str(SCRIPTS / "serial_data.py"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "TORCHPACE_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["verify"]["tried"] == ["loader-workers"]
    (workers,) = [f for f in result["findings"] if f["technique"] == "loader-workers"]
    verified = workers["verified"]
    assert verified["estimated_gain"] > 0.5  # the estimate: most of the step waits for data
    # One sample at a time, whatever the workers: far below the promise (about 1.15x measured
    # against 8x and more promised on the 2-core EPYC).
    assert verified["estimated_speedup"] > 4 and verified["speedup"] < 1.5, verified
    if verified["speedup"] < 1.05:
        assert workers["demoted"].startswith("--verify") and workers["gain"] is None
    else:  # ranked by what was measured, not by the estimate
        assert "demoted" not in workers
        assert workers["gain"] == pytest.approx(1 - 1 / verified["speedup"])
    ranked = [f["technique"] for f in result["findings"]]
    assert all("demoted" not in f for f in result["findings"][: ranked.index("loader-workers")])
    from jsonschema import Draft202012Validator

    schema = json.loads((Path(__file__).parents[2] / "docs/doctor-result.schema.json").read_text())
    assert [e.message for e in Draft202012Validator(schema).iter_errors(result)] == []
