"""Plan: JSON round trip, validation that names the field, presets, technique ids."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from torchpace.catalog import get as get_technique
from torchpace.catalog import ids
from torchpace.train.plan import PLAN_VERSION, PRESETS, Plan, PlanError, technique_of


def test_every_field_names_a_catalogue_technique() -> None:
    for f in fields(Plan):
        get_technique(technique_of(f.name))  # raises KeyError for an unknown id


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_round_trip_through_json(name: str, tmp_path: Path) -> None:
    plan = Plan.preset(name)
    path = tmp_path / "plan.json"
    plan.save(path)
    data = json.loads(path.read_text())
    assert data["version"] == PLAN_VERSION
    assert set(data["techniques"]) <= set(ids())
    assert Plan.load(path) == plan


def test_safe_preset_preserves_numerics_and_fast_adds_numerics_changing_ones() -> None:
    safe = Plan.preset("safe").techniques()
    assert all(not get_technique(t).changes_numerics for t in safe), safe
    fast = Plan.preset("fast").techniques()
    assert set(safe) < set(fast)
    assert "amp-bf16" in fast


def test_compile_and_attention_count_only_when_they_change_something() -> None:
    assert "torch-compile" in Plan(compile="default").techniques()
    assert "torch-compile" not in Plan().techniques()
    assert "attention-backend" in Plan(attention="math").techniques()
    assert "attention-backend" not in Plan().techniques()


def test_fp16_names_its_own_technique() -> None:
    assert "amp-fp16" in Plan(amp="fp16").techniques()
    assert "amp-bf16" not in Plan(amp="fp16").techniques()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"amp": "fp8"}, "amp"),
        ({"channels_last": "yes"}, "channels_last"),
        ({"accumulate": 0}, "accumulate"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"batch_size": True}, "batch_size"),
        ({"loader_workers": -1}, "loader_workers"),
        ({"checkpoint_modules": [""]}, "checkpoint_modules"),
        ({"compile": "fastest"}, "compile"),
        ({"batching": "token-budget"}, "max_tokens"),
    ],
)
def test_a_bad_value_names_the_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(PlanError, match=field):
        Plan.from_dict({"version": PLAN_VERSION, **body}, source="p.json")


def test_an_unknown_key_is_named_with_the_known_ones() -> None:
    with pytest.raises(PlanError, match=r"unknown field\(s\) amp_dtype; known: amp, "):
        Plan.from_dict({"version": PLAN_VERSION, "amp_dtype": "bf16"})


def test_other_versions_and_non_json_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="version 99 is not supported"):
        Plan.from_dict({"version": 99})
    with pytest.raises(PlanError, match="version None"):
        Plan.from_dict({"amp": "off"})
    bad = tmp_path / "bad.json"
    bad.write_text("{amp: off")
    with pytest.raises(PlanError, match="not JSON"):
        Plan.load(bad)
    with pytest.raises(PlanError, match="cannot read plan"):
        Plan.load(tmp_path / "missing.json")
    with pytest.raises(PlanError, match="unknown preset 'quick'; presets: none, safe, fast"):
        Plan.preset("quick")


def test_replace_validates() -> None:
    assert Plan().replace(batch_size=128).batch_size == 128
    with pytest.raises(PlanError, match="batch_size must be at least 1"):
        Plan().replace(batch_size=0)
    with pytest.raises(PlanError, match="unknown plan field"):
        Plan().replace(batchsize=1)


def test_a_hand_edited_plan_with_absurd_numbers_is_refused() -> None:
    # Issue 17: `accumulate: 10**30` was accepted and the run hung in the accumulation loop.
    with pytest.raises(PlanError, match="accumulate must be at most 65,536; got 1,000,000"):
        Plan.from_dict({"version": 1, "accumulate": 10**30})
    with pytest.raises(PlanError, match="batch_size must be at most"):
        Plan.from_dict({"version": 1, "batch_size": 10**12})
    assert Plan.from_dict({"version": 1, "accumulate": 8}).accumulate == 8


def test_saving_is_atomic_and_keeps_the_old_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "plan.json"
    Plan().save(path)
    before = path.read_text()

    def crash(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", crash)
    with pytest.raises(OSError, match="disk full"):
        Plan.preset("fast").save(path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]  # no temporary file left
