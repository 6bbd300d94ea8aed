"""channels_last on a CPU model with a 1x1 strided convolution of few input channels: oneDNN gets
that convolution's weight gradient wrong in NHWC, and crashes with one thread
(uxlfoundation/oneDNN#6035; on torch 2.13.0+cpu, AVX2: 3-29% off with two threads). Such a model
keeps its layout, and so do its inputs, wherever the technique is applied."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from conftest import run_python
from torchpace.speedups import SpeedupWarning
from torchpace.speedups.memory_format import channels_last_hazard, in_effect, use_channels_last
from torchpace.train.apply_plan import prepare
from torchpace.train.plan import Plan
from torchpace.workloads import cnn


def _block(ic: int, k: int = 1, stride: int = 2, groups: int = 1) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, ic, 3, padding=1), nn.Conv2d(ic, 8, k, stride, groups=groups))


@pytest.mark.parametrize(
    ("model", "hazard"),
    [
        (_block(4), True),  # a ResNet shortcut from 4 channels
        (_block(4, stride=1), False),  # no stride: oneDNN does not reduce it to unit stride
        (_block(4, k=3), False),
        (_block(16), False),  # a whole channel block, with AVX-512 too
        (_block(8), True),  # a block with AVX2, not with AVX-512: taken as 16 on every CPU
        (_block(24, groups=4), True),  # 6 input channels per group
        (cnn.ResNet(width=4), True),
        (cnn.ResNet(width=16), False),  # the shortcuts see 16 and 32 channels
    ],
)
def test_the_hazard_is_a_strided_1x1_conv_with_fewer_channels_than_a_block(
    model: nn.Module, hazard: bool
) -> None:
    reason = channels_last_hazard(model)
    assert (reason is not None) == hazard, reason
    if hazard:
        assert "oneDNN#6035" in reason and "1x1" in reason


def test_a_hazardous_model_keeps_its_layout_and_says_why() -> None:
    model = cnn.ResNet(width=4)
    with pytest.warns(SpeedupWarning, match="1x1 convolution"):
        record = use_channels_last(model)
    assert not record.changed and not in_effect(record)
    assert all(p.is_contiguous() for p in model.parameters())
    safe = cnn.ResNet(width=32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert in_effect(use_channels_last(safe))
    assert in_effect(use_channels_last(safe))  # already in the format: inputs still converted


def _grads(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    model(x).sum().backward()
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_prepare_leaves_the_inputs_alone_too_and_the_gradients_match() -> None:
    torch.manual_seed(0)
    base = cnn.ResNet(width=4)
    model = cnn.ResNet(width=4)
    model.load_state_dict(base.state_dict())
    data = [(torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))) for _ in range(2)]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.warns(SpeedupWarning):
        model, opt, loader = prepare(model, opt, data, plan=Plan(channels_last=True))
    x, _ = next(iter(loader))
    assert x.is_contiguous()  # not converted: the first conv would make the rest NHWC
    for got, want in zip(_grads(model, x), _grads(base, x), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_one_thread_trains_a_hazardous_model_under_the_plan_without_crashing() -> None:
    # The same step crashed the process (SIGSEGV) with torch's threads at one, as under
    # OMP_NUM_THREADS=1, before the guard.
    code = (
        "import torch, warnings\n"
        "torch.set_num_threads(1)\n"
        "warnings.simplefilter('ignore')\n"
        "from torchpace.train.apply_plan import prepare\n"
        "from torchpace.train.plan import Plan\n"
        "from torchpace.workloads import cnn\n"
        "m = cnn.ResNet(width=4)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "data = [(torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,)))]\n"
        "m, opt, loader = prepare(m, opt, data, plan=Plan(channels_last=True))\n"
        "for x, y in loader:\n"
        "    cnn.loss(m, (x, y)).backward()\n"
        "print('trained')\n"
    )
    done = run_python("-c", code, timeout=120)
    assert done.returncode == 0 and "trained" in done.stdout, (done.returncode, done.stderr[-2000:])


def test_a_hazardous_model_already_in_channels_last_is_told_how_to_leave_it() -> None:
    model = cnn.ResNet(width=4).to(memory_format=torch.channels_last)
    with pytest.warns(SpeedupWarning, match="already in channels_last"):
        record = use_channels_last(model)
    assert not in_effect(record) and "contiguous_format" in record.reason


def test_the_script_trial_converts_each_model_on_its_own() -> None:
    # A GAN-shaped script: G is safe and converted, D has a 1x1 strided conv on 4 channels. D's
    # input (G's channels_last output) is made contiguous: a channels_last input alone would
    # make oneDNN run D's convolution in the format that breaks it.
    from torchpace.script.interpose import Interposer

    seen: dict[str, bool] = {}

    class Probe(nn.Module):
        def __init__(self, name: str, inner: nn.Module) -> None:
            super().__init__()
            self.name, self.inner = name, inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen[self.name] = x.is_contiguous(memory_format=torch.channels_last) and not (
                x.is_contiguous()
            )
            return self.inner(x)

    g = Probe("G", nn.Conv2d(3, 4, 3, padding=1))
    d = Probe("D", nn.Conv2d(4, 8, 1, 2))
    ip = Interposer(Plan(channels_last=True), device=torch.device("cpu"))
    ip.install()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SpeedupWarning)
            for _ in range(2):
                out = d(g(torch.randn(2, 3, 8, 8)))
                out.sum().backward()
    finally:
        ip.uninstall()
    assert seen == {"G": True, "D": False}
    assert d.inner.weight.is_contiguous()
