"""The small verbs: precision, fused optimizer, channels_last, compile, fast math, forward."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from torch import nn

from conftest import requires_cuda
from torchpace.measure.env import cpu_supports_bf16
from torchpace.speedups.applied import Applied, SpeedupWarning
from torchpace.speedups.compile import compile_forward, compile_model
from torchpace.speedups.fast_math import set_fast_math
from torchpace.speedups.forward import autocast_forward, use_attention_backend
from torchpace.speedups.memory_format import use_channels_last
from torchpace.speedups.optim import fuse_optimizer, make_optimizer
from torchpace.speedups.precision import Precision, choose_precision
from torchpace.workloads import cnn

needs_bf16 = pytest.mark.skipif(not cpu_supports_bf16(), reason="this CPU has no native bf16")


def test_applied_refuses_an_unknown_technique() -> None:
    with pytest.raises(KeyError, match="unknown technique id 'fast'"):
        Applied("fast", True)


# -- precision --------------------------------------------------------------------------------
@needs_bf16
def test_auto_precision_is_bf16_without_a_scaler_on_an_amx_cpu() -> None:
    precision, record = choose_precision("cpu", "auto")
    assert precision.dtype is torch.bfloat16
    assert precision.make_scaler() is None  # bf16 has float32's exponent range
    assert record.changed and record.technique == "amp-bf16"
    with precision.autocast():
        assert (torch.ones(4, 4) @ torch.ones(4, 4)).dtype is torch.bfloat16


def test_fp16_on_cpu_falls_back_to_float32_with_a_warning() -> None:
    with pytest.warns(SpeedupWarning, match="fp16 autocast pays off on CUDA only"):
        precision, record = choose_precision("cpu", "fp16")
    assert precision.dtype is None and not record.changed


def test_fp16_gets_a_grad_scaler() -> None:
    with warnings.catch_warnings():  # without a GPU the scaler warns that it is disabled
        warnings.simplefilter("ignore")
        scaler = Precision("cuda", torch.float16).make_scaler()
    assert isinstance(scaler, torch.amp.GradScaler)


def test_bad_amp_choice_is_named() -> None:
    with pytest.raises(ValueError, match="amp must be one of off, auto, bf16, fp16; got 'int8'"):
        choose_precision("cpu", "int8")


@needs_bf16
def test_autocast_forward_returns_float32_and_is_idempotent() -> None:
    model = nn.Linear(8, 4)
    precision = Precision("cpu", torch.bfloat16)
    assert autocast_forward(model, precision=precision).changed
    assert not autocast_forward(model, precision=precision).changed  # not wrapped twice
    x = torch.randn(2, 8)
    out = model(x)
    assert out.dtype is torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the same matmul, in bf16
        ref = nn.functional.linear(x, model.weight, model.bias)
    assert torch.equal(out, ref.float())
    assert not torch.equal(out, nn.functional.linear(x, model.weight, model.bias))


def test_attention_backend_math_runs_and_efficient_needs_cuda() -> None:
    layer = nn.TransformerEncoderLayer(16, 2, batch_first=True)
    assert use_attention_backend(layer, backend="math").changed
    layer(torch.randn(2, 5, 16))
    with pytest.warns(SpeedupWarning, match="CUDA only"):
        assert not use_attention_backend(nn.Linear(2, 2), backend="efficient").changed


# -- fused optimizer --------------------------------------------------------------------------
def _step_params(opt_factory: type[torch.optim.Optimizer], fused: bool) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = opt_factory(model.parameters(), lr=1e-2)  # type: ignore[call-arg]
    if fused:
        assert fuse_optimizer(opt).changed
    for _ in range(5):
        loss = model(torch.randn(8, 16)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD])
def test_fused_update_matches_the_default_one(cls: type[torch.optim.Optimizer]) -> None:
    # 1e-6: fused kernels reorder the same float32 arithmetic; 5 steps of lr 1e-2 keep the
    # difference at rounding level (observed max ~1e-8).
    for a, b in zip(_step_params(cls, False), _step_params(cls, True), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_fusing_moves_existing_step_counters_and_is_idempotent() -> None:
    model = nn.Linear(4, 4)
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    assert fuse_optimizer(opt).changed
    assert all(g["fused"] and not g["foreach"] for g in opt.param_groups)
    opt.step()  # runs the fused kernel with the moved state
    assert not fuse_optimizer(opt).changed


@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD])
def test_a_fused_optimizer_takes_the_grad_scaler_in_its_kernel_as_if_built_fused(
    cls: type[torch.optim.Optimizer],
) -> None:
    built = cls(nn.Linear(2, 2).parameters(), lr=1e-2, fused=True)
    opt = cls(nn.Linear(2, 2).parameters(), lr=1e-2)
    fuse_optimizer(opt)
    # Without the flag GradScaler.step unscales on its own and reads the inf check on the
    # host: a sync every step, the one a fused kernel exists to avoid.
    assert getattr(opt, "_step_supports_amp_scaling", False) is True
    assert built._step_supports_amp_scaling is True

    def run(fused_after: bool) -> list[torch.Tensor]:
        torch.manual_seed(0)
        model = nn.Linear(16, 4)
        o = cls(model.parameters(), lr=1e-2, fused=not fused_after)
        if fused_after:
            fuse_optimizer(o)
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        for _ in range(4):
            scaler.scale(model(torch.randn(8, 16)).square().mean()).backward()
            scaler.step(o)
            scaler.update()
            o.zero_grad()
        return [p.detach().clone() for p in model.parameters()]

    for a, b in zip(run(True), run(False), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_an_optimizer_without_a_fused_kernel_is_left_alone() -> None:
    opt = torch.optim.RMSprop(nn.Linear(2, 2).parameters())
    with pytest.warns(SpeedupWarning, match="RMSprop has no fused kernel"):
        assert not fuse_optimizer(opt).changed
    assert not opt.param_groups[0].get("fused")


def test_make_optimizer_builds_fused_by_name_and_names_bad_input() -> None:
    opt = make_optimizer(nn.Linear(2, 2).parameters(), "AdamW", lr=1e-3, weight_decay=0.1)
    assert isinstance(opt, torch.optim.AdamW) and opt.param_groups[0]["fused"]
    with pytest.raises(ValueError, match="one of adamw, adam, sgd; got 'lamb'"):
        make_optimizer([], "lamb", lr=1.0)
    with pytest.raises(ValueError, match="fused=False to use foreach=True"):
        make_optimizer(nn.Linear(2, 2).parameters(), lr=1.0, foreach=True)


# -- channels_last, compile, fast math --------------------------------------------------------
def test_channels_last_converts_convs_and_keeps_outputs() -> None:
    torch.manual_seed(0)
    model = cnn.model(width=16).eval()
    x = torch.randn(2, 3, 32, 32)
    ref = model(x)
    assert use_channels_last(model).changed
    assert model.stem[0].weight.is_contiguous(memory_format=torch.channels_last)
    # 1e-5: the same float32 convolutions in another memory layout sum in another order.
    torch.testing.assert_close(
        model(x.contiguous(memory_format=torch.channels_last)), ref, rtol=1e-5, atol=1e-5
    )
    assert not use_channels_last(model).changed  # already converted


def test_channels_last_skips_a_model_without_convs() -> None:
    with pytest.warns(SpeedupWarning, match="no Conv2d"):
        assert not use_channels_last(nn.Linear(3, 3)).changed


def test_compile_keeps_the_object_and_checks_the_mode() -> None:
    model = nn.Linear(3, 3)
    with pytest.raises(ValueError, match="mode must be one of default"):
        compile_model(model, mode="turbo")
    record = compile_model(model)
    assert record.changed and record.technique == "torch-compile"
    assert not compile_model(model).changed  # in place, once
    assert "_orig_mod" not in "".join(model.state_dict())


class _Redirecting(nn.Module):
    """A wrapper that hands attribute writes on to the module it wraps, as Lightning Fabric's
    _FabricModule does (its forward calls the inner module's)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self._ready = True

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_ready", False) and hasattr(self.inner, name):
            setattr(self.inner, name, value)
        super().__setattr__(name, value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def test_compile_forward_leaves_a_wrapped_module_alone() -> None:
    # The Fabric corpus script's compile trial ended in a RecursionError: the compiled wrapper
    # forward was written onto the inner module too, so each called the other.
    inner = nn.Linear(3, 3)
    wrapper = _Redirecting(inner)
    record = compile_forward(wrapper)
    assert record.changed
    assert getattr(wrapper.forward, "_torchdynamo_orig_callable", None) is not None
    assert "forward" not in vars(inner)  # the inner module keeps its class's forward
    assert inner.forward.__func__ is nn.Linear.forward
    assert not compile_forward(wrapper).changed


def test_fast_math_on_cpu_and_restore() -> None:
    before = torch.get_float32_matmul_precision()
    result = set_fast_math("cpu")
    try:
        expected = "medium" if cpu_supports_bf16() else before
        assert torch.get_float32_matmul_precision() == expected
        assert [a.technique for a in result.applied] == ["tf32"]
    finally:
        result.restore()
    assert torch.get_float32_matmul_precision() == before


@requires_cuda
def test_fast_math_on_cuda_turns_on_cudnn_benchmark_and_tf32() -> None:
    result = set_fast_math("cuda")
    try:
        assert torch.backends.cudnn.benchmark
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        result.restore()


def test_no_warning_when_a_technique_applies() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        use_channels_last(cnn.model(width=16))
