"""Facts about a technique that two verbs once declared apart, each read from its one home now
(issue 31's disagreements; the fused-kernel table has its own file, test_fused_kernels_one_home,
and the LR-scaling rule tests/train/test_lr.py)."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

from torchpace import catalog
from torchpace.catalog import AMP_CHOICES
from torchpace.speedups.precision import choose_precision
from torchpace.train.plan import PLAN_VERSION, Plan, PlanError
from torchpace.tune import candidates
from torchpace.tune.candidates import PRIORITY, Candidate, from_facts, priority


def test_the_amp_choices_are_the_catalogues_for_the_plan_and_the_verb() -> None:
    (amp,) = [f for f in dataclasses.fields(Plan) if f.name == "amp"]
    assert amp.metadata["choices"] is AMP_CHOICES
    for choice in AMP_CHOICES:  # every choice the plan accepts, the verb accepts
        assert Plan.from_dict({"version": PLAN_VERSION, "amp": choice}).amp == choice
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # bf16 and fp16 fall back to float32 on this CPU
            choose_precision("cpu", choice)
    with pytest.raises(PlanError, match="amp"):
        Plan.from_dict({"version": PLAN_VERSION, "amp": "fp8"})
    with pytest.raises(ValueError, match="amp must be one of off, auto, bf16, fp16"):
        choose_precision("cpu", "fp8")


def test_the_tunes_priority_is_keyed_by_catalogue_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(candidates, "bf16_supported", lambda device: True)  # a GPU with bf16
    known = set(catalog.ids())
    assert set(PRIORITY) <= known and len(set(PRIORITY)) == len(PRIORITY)
    facts = {"has_conv": True, "has_conv_bias": True, "has_attention": True}
    cands, _ = from_facts(
        {**facts, "optimizers": ["AdamW"]}, torch.device("cuda"), lengths=(20, 90), batch_size=8
    )
    for c in cands:  # every candidate the tune offers has a place, by its techniques
        assert set(c.techniques) <= known and priority(c) < len(PRIORITY), c
    assert [priority(c) for c in cands] == sorted(priority(c) for c in cands)
    names = [c.name for c in cands]
    # bf16 with the math backend after bf16 alone (its last technique), compile last, and the
    # two length-bucketing candidates in the order offered
    assert names.index("bf16") < names.index("bf16 + math attention") < names.index("compile")
    assert names[:2] == ["length-bucket", "token budget"] and names[-1] == "compile"
    assert priority(Candidate("loader workers", {}, ("loader-workers",))) == len(PRIORITY)


def test_the_lr_scaling_default_is_one_rule_for_the_plan_the_tune_and_its_option() -> None:
    # issue 31: the plan said "linear", the tune "sqrt"
    from torchpace.cli import build_parser
    from torchpace.train import lr
    from torchpace.tune.search import Settings

    (field,) = [f for f in dataclasses.fields(Plan) if f.name == "lr_scaling"]
    (setting,) = [f for f in dataclasses.fields(Settings) if f.name == "lr_scaling"]
    assert field.default == setting.default == lr.DEFAULT
    assert field.metadata["choices"] is lr.RULES
    assert build_parser().parse_args(["tune", "x.py"]).lr_scaling == lr.DEFAULT
