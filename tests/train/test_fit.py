"""fit() and prepare(): the loop's contract, and loss trajectories against the baseline."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader
from train_helpers import NoisyPoints, cnn_setup, mlp_loss, mlp_setup

from torchpace.measure.env import cpu_supports_bf16
from torchpace.speedups.loading import DevicePrefetcher
from torchpace.train import FitResult, Plan, fit, prepare
from torchpace.workloads import cnn

SRC = str(Path(__file__).resolve().parents[2] / "src" / "torchpace")


def cnn_losses(plan: Plan, steps: int = 24, width: int = 8) -> FitResult:
    model, opt, loader = cnn_setup(width=width)
    return fit(model, opt, loader, cnn.loss, plan=plan, steps=steps, progress=False)


# -- trajectories -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def baseline() -> FitResult:
    return cnn_losses(Plan())


# 24 steps of Adam from the same seed and batches. Numerics-preserving techniques change only the
# order of float32 sums (another memory layout, a fused kernel, a bias folded into BatchNorm's
# running mean), so the trajectories agree to rounding; 2e-3 relative leaves room for that
# rounding to grow through 24 steps of training (observed max: channels_last 2.3e-4, safe
# preset 9.5e-5, fused 6.7e-7, folded bias 1.1e-7, prefetch on CPU 0).
PRESERVING = 2e-3


@pytest.mark.parametrize(
    "plan",
    [
        Plan(channels_last=True),
        Plan(fold_conv_bias=True),
        Plan(fused_optimizer=True),
        Plan(prefetch=True),
        Plan.preset("safe"),
    ],
    ids=["channels-last", "fold-conv-bias", "fused-optimizer", "prefetch", "safe-preset"],
)
def test_numerics_preserving_plans_reproduce_the_baseline(plan: Plan, baseline: FitResult) -> None:
    result = cnn_losses(plan)
    assert len(result.losses) == len(baseline.losses) == 24
    torch.testing.assert_close(
        torch.tensor(result.losses), torch.tensor(baseline.losses), rtol=PRESERVING, atol=0
    )


def test_channels_last_reproduces_the_baseline_on_a_model_it_converts() -> None:
    # Width 8's shortcut is one channels_last leaves alone on a CPU (oneDNN#6035): the case above
    # then compares the baseline with itself. Width 16 is converted.
    base = cnn_losses(Plan(), steps=12, width=16)
    result = cnn_losses(Plan(channels_last=True), steps=12, width=16)
    assert "channels-last" in [a.technique for a in result.applied if a.changed]
    torch.testing.assert_close(
        torch.tensor(result.losses), torch.tensor(base.losses), rtol=PRESERVING, atol=0
    )


@pytest.mark.skipif(not cpu_supports_bf16(), reason="this CPU has no native bf16")
def test_bf16_stays_within_a_band_of_the_baseline(baseline: FitResult) -> None:
    result = cnn_losses(Plan(amp="bf16"))
    # bf16 keeps 8 bits of mantissa, so step losses drift from float32's. The band: the mean of
    # the last 8 steps within 6% of the baseline's, the seed-to-seed spread of this set-up
    # (float32, seeds 0-3: 2.18-2.29, 5.2% of their mean) plus a margin; observed 0.01%.
    tail = sum(result.losses[-8:]) / 8
    base_tail = sum(baseline.losses[-8:]) / 8
    assert abs(tail - base_tail) / base_tail < 0.06
    assert tail < result.losses[0]
    assert result.losses != baseline.losses  # it really ran in bf16


# -- the loop's contract ----------------------------------------------------------------------
def test_fit_reports_steps_samples_and_every_step_loss() -> None:
    model, opt, loader = mlp_setup()
    result = fit(model, opt, loader, mlp_loss, plan=Plan(log_every=4), steps=10, progress=False)
    assert result.steps == 10 and len(result.losses) == 10
    assert result.samples == 80 and result.samples_per_s > 0
    assert all(isinstance(v, float) for v in result.losses)


SYNC_METHODS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__")


def test_no_host_reads_outside_the_log_cadence(monkeypatch: pytest.MonkeyPatch) -> None:
    """Count host reads of tensors made by torchpace's own code, per optimizer step."""
    step = {"n": 0}
    reads: list[tuple[int, str]] = []
    for name in SYNC_METHODS:
        original = getattr(torch.Tensor, name)

        def counted(
            self: torch.Tensor, *a: Any, _o: Any = original, _n: str = name, **k: Any
        ) -> Any:
            caller = inspect.stack(context=0)[1].filename
            if caller.startswith(SRC):
                reads.append((step["n"], _n))
            return _o(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, counted)
    model, opt, loader = mlp_setup()
    opt.register_step_post_hook(lambda *a: step.update(n=step["n"] + 1))
    fit(model, opt, loader, mlp_loss, plan=Plan(log_every=5), steps=15, progress=False)
    # Reads happen after the 5th, 10th and 15th optimizer steps only: one per log window.
    assert reads == [(5, "tolist"), (10, "tolist"), (15, "tolist")]


