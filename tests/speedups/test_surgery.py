from __future__ import annotations

import copy
import warnings
from typing import TypeVar

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Subset

from torchpace.speedups.surgery import fold_conv_bias
from torchpace.workloads import cnn

# fp32: the folded model subtracts the bias before BatchNorm's mean instead of inside it, so
# outputs differ by rounding only; 1e-5 is ~100 fp32 ulps at the unit-scale outputs here.
ATOL = 1e-5

M = TypeVar("M", bound=nn.Module)


def _randomise(model: M, seed: int = 0) -> M:
    """Non-zero conv biases and non-trivial BatchNorm statistics and affine parameters."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d | nn.Conv1d | nn.Conv3d) and m.bias is not None:
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen))
            if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d | nn.BatchNorm3d):
                if m.running_mean is not None and m.running_var is not None:
                    m.running_mean.copy_(torch.randn(m.num_features, generator=gen))
                    m.running_var.copy_(0.5 + torch.rand(m.num_features, generator=gen))
                m.weight.copy_(1 + 0.3 * torch.randn(m.num_features, generator=gen))
                m.bias.copy_(0.3 * torch.randn(m.num_features, generator=gen))
    return model


def _resnet() -> cnn.ResNet:
    torch.manual_seed(0)
    return _randomise(cnn.ResNet(width=8))


def _biases(model: nn.Module) -> dict[str, torch.Tensor]:
    return {
        name: m.bias.detach().clone()
        for name, m in model.named_modules()
        if isinstance(m, nn.Conv2d) and m.bias is not None
    }


def _n_params(model: nn.Module) -> int:
    return sum(1 for _ in model.parameters())


def test_resnet_outputs_identical_in_eval_and_train_mode() -> None:
    original = _resnet()
    folded = copy.deepcopy(original)
    biases = _biases(original)
    applied = fold_conv_bias(folded)

    assert applied.changed and applied.technique == "conv-bias-before-bn"
    assert len(applied.changes) == len(biases) == 9  # stem, 3 blocks × 2, 2 shortcuts
    assert "stem.0 -> stem.1" in applied.changes[0]
    assert any(c.startswith("stages.1.shortcut.0 -> stages.1.shortcut.1") for c in applied.changes)
    assert _n_params(folded) == _n_params(original) - len(biases)
    assert all(
        m.bias is None and "bias" not in dict(m.named_parameters())
        for m in folded.modules()
        if isinstance(m, nn.Conv2d)
    )

    x = torch.randn(8, 3, 32, 32)
    original.eval(), folded.eval()
    with torch.no_grad():
        torch.testing.assert_close(folded(x), original(x), atol=ATOL, rtol=ATOL)

    original.train(), folded.train()
    with torch.no_grad():
        torch.testing.assert_close(folded(x), original(x), atol=ATOL, rtol=ATOL)
    # After a train-mode update the folded running_mean is still exactly `bias` below.
    bns = dict(original.named_modules())
    for change in applied.changes:
        conv_name, bn_name = change.split(":")[0].split(" -> ")
        bn_o, bn_f = bns[bn_name], folded.get_submodule(bn_name)
        assert isinstance(bn_o, nn.BatchNorm2d) and isinstance(bn_f, nn.BatchNorm2d)
        assert bn_o.running_mean is not None and bn_f.running_mean is not None
        torch.testing.assert_close(
            bn_f.running_mean + biases[conv_name], bn_o.running_mean, atol=ATOL, rtol=ATOL
        )
        torch.testing.assert_close(bn_f.running_var, bn_o.running_var, atol=ATOL, rtol=ATOL)
        assert bn_f.num_batches_tracked is not None and bn_o.num_batches_tracked is not None
        assert torch.equal(bn_f.num_batches_tracked, bn_o.num_batches_tracked)


def test_second_call_changes_nothing_and_does_not_warn() -> None:
    model = _resnet()
    fold_conv_bias(model)
    state = copy.deepcopy(model.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = fold_conv_bias(model)
    assert not again.changed and "no convolution" in again.reason
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())


@pytest.mark.parametrize(
    ("conv", "bn", "shape"),
    [
        (nn.Conv1d(3, 4, 3), nn.BatchNorm1d(4, momentum=None), (5, 3, 9)),
        (nn.Conv3d(3, 4, 3), nn.BatchNorm3d(4, momentum=0.3), (5, 3, 5, 5, 5)),
        (nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, track_running_stats=False), (5, 3, 6, 6)),
    ],
    ids=["conv1d-cumulative-average", "conv3d-momentum", "conv2d-no-running-stats"],
)
def test_running_statistics_stay_consistent_over_updates(
    conv: nn.Module, bn: nn.Module, shape: tuple[int, ...]
) -> None:
    original = _randomise(nn.Sequential(conv, bn, nn.ReLU()), seed=1)
    folded = copy.deepcopy(original)
    (change,) = fold_conv_bias(folded).changes
    keeps_mean = getattr(bn, "running_mean", None) is not None
    assert change.endswith("folded into running_mean" if keeps_mean else "keeps no running mean)")
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _ in range(4):  # several train-mode updates, then eval reads the running stats
            x = torch.randn(shape, generator=gen)
            torch.testing.assert_close(folded(x), original(x), atol=ATOL, rtol=ATOL)
        original.eval(), folded.eval()
        torch.testing.assert_close(folded(x), original(x), atol=ATOL, rtol=ATOL)


class _Fork(nn.Module):
    """conv_a feeds BN and the output too; conv_b feeds a ReLU before its BN; conv_c is shared."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_a, self.bn_a = nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4)
        self.conv_b, self.bn_b = nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4)
        self.conv_c, self.bn_c = nn.Conv2d(4, 4, 1), nn.BatchNorm2d(4)
        self.conv_d = nn.Conv2d(3, 4, 1)  # no BatchNorm at all

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.conv_a(x)
        out: torch.Tensor = self.bn_a(a) + a
        out = out + self.bn_b(F.relu(self.conv_b(x)))
        out = self.bn_c(self.conv_c(self.conv_c(out)))  # conv_c has two call sites
        out = out + self.conv_d(x)
        return out


