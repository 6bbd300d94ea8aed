"""The loader part of the search, with planted trial outcomes: an input-bound recipe gets
workers while they pay; a compute-bound one keeps its loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from torchpace.findings import Applies, DoctorFinding
from torchpace.tune import search
from torchpace.tune.results import ResultsFile
from torchpace.tune.trial import TrialResult, TrialSpec

LOSSES = tuple(2.0 - 0.01 * i for i in range(23))


def planted(loader_rate: float, step_s: dict[int, float]) -> Any:
    """A run_trial stand-in: the loader alone gives ``loader_rate`` samples/s; a training trial
    with ``n`` workers takes ``step_s[n]`` seconds a step (16 samples)."""

    def run_trial(spec: TrialSpec, **kw: Any) -> TrialResult:
        workers = spec.plan.get("loader_workers") or 0
        if spec.loader_only:
            return TrialResult(
                spec.key(), spec.name, "ok", samples_per_s=loader_rate, wall_seconds=1.0
            )
        t = step_s[workers]
        shift = 0.001 * spec.seed  # the second baseline seed: a band of non-zero width
        return TrialResult(
            spec.key(),
            spec.name,
            "ok",
            median_step_s=t,
            q1_step_s=t,
            q3_step_s=t,
            samples_per_s=16 / t,
            batch_size=16,
            losses=tuple(v + shift for v in LOSSES),
            wall_seconds=1.0,
        )

    return run_trial


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trial: Any, cores: int) -> Any:
    monkeypatch.setattr(search, "run_trial", trial)
    monkeypatch.setattr(search, "usable_cores", lambda: cores)
    monkeypatch.setattr(search, "MAX_BATCH_DOUBLINGS", 0, raising=False)
    settings = search.Settings(recipe="planted", budget_s=1000.0)
    results = ResultsFile(tmp_path / "trials.jsonl")
    return search.tune(settings, [], [], results=results, workdir=tmp_path / "w")


def test_an_input_bound_recipe_gets_workers_while_they_pay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The loader alone: 120 samples/s against the step's 160 (0.75x): input-bound. One worker
    # brings the step from 100 to 60 ms, two to 40 ms, four only to 39 ms (under 3%).
    trial = planted(120.0, {0: 0.100, 1: 0.060, 2: 0.040, 4: 0.039})
    out = run(tmp_path, monkeypatch, trial, cores=8)
    names = [r.name for r in out.rows if r.name.startswith("loader")]
    assert names == ["loader alone", "loader, 1 worker", "loader, 2 workers", "loader, 4 workers"]
    assert out.plan.loader == "auto" and out.plan.loader_workers == 2
    assert "caps the speed" in out.rows[[r.name for r in out.rows].index("loader alone")].verdict


def test_a_compute_bound_recipe_keeps_its_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trial = planted(10_000.0, {0: 0.100})  # the loader alone is 60x the step: no worker tried
    out = run(tmp_path, monkeypatch, trial, cores=8)
    assert [r.name for r in out.rows if r.name.startswith("loader")] == ["loader alone"]
    assert out.plan.loader == "keep"


def test_a_script_whose_training_dataset_has_lengths_gets_the_bucketing_candidates() -> None:
    from types import SimpleNamespace

    import torch

    from torchpace.tune.candidates import for_script

    loader = {"dataset": "Seqs", "shuffled": True, "batch_size": 16, "num_workers": 0}
    facts = {"optimizers": ["Adam"], "loaders": [loader | {"length_p90": 200, "length_max": 1024}]}
    cands, no = for_script(SimpleNamespace(extra={"facts": facts}), torch.device("cpu"), [])
    by_name = {c.name: c for c in cands}
    assert by_name["length-bucket"].changes == {"batching": "length-bucket"}
    # A batch of 16 at the 90th-percentile length: 3200 padded tokens (the longest fits).
    assert by_name["token budget"].changes == {"batching": "token-budget", "max_tokens": 3200}
    facts["loaders"] = [loader]
    cands, no = for_script(SimpleNamespace(extra={"facts": facts}), torch.device("cpu"), [])
    assert "length-bucket" not in {c.name for c in cands}
    assert any(n.name == "length-bucket" and "no `lengths`" in n.reason for n in no)


def test_hand_written_attention_is_named_instead_of_no_attention_layers(monkeypatch):
    # Issue 32: on a GPT whose attention is written by hand the tune said "no attention layers".
    from types import SimpleNamespace

    import torch

    from torchpace.tune import candidates
    from torchpace.tune.candidates import for_script

    monkeypatch.setattr(candidates, "bf16_supported", lambda device: True)
    facts = {"optimizers": ["AdamW"], "loaders": []}
    found = [
        DoctorFinding(
            "sdpa-attention",
            "m",
            "f",
            Applies(None, True),
            code="TP307",
            path="/x/model.py",
            line=72,
        )
    ]
    _, no = for_script(SimpleNamespace(extra={"facts": facts}), torch.device("cpu"), found)
    (attention,) = [n for n in no if "attention-backend" in n.techniques]
    assert "written by hand (model.py:72, lint TP307)" in attention.reason
    _, plain = for_script(SimpleNamespace(extra={"facts": facts}), torch.device("cpu"), [])
    (attention,) = [n for n in plain if "attention-backend" in n.techniques]
    assert attention.reason == "no attention layers"


def test_the_loader_trial_starts_from_the_workers_the_doctor_measured_fastest(monkeypatch):
    # io_images: each image waits 2 ms to be read. On 2 cores the trial took one worker (one a
    # core, the main process keeping one): 1.19x; two workers made the script 2.3x faster, as
    # the doctor's measured pace by worker count had said.
    from types import SimpleNamespace

    import torch

    from torchpace.tune.candidates import for_script

    monkeypatch.setattr("torchpace.measure.cores.usable_cores", lambda: 2)
    loader = {"dataset": "SlowImages", "shuffled": True, "batch_size": 32, "num_workers": 0}
    facts = {"optimizers": ["SGD"], "loaders": [loader]}
    base = SimpleNamespace(extra={"facts": facts})
    measured = {"basis": "measured worker pace", "workers": 2, "data_share": 0.6}
    found = [
        DoctorFinding("loader-workers", "m", "f", Applies(None, True), gain=0.5, measured=measured)
    ]

    def workers(findings: list) -> int:
        cands, _ = for_script(base, torch.device("cpu"), findings)
        (c,) = [c for c in cands if c.name == "loader workers"]
        return c.changes["loader_workers"]

    assert workers(found) == 2
    assert workers([]) == 1  # no pace measured: one a core, the main process keeping one
    guessed = [
        DoctorFinding(
            "loader-workers", "m", "f", Applies(None, True), measured=measured | {"basis": "cores"}
        )
    ]
    assert workers(guessed) == 1
