"""FLOP counts against hand formulas for the ops torch's counter misses or miscounts on real
models (issue 20): an LSTM, scaled-dot-product attention and a depthwise convolution."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from torchpace.doctor.flops import CUSTOM, uncounted
from torchpace.doctor.probe import Probe
from torchpace.doctor.result import _checked

aten = torch.ops.aten


def _counted(fn) -> int:  # type: ignore[no-untyped-def]
    with FlopCounterMode(display=False, custom_mapping=CUSTOM) as counter:
        fn()
    return int(counter.get_total_flops())


def test_an_lstm_counts_its_gate_products_forward_and_backward() -> None:
    # Without a formula the CPU LSTM kernel (mkldnn_rnn_layer) counted 0: "MFU 0.01%".
    steps, batch, inputs, hidden = 12, 4, 32, 64
    lstm = nn.LSTM(inputs, hidden, num_layers=2)
    x = torch.randn(steps, batch, inputs)
    got = _counted(lambda: lstm(x)[0].sum().backward())
    per_layer = [4 * hidden * (i + hidden) for i in (inputs, hidden)]  # MACs per step and sample
    forward = sum(2 * steps * batch * m for m in per_layer)
    assert got == pytest.approx(3 * forward, rel=0.05)  # backward: input and weight gradients


def test_cpu_attention_counts_its_two_products_and_five_in_backward() -> None:
    b, h, s, d = 2, 4, 32, 16
    q, k, v = (torch.randn(b, h, s, d, requires_grad=True) for _ in range(3))
    got = _counted(lambda: nn.functional.scaled_dot_product_attention(q, k, v).sum().backward())
    product = 2 * b * h * s * s * d  # one (s x d) @ (d x s) product per head
    assert got == pytest.approx(2 * product + 5 * product, rel=0.05)


def test_a_depthwise_convolutions_backward_is_not_counted_per_group() -> None:
    # torch's formula counted its weight gradient `groups` times over: MFU 113-134% on a
    # MobileNetV3.
    n, c, hw = 4, 64, 16
    conv = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
    x = torch.randn(n, c, hw, hw, requires_grad=True)
    got = _counted(lambda: conv(x).sum().backward())
    forward = 2 * n * c * hw * hw * 9
    assert got == pytest.approx(3 * forward, rel=0.10)  # forward, input and weight gradients


def test_heavy_ops_without_a_formula_are_listed_and_said() -> None:
    seen = Counter({aten.mkldnn_rnn_layer: 2, aten.mm: 3, aten.add: 5, aten._cudnn_rnn: 1})
    registry = {aten.mm: None, aten.mkldnn_rnn_layer: None}
    assert uncounted(seen, registry) == {"_cudnn_rnn": 1}
    probe = Probe()
    probe.start()
    torch.nn.functional.embedding(torch.tensor([1, 2]), torch.randn(4, 3))
    probe.stop()
    assert probe.uncounted == {} and probe.flops == 0


def test_an_mfu_over_one_hundred_percent_is_flagged_as_a_wrong_count() -> None:
    util = _checked({"mfu": 1.2, "note": None})
    assert util["mfu_impossible"] and "MFU 120% is impossible" in util["note"]
    assert not _checked({"mfu": 0.4, "note": None})["mfu_impossible"]


def test_an_evaluation_pass_inside_the_probe_step_is_not_counted() -> None:
    # Lightning's transformer example validates 2,000 samples inside some steps: counted into
    # the probe step, it gave an MFU of 932%.
    from pathlib import Path

    from torchpace.doctor import script

    path = Path(__file__).resolve().parent / "scripts" / "eval_every_step.py"
    ran = script.run(str(path), [], steps=2, warmup=1, lint=False)
    assert ran.result is not None
    batch, inputs, outputs = 8, 64, 32
    train = 2 * (2 * batch * inputs * outputs)  # the forward and the weight gradient
    assert ran.result["utilisation"]["flops_per_step"] == train


def test_a_cuda_lstm_counts_as_the_cpu_one_does() -> None:
    # cuDNN runs the whole nn.LSTM as one _cudnn_rnn call, which had no formula: its FLOPs (and
    # the MFU) were missing on CUDA. Its count must equal the CPU's per-layer count.
    steps, batch, inputs, hidden = 12, 4, 32, 64
    lstm = nn.LSTM(inputs, hidden, num_layers=2)
    x = torch.randn(steps, batch, inputs)
    with FlopCounterMode(display=False, custom_mapping=CUSTOM) as counter:
        lstm(x)
    cpu_forward = int(counter.get_total_flops())
    shapes = [w.shape for w in lstm._flat_weights]
    cuda_forward = CUSTOM[aten._cudnn_rnn](x.shape, shapes)
    assert cuda_forward == cpu_forward
    packed = CUSTOM[aten._cudnn_rnn](torch.Size([steps * batch, inputs]), shapes)
    assert packed == cpu_forward  # a packed sequence: (tokens, features)
    both = CUSTOM[aten._cudnn_rnn_backward](x.shape, shapes, [True, True, True, True])
    data_only = CUSTOM[aten._cudnn_rnn_backward](x.shape, shapes, [True, True, True, False])
    assert (both, data_only) == (2 * cpu_forward, cpu_forward)
