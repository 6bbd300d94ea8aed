"""The tune's search on a script with planted truths, each trial the unmodified script in a fresh
process: a "numerics-preserving" technique that breaks the numerics is rejected, a slower one is
not worth it, a faster one is kept, one that cannot apply says why, and the plan says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpace.train.plan import Plan
from torchpace.tune import search
from torchpace.tune.candidates import Candidate
from torchpace.tune.noise import NOISY
from torchpace.tune.results import ResultsFile
from torchpace.tune.search import Settings, tune

# Measures time or load: `make test` runs it alone, never beside another test (pytest -m serial).
pytestmark = pytest.mark.serial

SCRIPT = str(Path(__file__).parent / "scripts" / "planted.py")
CANDS = [
    Candidate("channels-last", {"channels_last": True}, ("channels-last",)),
    Candidate("fused optimizer", {"fused_optimizer": True}, ("fused-optimizer",)),
    Candidate("set_to_none", {"grad_set_to_none": True}, ("grad-set-to-none",)),
    Candidate("fold conv bias", {"fold_conv_bias": True}, ("conv-bias-before-bn",)),
]


def test_planted_outcomes_on_a_script(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "CONFIRM_PAIRS", 1)  # one confirming pair of the two: 2 trials less
    settings = Settings(
        recipe=SCRIPT,
        budget_s=900.0,
        steps=6,  # with the warm-up, the 8 losses the guard's tail needs
        warmup=2,
        script_args=("--steps", "200"),
        keep_batch_size=True,  # its batch search is test_search's; two trials less here
        cwd=str(tmp_path),
    )
    seen = []

    def after_baseline(base):
        seen.append(base.extra["facts"])
        return CANDS, []

    out = tune(
        settings,
        [],
        [],
        results=ResultsFile(tmp_path / "trials.jsonl"),
        workdir=tmp_path / "work",
        baseline=Plan(grad_set_to_none=False),
        after_baseline=after_baseline,
    )
    verdicts = {r.name: r.verdict for r in out.rows}
    assert verdicts["channels-last"].startswith("rejected"), verdicts  # the guard: not timing
    # The timed verdicts are drawn on a quiet machine; beside other work they are "noisy: not
    # judged" (tune.noise), never the wrong verdict.
    timed = {"fused optimizer": "not worth it", "set_to_none": "kept alone"}
    for name, verdict in timed.items():
        expected = f"{NOISY}: " if name in out.noisy else verdict
        assert verdicts[name].startswith(expected), verdicts
    # Its forward branches on the input, so torch.fx cannot trace it: the trial was the baseline
    # again, and its "speed-up" would have been noise.
    assert verdicts["fold conv bias"].startswith("not applicable"), verdicts
    assert verdicts["batch size"] == search.KEPT_AS_WRITTEN and out.batch_search == []
    assert "torch.fx could not trace" in verdicts["fold conv bias"]
    assert out.plan.grad_set_to_none == ("set_to_none" not in out.noisy)
    assert not out.plan.channels_last and not out.plan.fused_optimizer
    assert seen[0]["optimizers"] == ["SGD"] and seen[0]["has_conv"]
    assert all(t.extra.get("entry") == "script" for t in out.trials if t.status == "ok")
    if out.plan.grad_set_to_none and "confirmation" not in out.noisy:
        # 100 ms of ~150 ms planted: sleeps, which a busy CPU does not stretch
        assert len(out.confirm["ratios"]) == 1 and out.confirm["median"] > 1.5
