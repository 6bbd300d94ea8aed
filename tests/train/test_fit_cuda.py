"""fit() on a GPU: fp16 with a GradScaler, bf16, and batches delivered on the device.

These run only where CUDA is available; on this project's CPU machines they skip with a reason.
"""

from __future__ import annotations

import pytest
import torch
from train_helpers import cnn_setup

from conftest import requires_cuda
from torchpace.train import FitResult, Plan, fit, prepare
from torchpace.workloads import cnn

pytestmark = requires_cuda


def run(plan: Plan, steps: int = 24) -> FitResult:
    model, opt, loader = cnn_setup()
    return fit(model, opt, loader, cnn.loss, plan=plan, steps=steps, device="cuda", progress=False)


@pytest.mark.parametrize("amp", ["fp16", "bf16"])
def test_reduced_precision_on_cuda_stays_within_the_band(amp: str) -> None:
    if amp == "bf16" and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    base = run(Plan())
    result = run(Plan(amp=amp))
    # The band of the CPU bf16 test (test_fit.py): the last-8-step mean within 6% of float32's,
    # the seed-to-seed spread of this set-up (5.2%) plus a margin.
    tail, base_tail = sum(result.losses[-8:]) / 8, sum(base.losses[-8:]) / 8
    assert abs(tail - base_tail) / base_tail < 0.06
    assert any(a.technique == f"amp-{amp}" and a.changed for a in result.applied)


def test_fp16_uses_a_grad_scaler_that_skips_overflowing_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    original = torch.amp.GradScaler.step

    def step(self: torch.amp.GradScaler, optimizer: torch.optim.Optimizer, *a: object) -> object:
        calls.append("step")
        return original(self, optimizer, *a)

    monkeypatch.setattr(torch.amp.GradScaler, "step", step)
    run(Plan(amp="fp16"), steps=3)
    assert calls == ["step"] * 3


def test_prepare_moves_the_model_and_prefetches_batches_to_the_gpu() -> None:
    model, opt, loader = cnn_setup()
    model, opt, loader = prepare(
        model, opt, loader, plan=Plan(prefetch=True, channels_last=True), device="cuda"
    )
    assert next(model.parameters()).is_cuda
    x, y = next(iter(loader))
    assert x.is_cuda and y.is_cuda
    assert x.is_contiguous(memory_format=torch.channels_last)