def test_gradient_accumulation_matches_the_larger_batch() -> None:
    # No dropout and no BatchNorm: two micro-batches of 8 must give the gradients of one of 16.
    def setup(batch: int) -> tuple[nn.Module, torch.optim.Optimizer, DataLoader[Any]]:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
        data = NoisyPoints()
        data.__getitem__ = None  # type: ignore[assignment,method-assign]
        return (
            model,
            torch.optim.SGD(model.parameters(), lr=0.1),
            DataLoader(torch.utils.data.TensorDataset(data.x, data.y), batch_size=batch),
        )

    big = fit(*setup(16), mlp_loss, steps=4, progress=False)
    small = fit(*setup(8), mlp_loss, plan=Plan(accumulate=2), steps=4, progress=False)
    # 1e-6: the same float32 gradient summed in two halves.
    torch.testing.assert_close(
        torch.tensor(small.losses), torch.tensor(big.losses), rtol=1e-6, atol=0
    )
    assert small.samples == big.samples == 64


def test_lr_is_scaled_when_the_batch_differs_from_the_recipe() -> None:
    model, opt, loader = mlp_setup(batch_size=16)
    fit(
        model,
        opt,
        loader,
        mlp_loss,
        plan=Plan(lr_scaling="sqrt"),
        steps=1,
        base_batch_size=4,
        progress=False,
    )
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-2 * 2)  # sqrt(16 / 4)


def test_onecycle_schedule_warms_up_then_anneals() -> None:
    model, opt, loader = mlp_setup()
    seen: list[float] = []
    opt.register_step_pre_hook(lambda o, *a: seen.append(o.param_groups[0]["lr"]))
    fit(model, opt, loader, mlp_loss, plan=Plan(schedule="onecycle"), steps=20, progress=False)
    peak = max(seen)
    assert seen[0] < peak / 10 and seen[-1] < peak / 100
    assert peak == pytest.approx(1e-2, rel=0.05)


def test_evaluation_runs_in_inference_mode_and_comes_back_to_training() -> None:
    model, opt, loader = mlp_setup()
    modes: list[tuple[bool, bool]] = []

    def loss_fn(m: nn.Module, batch: Any) -> torch.Tensor:
        modes.append((torch.is_inference_mode_enabled(), m.training))
        return mlp_loss(m, batch)

    val = DataLoader(NoisyPoints(16, seed=1), batch_size=8)
    result = fit(
        model, opt, loader, loss_fn, steps=6, eval_loader=val, eval_every=3, progress=False
    )
    assert [s for s, _ in result.eval_losses] == [3, 6]
    assert modes.count((True, False)) == 4  # two evaluations of two batches
    assert modes[-1] == (True, False) and model.training
    assert all(t for i, t in modes if not i)


def test_a_non_finite_loss_stops_with_the_step() -> None:
    model, opt, loader = mlp_setup()

    def exploding(m: nn.Module, batch: Any) -> torch.Tensor:
        return mlp_loss(m, batch) * float("inf")

    with pytest.raises(FloatingPointError, match=r"loss is (inf|nan) at step 1"):
        fit(model, opt, loader, exploding, plan=Plan(log_every=2), steps=4, progress=False)


def test_fit_arguments_are_checked() -> None:
    model, opt, loader = mlp_setup()
    with pytest.raises(ValueError, match="exactly one of steps= or epochs="):
        fit(model, opt, loader, mlp_loss, steps=1, epochs=1)
    with pytest.raises(ValueError, match="go together"):
        fit(model, opt, loader, mlp_loss, steps=1, checkpoint_every=1)


def test_epochs_count_optimizer_steps_over_the_loader() -> None:
    model, opt, loader = mlp_setup()
    assert fit(model, opt, loader, mlp_loss, epochs=2, progress=False).steps == 16


# -- prepare --------------------------------------------------------------------------------------
def test_prepare_returns_the_objects_in_order_and_once() -> None:
    model, opt, loader = cnn_setup()
    applied: list[Any] = []
    m2, o2, l2 = prepare(model, opt, loader, plan=Plan.preset("safe"), applied=applied)
    assert m2 is model and o2 is opt
    assert isinstance(l2, DevicePrefetcher)
    folded = next(a for a in applied if a.technique == "conv-bias-before-bn")
    assert folded.changed
    in_opt = {id(p) for g in opt.param_groups for p in g["params"]}
    assert in_opt == {id(p) for p in model.parameters()}  # folded biases left the optimizer
    with pytest.raises(ValueError, match="already prepared"):
        prepare(model, opt, loader, plan=Plan())
    with pytest.raises(TypeError, match="plan must be a torchpace Plan"):
        prepare(nn.Linear(2, 2), opt, plan={"amp": "bf16"})  # type: ignore[arg-type]


def test_prepare_length_bucketing_needs_lengths() -> None:
    model, opt, loader = mlp_setup()
    with pytest.raises(ValueError, match="`lengths` attribute"):
        prepare(model, opt, loader, plan=Plan(batching="length-bucket"))


# -- compile (slow: a cold compile takes ~14 s here) ------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "plan", [Plan(compile="default"), Plan.preset("fast")], ids=["compile", "fast-preset"]
)
def test_compiled_plans_stay_within_the_band(plan: Plan, baseline: FitResult) -> None:
    # Compiled kernels fuse and reorder float32 work; the fast preset adds bf16. The band is
    # the bf16 test's: within 6% of the baseline's last-8-step mean (seed spread 5.2%).
    result = cnn_losses(plan)
    tail, base_tail = sum(result.losses[-8:]) / 8, sum(baseline.losses[-8:]) / 8
    assert abs(tail - base_tail) / base_tail < 0.06
    assert tail < result.losses[0]
