"""What a lower precision would save on *this* model: its own matmul, convolution, attention and
RNN calls of one step, recorded during the probe step and timed in both precisions after the run:
float32 against bfloat16 under autocast, or a float64 model against float32.

Why not the device's peak ratio: on real scripts (issue 18) the peak promised 1.95x where 1.7x
was measured, 2.1x where 1.5x was, and 14-31% on a small GPT whose matmuls gained nothing; small
shapes never reach the bf16 peak, the casts autocast adds cost time, and some kernels (the CPU
flash-attention backward) run slower in bf16. Replaying the recorded calls on fresh tensors of the
same shapes and strides measures all three on the machine at hand.

Which inputs autocast would have to cast is simulated in the probe step: the outputs of the calls
autocast lowers are bf16; an op whose floating inputs are all bf16 keeps bf16 (torch's type
promotion); ops autocast keeps in float32 (losses; on CUDA also norms and softmax) give float32.
Each cast in the forward has a cast of the gradient back in the backward, so a cast is timed twice.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch.utils.weak import WeakIdKeyDictionary

from torchpace.doctor.replay import Spec, build, leaves, per_call, spec_of
from torchpace.doctor.rnn_twin import RecurrentModules, time_twins

aten = torch.ops.aten

# The ops under `torch.autocast` lowers to bf16 (autocast_mode.cpp, "lower_precision_fp" on CPU
# and CUDA), as they reach a dispatch mode: `linear` and `matmul` decompose to these.
LOWERED = frozenset(
    {
        aten.mm,
        aten.addmm,
        aten.bmm,
        aten.baddbmm,
        aten.convolution,
        aten.convolution_backward,
        aten._scaled_dot_product_flash_attention_for_cpu,
        aten._scaled_dot_product_flash_attention_for_cpu_backward,
        aten._scaled_dot_product_flash_attention,
        aten._scaled_dot_product_flash_attention_backward,
        aten._scaled_dot_product_efficient_attention,
        aten._scaled_dot_product_efficient_attention_backward,
        aten._scaled_dot_product_cudnn_attention,
        aten._scaled_dot_product_cudnn_attention_backward,
        aten.mkldnn_rnn_layer,
        aten.mkldnn_rnn_layer_backward,
        aten._cudnn_rnn,
    }
)
# Ops autocast runs in float32 whatever their inputs (autocast_mode.cpp "fp32" lists): the
# losses on both devices, and on CUDA the norms, softmax and reductions that overflow in 16 bits.
FLOAT32_ANY = ("loss", "nll_", "binary_cross_entropy", "kl_div", "cdist", "dist")
FLOAT32_CUDA = ("layer_norm", "group_norm", "softmax", "logsumexp", "norm", "pow", "exp", "log")

# Replay budget: the calls holding the most FLOPs are timed first, until 95% of the step's
# lowered FLOPs are covered or 3 s have gone (the fingerprint's peak measurement beside it takes
# about 1 s); an estimate needs half the FLOPs timed.
BUDGET_S = 3.0
COVER = 0.95
MIN_COVERED = 0.5
# A float64 model's recording is sampled once it is large: after each RECORDED calls kept, the
# chance of keeping the next of its elementwise and other small calls halves, and a kept call
# counts for 1 / that chance (an unbiased count). The matmul-like calls are all kept. The corpus's
# float64 LSTMCell loop (time-sequence-prediction: 20 LBFGS closures over 999 steps) runs about
# 2.6M ops in its probe step, already about ten times a plain step; keeping every one cost 15-22
# us an op and made that probe step outlast the doctor's 600 s step timeout. Sampled, about 40k
# are kept. RECORDED is many times the signatures a step has (148-251 on that model).
RECORDED = 4096
# The precision each model precision would be timed against: autocast's bf16 for float32, plain
# float32 for float64 (the model and its inputs converted: no casts in the step).
TARGET = {torch.float32: torch.bfloat16, torch.float64: torch.float32}


def _float(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


class ComputeCalls:
    """The lowered calls of the probe step, by signature, with their FLOPs and the inputs
    autocast would cast. Fed by the probe's dispatch mode (``flops.SeenOps``)."""

    def __init__(self, registry: dict[Any, Callable[..., int]], cuda: bool) -> None:
        self.registry = registry
        # key -> [calls (estimated from the sample), FLOPs per call]
        self.calls: dict[tuple[Any, ...], list[float]] = {}
        self.low: WeakIdKeyDictionary = WeakIdKeyDictionary()  # tensors bf16 under autocast
        self.float32_ops = FLOAT32_ANY + (FLOAT32_CUDA if cuda else ())
        self.skipped = False  # low precision already, or a call it could not read: no estimate
        self.source: torch.dtype | None = None  # the precision the lowered calls run in
        self.chance = 1.0  # of keeping the next call (RECORDED)
        self.kept = 0
        self._draw = random.Random(0).random  # its own generator: the script's is untouched
        self.recurrent = RecurrentModules()  # fed by the probe's module hook (rnn_twin.py)

    def _is_low(self, t: torch.Tensor) -> bool:
        return t.dim() > 0 and t in self.low  # a 0-dim tensor does not set the result's dtype

    def _inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
        kw_values = [v for _, v in sorted(kwargs.items())]  # in the key's order
        return [
            t for t in leaves(args, torch.Tensor) + leaves(kw_values, torch.Tensor) if _float(t)
        ]

    def observe(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        if self.skipped:
            return
        if self.source == torch.float64:
            self._float64(func, args, kwargs, out)
            return
        packet = func._overloadpacket
        inputs = self._inputs(args, kwargs)
        if packet in LOWERED:
            self.source = self.source or (inputs[0].dtype if inputs else None)
            if self.source == torch.float64:
                self._float64(func, args, kwargs, out)
                return
            if self.source != torch.float32 or any(t.dtype != self.source for t in inputs):
                self.skipped = True  # already in low precision, or mixed: nothing to time
                return
            backward = torch._C._current_autograd_node() is not None
            # In the backward every operand is already bf16 (saved activations, gradients).
            casts = tuple(not backward and not self._is_low(t) for t in inputs)
            self._count(func, args, kwargs, casts, out, 1.0)
            low = True
        else:
            name = str(packet.__name__)
            sized = [t for t in inputs if t.dim() > 0]
            low = (
                bool(sized)
                and all(self._is_low(t) for t in sized)
                and not any(part in name for part in self.float32_ops)
            )
        if low:
            for t in leaves(out, torch.Tensor):
                if _float(t):
                    self.low[t] = True

    def _float64(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        """A float64 model converted to float32 runs every op in float32, not only the matmuls
        (an LSTMCell's gates are elementwise work on small tensors), and casts nothing. The
        matmul-like calls are all kept (a heavy one that runs once a step must not be missed;
        they are a tenth of an LSTMCell step's ops), the rest sampled (RECORDED). No state is
        kept between calls, so a call the sample leaves out is not even read."""
        weight = 1.0 if func._overloadpacket in LOWERED else self._weight()
        if weight is None:
            return
        inputs = self._inputs(args, kwargs)
        if not inputs or any(t.dtype != torch.float64 for t in inputs):
            if func._overloadpacket in LOWERED:
                self.skipped = True  # a matmul in another precision: mixed, nothing to time
            return
        self._count(func, args, kwargs, (), out, weight)

    def _weight(self) -> float | None:
        """How many calls this one stands for if the sample keeps it (RECORDED), else None."""
        if self.chance < 1.0 and self._draw() >= self.chance:
            return None
        weight = 1.0 / self.chance
        self.kept += 1
        if self.kept % RECORDED == 0:
            self.chance /= 2
        return weight

    def _count(
        self,
        func: Any,
        args: Any,
        kwargs: dict[str, Any],
        casts: tuple[bool, ...],
        out: Any,
        weight: float,
    ) -> None:
        key = (func, spec_of(args), tuple(sorted(spec_of(kwargs).items())), casts)
        try:
            entry = self.calls.get(key)
        except TypeError:  # an argument that cannot be a key: the call is not timed
            return
        if entry is None:
            self.calls[key] = [weight, self._flops(func._overloadpacket, args, kwargs, out)]
        else:
            entry[0] += weight

    def _flops(self, packet: Any, args: Any, kwargs: Any, out: Any) -> int:
        formula = self.registry.get(packet)
        if formula is None:
            return 0
        try:
            return int(formula(*args, **kwargs, out_val=out))
        except Exception:  # a formula that cannot read these arguments counts nothing
            return 0


@dataclass(frozen=True)
class Timed:
    """One signature's time per step in each precision."""

    high_s: float  # in the model's precision
    low_s: float  # in the lower one
    cast_s: float  # the casts autocast adds in front of it, forward and backward


def _time_call(key: tuple[Any, ...], device: torch.device, low: torch.dtype) -> Timed:
    func, args, kwargs, casts = key
    kw = dict(kwargs)

    def call(dtype: torch.dtype | None) -> Callable[[], Any]:
        built_args = build(args, dtype, device)
        built_kw = {k: build(v, dtype, device) for k, v in kw.items()}
        return lambda: func(*built_args, **built_kw)

    with torch.no_grad():
        high_s = per_call(call(None), device)
        low_s = per_call(call(low), device)
        cast_s = 0.0
        floats = [
            s
            for s in leaves(args, Spec) + leaves(tuple(kw.values()), Spec)
            if s.dtype.is_floating_point
        ]
        for spec, cast in zip(floats, casts, strict=False):
            if cast:
                cast_s += 2 * per_call(partial(build(spec, None, device).to, low), device)
    return Timed(high_s, low_s, cast_s)


def estimate(
    calls: ComputeCalls | None, device: torch.device, step_s: float
) -> dict[str, Any] | None:
    """Time the step's lowered calls in float32 and in bf16 (with their casts), the heaviest
    first, and scale the saving to the FLOPs not timed. None when nothing was recorded.

    The timing stops early once bf16 has lost more than a whole step on the calls timed: the
    calls left could not win that back (they take less than the step in float32)."""
    if calls is None or calls.skipped or not calls.calls or calls.source not in TARGET:
        return None
    low = TARGET[calls.source]
    # A float32 model's saving is in its matmuls: the heaviest by FLOPs first, and the share
    # timed is of FLOPs. A float64 model's is in every op: the most frequent first, by calls, and
    # all of them within the budget (a rare heavy op among frequent small ones would be left out
    # of the COVER share, and the calls left are taken to save as the timed ones do).
    by_calls = calls.source == torch.float64
    cover = 1.0 if by_calls else COVER

    def weight(count: float, flops: float) -> float:
        return float(count if by_calls else count * flops)

    ranked = sorted(calls.calls.items(), key=lambda kv: weight(*kv[1]), reverse=True)
    total_flops = sum(weight(n, f) for n, f in calls.calls.values())
    covered = high_s = low_s = cast_s = 0.0
    timed = failed = 0
    deadline = time.perf_counter() + BUDGET_S
    for key, (count, flops) in ranked:
        if time.perf_counter() > deadline or (total_flops and covered / total_flops >= cover):
            break
        if high_s - low_s - cast_s < -step_s:
            break
        try:
            t = _time_call(key, device, low)
        except Exception:  # a call that cannot be rebuilt (or has no bf16 kernel) is left out
            failed += 1
            continue
        timed += 1
        covered += weight(count, flops)
        high_s += count * t.high_s
        low_s += count * t.low_s
        cast_s += count * t.cast_s
    share = covered / total_flops if total_flops else (1.0 if timed == len(ranked) else 0.0)
    twins: list[dict[str, Any]] = []
    if by_calls and timed and high_s > 0 and calls.recurrent.seen:
        # A recurrent module's float32 twin runs another kernel (rnn_twin.py): its replayed ops
        # come out of the float32 side, at the replay's own ratio, and the twin's time goes in.
        try:
            twins = time_twins(calls.recurrent, device)
        except Exception:  # a module that cannot be copied or run alone: the replay stands
            twins = []
        ratio = low_s / high_s
        replayed = sum(t["calls"] * t["float64_s"] for t in twins) * ratio
        low_s = max(0.0, low_s - replayed) + sum(t["calls"] * t["float32_s"] for t in twins)
    out: dict[str, Any] = {
        "basis": "this model's own calls, timed in both precisions",
        "from": str(calls.source).removeprefix("torch."),
        "to": str(low).removeprefix("torch."),
        "signatures": len(ranked),
        "timed": timed,
        "failed": failed,
        "flops_share_timed": share,
        "share_of": "calls" if by_calls else "FLOPs",
        # the calls timed, as they are: the float32 side can be set against the measured
        # forward and backward time
        "from_timed_s": high_s,
        "to_timed_s": low_s,
        "cast_timed_s": cast_s,
        "saved_s": None,
        "speedup": high_s / (low_s + cast_s) if timed and low_s else None,
        "recurrent_twins": twins,
    }
    if not timed:
        out["note"] = "no call could be timed"
    elif high_s - low_s - cast_s < -step_s:
        out["saved_s"] = high_s - low_s - cast_s  # a loss the rest cannot make up
        out["note"] = f"{out['to']} lost more than a whole step on the calls timed"
    elif share < MIN_COVERED:
        out["note"] = f"only {share:.0%} of the step's {out['share_of']} could be timed"
    else:  # the calls not timed are taken to gain as the timed ones do, FLOP for FLOP
        out["saved_s"] = (high_s - low_s - cast_s) / share
    return out
