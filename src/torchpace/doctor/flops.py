"""FLOP formulas ``torch.utils.flop_counter`` lacks or gets wrong on the ops real models run, and
the heavy ops it leaves uncounted.

Checked against real scripts (issue 20): on a CPU, ``nn.LSTM`` and ``scaled_dot_product_attention``
counted 0 FLOPs (an RNN script showed "MFU 0.01%"; GPTs missed 7-11% of their FLOPs), and the
backward of a grouped or depthwise convolution was counted ``groups`` times over (a MobileNetV3
run showed an MFU of 113-134%). Each formula counts a multiply-add as 2 FLOPs, as the counter does.
"""

from __future__ import annotations

import re
from collections import Counter
from math import prod
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import conv_flop_count, sdpa_backward_flop_count, sdpa_flop_count

from torchpace.doctor.precision import ComputeCalls

aten = torch.ops.aten


def _sdpa_cpu(q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    return int(sdpa_flop_count(q, k, v))


def _sdpa_cpu_backward(
    grad_out: Any, q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kw: Any
) -> int:
    return int(sdpa_backward_flop_count(grad_out, q, k, v))


def _conv_backward(
    grad_out: Any,
    x: Any,
    w: Any,
    _bias: Any,
    _stride: Any,
    _padding: Any,
    _dilation: Any,
    transposed: bool,
    _output_padding: Any,
    _groups: int,
    output_mask: Any,
    out_shape: Any = None,
    **kw: Any,
) -> int:
    """Each of the input and weight gradients takes as many multiply-adds as the forward, whose
    count uses the weight's per-group input channels (torch's formula transposes the batch and
    channel dimensions for the weight gradient and so counts every group against every other)."""
    forward = conv_flop_count(list(x), list(w), list(grad_out), transposed=transposed)
    return int(forward * (int(bool(output_mask[0])) + int(bool(output_mask[1]))))


def _rnn_layer(x: Any, w_ih: Any, w_hh: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    """One LSTM layer over a sequence on the CPU (oneDNN's ``mkldnn_rnn_layer``, whose input is
    (steps, batch, features) whatever the module's ``batch_first``): at each step the gates'
    input and hidden projections, ``w_ih`` (4 x hidden, input) and ``w_hh`` (4 x hidden, hidden),
    for every sequence of the batch."""
    steps, batch = x[0], x[1]
    return int(2 * steps * batch * (prod(w_ih) + prod(w_hh)))


def _rnn_layer_backward(
    x: Any, w_ih: Any, w_hh: Any, *args: Any, out_shape: Any = None, **kw: Any
) -> int:
    """Twice the forward: the input gradients and the weight gradients of the same products."""
    return 2 * _rnn_layer(x, w_ih, w_hh)


def _cudnn_rnn(x: Any, weights: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    """A whole nn.LSTM/GRU/RNN on CUDA (cuDNN's ``_cudnn_rnn``: every layer and direction at
    once). At each time step of each sequence every weight matrix (input, hidden and projection
    ones, 2-D in ``weights``; biases are 1-D) is one matrix-vector product. The input is
    (steps, batch, features) or (batch, steps, features); a packed sequence is (tokens,
    features)."""
    tokens = x[0] if len(x) == 2 else x[0] * x[1]
    return int(2 * tokens * sum(prod(w) for w in weights if len(w) == 2))


def _cudnn_rnn_backward(x: Any, weights: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    """The data gradients (input and states) take one forward's products, the weight gradients
    another; ``output_mask`` (the last argument) says which were asked for."""
    mask = args[-1] if args else kw.get("output_mask", (True, True, True, True))
    forward = _cudnn_rnn(x, weights)
    return forward * (int(any(mask[:3])) + int(bool(mask[3])))


CUSTOM: dict[Any, Any] = {
    aten._cudnn_rnn: _cudnn_rnn,
    aten._cudnn_rnn_backward: _cudnn_rnn_backward,
    aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_cpu,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _sdpa_cpu_backward,
    aten.convolution_backward: _conv_backward,
    aten.mkldnn_rnn_layer: _rnn_layer,
    aten.mkldnn_rnn_layer_backward: _rnn_layer_backward,
}

# Ops that do matrix work, by name: one the counter has no formula for means the count is low.
HEAVY = re.compile(r"lstm|gru|rnn|attention|conv|mm|matmul|linear|einsum", re.IGNORECASE)


class SeenOps(TorchDispatchMode):
    """Counts every aten op the probe step runs, to list the heavy ones the counter skipped."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[Any] = Counter()
        self.calls: ComputeCalls | None = None  # set by the probe once the counter exists

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        self.ops[func._overloadpacket] += 1
        out = func(*args, **(kwargs or {}))
        if self.calls is not None:
            try:
                self.calls.observe(func, args, kwargs or {}, out)
            except Exception:  # the estimate is lost, never the user's step
                self.calls.skipped = True
        return out


def uncounted(seen: Counter[Any], registry: dict[Any, Any]) -> dict[str, int]:
    """The heavy ops that ran and have no formula: name -> calls."""
    return {
        str(op.__name__): n
        for op, n in seen.most_common()
        if op not in registry and HEAVY.search(str(op.__name__))
    }
