"""The technique registry (torchpace.techniques) against the code that implements each facet:
every catalogue technique is declared once, and each facet it claims exists where that facet
lives, while each it declines (``No``, with the reason) does not. A failure names the technique
and the facet to fix, in the registry or in the code (docs/contributing.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import torchpace.speedups
from torchpace import catalog, techniques
from torchpace.doctor.patterns import PATTERNS
from torchpace.lint.rules import RULES
from torchpace.techniques import Fit, Hand, No, Planned, Search, Trial, Via
from torchpace.train.plan import Plan, fields_of

SRC = Path(__file__).resolve().parents[1] / "src" / "torchpace"
# Where each entry point reads the plan: prepare()/fit(), the interposer, apply's edits.
PREPARE = ("train/apply_plan.py", "train/loop.py")
SCRIPT = ("script/interpose.py", "script/loaders.py")
EDIT = ("script/edits.py",)
TUNE_SEARCHES = ("tune/candidates.py", "tune/batch.py", "tune/search.py")


def _trees(files: tuple[str, ...]) -> list[ast.AST]:
    return [ast.parse((SRC / f).read_text(encoding="utf-8")) for f in files]


def _plan_reads(files: tuple[str, ...]) -> set[str]:
    """The plan fields these files read as ``plan.<field>`` or ``self.plan.<field>``."""
    out = set()
    for tree in _trees(files):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                owner = node.value
                name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
                if name == "plan":
                    out.add(node.attr)
    return out


def _constants(files: tuple[str, ...]) -> set[str]:
    return {
        n.value
        for tree in _trees(files)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def _doctor_techniques() -> set[str]:
    """The techniques the doctor's findings name: its patterns', and every ``technique=...`` or
    ``technique = ...`` (alone or unpacked) given a catalogue id in doctor/."""
    ids = set(catalog.ids())
    out = {p.technique for p in PATTERNS}
    for path in (SRC / "doctor").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            values: list[ast.expr] = []
            if isinstance(node, ast.keyword) and node.arg == "technique":
                values = [node.value]
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
                if isinstance(target, ast.Name) and target.id == "technique":
                    values = [value]
                elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                    values = [
                        v
                        for t, v in zip(target.elts, value.elts, strict=False)
                        if isinstance(t, ast.Name) and t.id == "technique"
                    ]
            for v in values:
                for c in ast.walk(v):
                    if isinstance(c, ast.Constant) and c.value in ids:
                        out.add(c.value)
    return out


def test_every_catalogue_technique_is_declared_once_in_catalogue_order() -> None:
    assert [f.id for f in techniques.REGISTRY] == list(catalog.ids())


@pytest.mark.parametrize("facets", techniques.REGISTRY, ids=lambda f: f.id)
def test_each_facet_is_where_the_registry_says(facets: techniques.Facets) -> None:
    tid = facets.id
    if isinstance(facets.verb, str):
        assert callable(getattr(torchpace.speedups, facets.verb, None)), (
            f"{tid}: verb {facets.verb!r} is not in torchpace.speedups"
        )
    has_rule = any(r.technique == tid for r in RULES)
    assert (facets.lint is True) == has_rule, f"{tid}: lint={facets.lint} but rule: {has_rule}"
    in_doctor = tid in _doctor_techniques()
    assert (facets.doctor is True) == in_doctor, f"{tid}: doctor={facets.doctor}, {in_doctor}"

    own = fields_of(tid)
    plan = facets.plan
    if isinstance(plan, (No, Via)):
        assert not own, f"{tid}: plan={plan} but Plan has fields {own}"
    if isinstance(plan, Via):
        assert isinstance(techniques.get(plan.technique).plan, Planned), tid
    if isinstance(plan, Fit):
        assert not set(own) & _plan_reads(SCRIPT + EDIT), f"{tid}: fit() only, read by a script"
        assert set(own) <= _plan_reads(PREPARE), tid
    if not isinstance(plan, Planned):
        return
    assert own, f"{tid}: Planned, but no Plan field names it"
    assert set(own) & _plan_reads(PREPARE), f"{tid}: prepare()/fit() read none of {own}"
    for where, facet in ((SCRIPT, plan.script), (EDIT, plan.edit)):
        read = bool(set(own) & _plan_reads(where))
        assert read == (not isinstance(facet, No)), f"{tid}: {facet} but {where} read: {read}"
    if isinstance(plan.tune, Search):
        assert tid in _constants(TUNE_SEARCHES), f"{tid}: no search in the tune names it"
    elif isinstance(plan.tune, No):
        assert tid not in _constants(TUNE_SEARCHES), f"{tid}: tune=No, but the tune names it"


def test_the_tune_offers_a_candidate_for_each_trial_and_in_their_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchpace.tune import candidates

    monkeypatch.setattr(candidates, "bf16_supported", lambda device: True)  # a GPU with bf16
    facts = {"has_conv": True, "has_conv_bias": True, "has_attention": True}
    cands, _ = candidates.from_facts(
        {**facts, "optimizers": ["AdamW"]}, torch.device("cuda"), lengths=(20, 90), batch_size=8
    )
    offered = {t for c in cands for t in c.techniques}
    trials = {f.id for f in techniques.REGISTRY if isinstance(getattr(f.plan, "tune", None), Trial)}
    assert offered == trials
    assert techniques.trial_order() == candidates.PRIORITY
    orders = [f.plan.tune.order for f in techniques.REGISTRY if f.id in trials]  # type: ignore[union-attr]
    assert len(set(orders)) == len(orders), "two trials share an order"


def test_an_edit_by_hand_says_why() -> None:
    for f in techniques.REGISTRY:
        if isinstance(f.plan, Planned) and isinstance(f.plan.edit, Hand):
            assert f.plan.edit.why.strip(), f.id


def test_a_facet_declined_without_a_reason_is_refused() -> None:
    with pytest.raises(ValueError, match="say why"):
        No(" ")


def test_the_interposer_skips_each_field_it_cannot_apply_with_the_registrys_reason() -> None:
    # prefetch=True and preallocate=True were read as "off" (True == 1 in the old table's
    # tuple of off values), so `run --plan` blamed the script for never reaching them
    from torchpace.script.interpose import Interposer

    plan = Plan.as_written().replace(
        prefetch=True,
        preallocate=True,
        checkpoint_modules=("Linear",),
        accumulate=2,
        schedule="onecycle",
    )
    ip = Interposer(plan, device=torch.device("cpu"))
    ip.install()
    ip.uninstall()
    assert ip.not_applied() == techniques.not_for_scripts()
    ip = Interposer(Plan.as_written(), device=torch.device("cpu"))
    ip.install()
    ip.uninstall()
    assert not set(ip.not_applied()) & set(techniques.not_for_scripts())


def test_the_doctor_names_the_registrys_verb_and_tune() -> None:
    from torchpace.doctor.merge import applies
    from torchpace.findings import Applies

    assert applies("attention-backend") == Applies("torchpace.speedups.use_attention_backend", True)
    assert applies("avoid-syncs") == Applies(None, False)  # fit() only
    assert applies("async-prefetch").tune is False  # no script trial
    assert applies(None) == Applies(None, False)