def test_conv_with_other_users_or_no_bn_is_left_alone() -> None:
    model = _Fork()
    applied = fold_conv_bias(model)
    assert not applied.changed
    assert all(isinstance(getattr(model, f"conv_{k}").bias, torch.Tensor) for k in "abcd")


class _Untraceable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
        self.tail = nn.Conv2d(4, 4, 1)  # no BatchNorm: stays

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # data-dependent control flow: torch.fx cannot trace this
            x = -x
        out: torch.Tensor = self.tail(self.body(x))
        return out


def test_untraceable_model_folds_inside_sequential_and_says_so() -> None:
    original = _randomise(_Untraceable())
    folded = copy.deepcopy(original)
    applied = fold_conv_bias(folded)
    assert applied.changes == ("body.0 -> body.1: conv bias folded into running_mean",)
    assert "torch.fx could not trace" in applied.reason and "nn.Sequential" in applied.reason
    assert folded.tail.bias is not None
    x = torch.randn(4, 3, 8, 8)
    for train in (True, False):
        original.train(train), folded.train(train)
        with torch.no_grad():
            torch.testing.assert_close(folded(x), original(x), atol=ATOL, rtol=ATOL)


def test_keeps_device_and_dtype() -> None:
    model = _randomise(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))).to(torch.float64)
    fold_conv_bias(model)
    bn = model[1]
    assert isinstance(bn, nn.BatchNorm2d) and bn.running_mean is not None
    assert bn.running_mean.dtype == torch.float64


def test_loss_trajectory_matches_unfolded_training() -> None:
    # fp64, so that the tolerance can be tight: in fp32 the rounding difference of the fold
    # (~1e-7) is amplified by Adam over 25 steps to ~1e-4 (measured), the size a real mistake
    # could hide in. In fp64 the per-step gap measured < 1e-15; 1e-10 leaves five orders of
    # headroom for that amplification and still catches any algebraic error (a bias that was
    # not redundant changes the loss at the first step by far more).
    rtol = 1e-10
    data = Subset(cnn.dataset("train"), range(25 * 16))
    torch.manual_seed(0)
    original = cnn.ResNet(width=8).to(torch.float64)
    folded = copy.deepcopy(original)
    assert fold_conv_bias(folded).changed
    # Optimizers built after folding: the removed biases must not be in one.
    opt_o = torch.optim.Adam(original.parameters(), lr=cnn.lr)
    opt_f = torch.optim.Adam(folded.parameters(), lr=cnn.lr)
    losses_o: list[float] = []
    losses_f: list[float] = []
    for x, y in DataLoader(data, batch_size=16, shuffle=False):
        batch = (x.to(torch.float64), y)
        for model, opt, losses in ((original, opt_o, losses_o), (folded, opt_f, losses_f)):
            loss = cnn.loss(model, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert len(losses_o) == 25 and losses_o[-1] < losses_o[0]  # it trained
    torch.testing.assert_close(losses_f, losses_o, rtol=rtol, atol=0.0)
    # Eval mode reads the running means, shifted once and then updated 25 times.
    original.eval(), folded.eval()
    with torch.no_grad():
        # 1e-8: eval logits measured within 3e-11 here; fp64 running-stat rounding, not algebra.
        torch.testing.assert_close(folded(batch[0]), original(batch[0]), atol=1e-8, rtol=1e-8)
