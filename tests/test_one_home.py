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


_TRAINING_SCRIPT = b"""import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(data, batch_size=8, shuffle=True)
for x, y in loader:
    loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("cores", [1, 2, 3, 8, 32])
def test_the_worker_rule_is_the_catalogues_for_the_verb_the_edit_the_tune_and_the_bench(
    monkeypatch: pytest.MonkeyPatch, cores: int
) -> None:
    # issue 31: the verb and apply's edit took four workers at most on CUDA, the bench at least
    # one, and the script tune tried one a core (31 on 32 cores)
    from types import SimpleNamespace

    from torchpace.bench import configs
    from torchpace.script import edits
    from torchpace.speedups.loading import loader_settings

    monkeypatch.setattr(edits, "usable_cores", lambda: cores)
    monkeypatch.setattr(configs, "usable_cores", lambda: cores)
    monkeypatch.setattr(configs, "bf16_supported", lambda device: True)
    monkeypatch.setattr("torchpace.measure.cores.usable_cores", lambda: cores)
    monkeypatch.setattr(candidates, "bf16_supported", lambda device: True)
    for device in ("cpu", "cuda"):
        want = catalog.loader_workers(device, cores)
        assert loader_settings(device, cores=cores).num_workers == want
        assert configs.tuned("cnn", torch.device(device)).num_workers == want
        plan = Plan(loader="auto")
        found, _ = edits.plan_edits(_TRAINING_SCRIPT, "train.py", plan, device=device)
        titles = [f.message for f in found if f.technique == "loader-workers"]
        cuda = device == "cuda"
        expected = f"num_workers={want}, pin_memory={cuda}, persistent_workers={want > 0}"
        assert titles == ([expected] if want or cuda else [])
        base = SimpleNamespace(extra={"facts": {"loaders": [{"batch_size": 8, "shuffled": True}]}})
        cands, _ = candidates.for_script(base, torch.device(device), [])
        (workers,) = [c for c in cands if c.techniques == ("loader-workers",)]
        assert workers.changes["loader_workers"] == catalog.trial_workers(cores)
    assert catalog.trial_workers(cores) == max(1, catalog.loader_workers("cuda", cores))
    assert catalog.loader_workers("cuda", cores) == max(0, min(4, cores - 1))
    assert catalog.loader_workers("cuda:1", cores) == catalog.loader_workers("cuda", cores)
    with pytest.raises(ValueError, match="cores must be >= 1"):
        catalog.loader_workers("cuda", 0)
