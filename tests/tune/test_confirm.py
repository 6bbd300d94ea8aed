"""The paired confirmation has the last word: a plan slower than the baseline in every paired
round is withdrawn, with the reason in the table (as nanoGPT's compile did: 10x in its own
trial, 0.78x paired)."""

from __future__ import annotations

from pathlib import Path

from torchpace.tune import search
from torchpace.tune.candidates import Candidate
from torchpace.tune.results import ResultsFile
from torchpace.tune.trial import TrialResult, TrialSpec

LOSSES = tuple(2.0 - 0.01 * i for i in range(12))


def _fake(step_s: dict[str, float]):
    def run_trial(spec: TrialSpec, *, timeout_s: float, workdir: Path) -> TrialResult:
        s = step_s.get(spec.name.split(" ")[0], step_s["default"])
        return TrialResult(
            spec.key(),
            spec.name,
            "ok",
            step_seconds=(s,) * 10,
            median_step_s=s,
            q1_step_s=s,
            q3_step_s=s,
            samples_per_step=16,
            samples_per_s=16 / s,
            losses=LOSSES,
            applied=spec.techniques,
            wall_seconds=1.0,
        )

    return run_trial


def _tune(tmp_path: Path, monkeypatch, confirm_plan_s: float) -> search.Outcome:
    # "fused" alone: 0.5 s against 1.0 s; the confirmation's plan trials: confirm_plan_s.
    original = search.confirm_trial
    monkeypatch.setattr(
        search,
        "confirm_trial",
        lambda side, i: f"confirm{'-plan' if side == 'plan' else ''} {original(side, i)}",
    )
    step_s = {"default": 1.0, "fused": 0.5, "confirm": 1.0, "confirm-plan": confirm_plan_s}
    monkeypatch.setattr(search, "run_trial", _fake(step_s))
    cand = Candidate("fused", {"fused_optimizer": True}, ("fused-optimizer",))
    settings = search.Settings(recipe="fake", budget_s=1000.0, steps=10, warmup=2)
    return search.tune(
        settings, [cand], [], results=ResultsFile(tmp_path / "t.jsonl"), workdir=tmp_path
    )


def test_a_plan_slower_in_every_paired_round_is_withdrawn(tmp_path, monkeypatch):
    out = _tune(tmp_path, monkeypatch, confirm_plan_s=1.3)
    assert out.plan == search.Plan()
    assert out.rows[-1].name == "confirmation"
    assert out.rows[-1].verdict.startswith("plan withdrawn: 0.77×, 0.77×")
    assert out.confirm["withdrawn"]["fused_optimizer"] is True


def test_a_plan_the_pairs_confirm_is_kept(tmp_path, monkeypatch):
    out = _tune(tmp_path, monkeypatch, confirm_plan_s=0.5)
    assert out.plan.fused_optimizer
    assert out.confirm["median"] == 2.0 and "withdrawn" not in out.confirm
