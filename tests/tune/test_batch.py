"""The batch-size search with planted trial outcomes: doubling, bisection after an OOM, the
safety margin, and the convergence guard at equal samples."""

from __future__ import annotations

import math

import pytest

from torchpace.train.plan import Plan
from torchpace.tune.batch import SAFETY_MARGIN, search_batch
from torchpace.tune.convergence import Band
from torchpace.tune.trial import TrialResult

BASE_LOSSES = tuple(2.0 - 0.01 * i for i in range(20))
BAND = Band.from_baselines([BASE_LOSSES, tuple(v + 0.02 for v in BASE_LOSSES)])
BASE = TrialResult(
    "b",
    "baseline",
    "ok",
    batch_size=16,
    samples_per_s=100.0,
    losses=BASE_LOSSES,
    median_step_s=0.16,
)


def fake(fits_up_to: int, *, peak_per_sample: int = 0, bad_loss_from: int = 10**9):
    """A trial runner: OOM above ``fits_up_to``; samples/s grows 40% per doubling; the loss
    matches the baseline's per sample unless the batch reaches ``bad_loss_from``."""
    tried: list[int] = []

    def run(name: str, plan: Plan, steps: int) -> TrialResult:
        size = plan.batch_size
        assert size is not None and plan.lr_scaling == "sqrt"
        tried.append(size)
        if size > fits_up_to:
            return TrialResult("k", name, "oom", reason=f"{size} does not fit")
        per_step = size // 16
        losses = tuple(BASE_LOSSES[min(i * per_step, 19)] for i in range(steps + 3))
        if size >= bad_loss_from:
            losses = tuple(v + 1.0 for v in losses)
        speed = 100.0 * 1.4 ** (size / 16 - 1) if size >= 16 else 100.0
        return TrialResult(
            "k",
            name,
            "ok",
            batch_size=size,
            samples_per_s=speed,
            losses=losses,
            peak_memory_bytes=peak_per_sample * size,
        )

    return run, tried


def search(run, memory_budget=None, **kw):  # type: ignore[no-untyped-def]
    return search_batch(
        run,
        lambda: True,
        plan=Plan(),
        best=BASE,
        base=BASE,
        band=BAND,
        steps=10,
        lr_scaling="sqrt",
        memory_budget=memory_budget,
        **kw,
    )


def test_doubling_stops_at_the_cap_when_everything_fits() -> None:
    run, tried = fake(fits_up_to=10**6)
    found = search(run)
    assert tried == [32, 64, 128]
    assert found.plan.batch_size == 128


def test_an_oom_is_bisected_to_the_largest_size_that_fits() -> None:
    run, tried = fake(fits_up_to=48)
    found = search(run)
    # 32 fits, 64 does not; two halvings of the gap: 48 fits, 56 does not.
    assert tried == [32, 64, 48, 56]
    assert found.plan.batch_size == 48
    assert [t["batch_size"] for t in found.tried if t.get("fits") is False] == [64, 56]
    assert found.rows[1].verdict.startswith("rejected: oom: 64 does not fit")


def test_the_safety_margin_treats_a_near_budget_peak_as_not_fitting() -> None:
    # 1000 B per sample, a 50,000 B budget: 32 samples use 64% of it, 64 use 128% (over), 48
    # use 96%, inside the budget but past the 90% margin, so not fitting; 40 use 80%: kept.
    run, tried = fake(fits_up_to=10**6, peak_per_sample=1000)
    found = search(run, memory_budget=50_000)
    assert 48 * 1000 > SAFETY_MARGIN * 50_000 > 40 * 1000
    assert tried == [32, 64, 48, 40]
    assert found.plan.batch_size == 40


def test_a_size_that_breaks_convergence_is_rejected_and_stops_the_search() -> None:
    run, tried = fake(fits_up_to=10**6, bad_loss_from=64)
    found = search(run)
    assert tried == [32, 64]
    assert found.plan.batch_size == 32
    assert found.rows[-1].verdict.startswith("rejected: loss ")


def test_a_size_is_judged_against_the_baselines_next_to_it_not_a_best_measured_earlier() -> None:
    # Planted: the machine ran 1.3x slower from the best's trial on. Batch 32 gives 1.2x the
    # samples/s of the script next to it in time, but only 0.92x of the best's figure measured
    # before the slow-down: against its neighbours it is kept; against the old best it was not.
    slow = 1.3

    def run(name: str, plan: Plan, steps: int) -> TrialResult:
        size = plan.batch_size
        assert size is not None
        per_step = size // 16
        losses = tuple(BASE_LOSSES[min(i * per_step, 19)] for i in range(steps + 3))
        speed = 100.0 * 1.2 ** math.log2(size / 16) / slow  # 1.2x a doubling, slowed
        return TrialResult("k", name, "ok", batch_size=size, samples_per_s=speed, losses=losses)

    judged: list[str] = []

    def judge(r: TrialResult, line: float, floor: float) -> tuple[float | None, list[str]]:
        judged.append(r.name)  # the baselines next to it run at 100 / slow samples/s
        assert r.samples_per_s is not None
        return r.samples_per_s / (100.0 / slow), []

    found = search(run, judge=judge, best_gain=1.0)
    assert found.tried[0]["gain"] == pytest.approx(1.2)
    assert found.plan.batch_size == 128 and found.best_gain == pytest.approx(1.2**3)
    assert judged == ["batch 32", "batch 64", "batch 128"]
    # without the pairing, the same trials against the best measured before the slow-down
    direct = search(run)
    assert direct.plan.batch_size is None and direct.tried[0]["gain"] == pytest.approx(1.2 / slow)
