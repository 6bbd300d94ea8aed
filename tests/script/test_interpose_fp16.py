"""An fp16 plan on a script, exercised on the CPU (the GradScaler wiring is the same as on CUDA):
LR schedulers build on the wrapped ``optimizer.step``, clipping sees unscaled gradients, and every
form of ``backward`` is scaled exactly when it is unscaled."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from torchpace.script import interpose
from torchpace.script.interpose import Interposer
from torchpace.speedups.applied import done
from torchpace.speedups.precision import Precision
from torchpace.train.plan import Plan


@pytest.fixture
def fp16(monkeypatch: pytest.MonkeyPatch) -> Callable[[], Interposer]:
    # autocast to fp16 on the CPU: the plan's scaler, backward and step wiring as on CUDA
    half = Precision("cpu", torch.float16)
    monkeypatch.setattr(interpose, "choose_precision", lambda d, a: (half, done("amp-fp16", ["x"])))
    return lambda: Interposer(Plan(amp="fp16"), device=torch.device("cpu"))


def _train(
    backward: Callable[[torch.Tensor], None],
    *,
    clip: float | None = None,
    steps: int = 3,
    schedule: bool = False,
) -> torch.Tensor:
    """A few SGD steps of a small model; the weights at the end."""
    torch.manual_seed(0)
    model = nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5) if schedule else None
    x, y = torch.randn(16, 8), torch.randn(16, 4)
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x).float(), y)
        backward(loss)
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched is not None:
            sched.step()
    return model.weight.detach().clone()


def _plain(backward: Callable[[torch.Tensor], None], **kw: object) -> torch.Tensor:
    return _train(backward, **kw)  # type: ignore[arg-type]


def _under(ip: Interposer, backward: Callable[[torch.Tensor], None], **kw: object) -> torch.Tensor:
    ip.install()
    try:
        return _train(backward, **kw)  # type: ignore[arg-type]
    finally:
        ip.uninstall()


def test_an_lr_scheduler_builds_on_the_scaled_step(fp16):
    ip = fp16()
    weights = _under(ip, lambda loss: loss.backward(), schedule=True)
    # fp16 autocast rounds the forward: the same update to fp16's precision, not scaled
    plain = _plain(lambda loss: loss.backward(), schedule=True)
    assert torch.allclose(weights, plain, atol=2e-3)
    assert ip._scaler is not None and ip._scaler.get_scale() == 65536.0  # no overflow skipped


def test_clipping_sees_unscaled_gradients(fp16):
    # A clip well below the gradient norm: the update is the clip's size, not 1/65536 of it.
    plain = _plain(lambda loss: loss.backward(), clip=0.05)
    first = _plain(lambda loss: loss.backward(), steps=0)
    ip = fp16()
    scaled = _under(ip, lambda loss: loss.backward(), clip=0.05)
    moved_plain = (plain - first).norm()
    moved = (scaled - first).norm()
    assert float(moved) == pytest.approx(float(moved_plain), rel=2e-2)


@pytest.mark.parametrize(
    "form",
    [
        "tensor-method",
        "autograd-positional",
        "autograd-keyword",
        "non-scalar-gradient",
        "autograd-grad-tensors",
    ],
)
def test_every_form_of_backward_is_scaled_as_it_is_unscaled(fp16, form):
    def backward(loss: torch.Tensor) -> None:
        if form == "tensor-method":
            loss.backward()
        elif form == "autograd-positional":
            torch.autograd.backward(loss)
        elif form == "autograd-keyword":
            torch.autograd.backward(tensors=loss)
        elif form == "non-scalar-gradient":
            per = loss.reshape(1).expand(2) / 2  # a non-scalar root with its own gradient
            per.backward(torch.ones(2))
        else:
            per = loss.reshape(1).expand(2) / 2
            torch.autograd.backward(tensors=[per], grad_tensors=[torch.ones(2)])

    expected = _plain(backward)
    got = _under(fp16(), backward)
    assert torch.allclose(got, expected, atol=2e-3), (got - expected).abs().max()
