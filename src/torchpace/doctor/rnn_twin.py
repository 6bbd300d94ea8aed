"""A float64 recurrent module's float32 twin runs another kernel, so replaying its ops cannot
tell what float32 saves: the module itself is timed in both precisions instead.

On a CPU, ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` in float32 run oneDNN's fused layer
(``mkldnn_rnn_layer``); in float64 they run one small op per time step. Replaying the float64
ops in float32 promised 1.42x on an LSTM that measured 4.43x in float32
(``benchmarks/float64_estimate.py``). The probe step notes each float64 recurrent module it runs
and the shapes of its arguments. After the run, a float64 and a float32 copy of each run forward
and backward on fresh tensors of those shapes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from torch import nn

from torchpace.doctor.replay import build, per_call, spec_of


@dataclass
class Seen:
    """One recurrent module of the probe step: its arguments' specs and how often it ran."""

    module: nn.Module
    args: tuple[Any, ...]
    input_grad: bool
    calls: int = 0


@dataclass
class RecurrentModules:
    """The float64 recurrent modules the probe step ran, fed by a global forward pre-hook."""

    seen: dict[int, Seen] = field(default_factory=dict)

    def observe(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if not isinstance(module, nn.RNNBase) or not args:
            return
        if not isinstance(args[0], torch.Tensor) or args[0].dtype != torch.float64:
            return  # a PackedSequence, or not float64: nothing to time here
        entry = self.seen.get(id(module))
        if entry is None:
            entry = self.seen[id(module)] = Seen(module, spec_of(args), args[0].requires_grad)
        entry.calls += 1


def _forward_backward(module: nn.Module, args: list[Any]) -> None:
    out = module(*args)
    first = out[0] if isinstance(out, tuple) else out
    first.sum().backward()


def time_twins(modules: RecurrentModules, device: torch.device) -> list[dict[str, Any]]:
    """Each module's forward and backward, per call, as it is and as its float32 copy."""
    out = []
    for entry in modules.seen.values():
        times = {}
        for name, dtype in (("float64_s", torch.float64), ("float32_s", torch.float32)):
            twin = copy.deepcopy(entry.module).to(dtype)
            # hx comes back a list from build(); the module takes it as a tuple
            built = build(entry.args, dtype, device)
            args: list[Any] = [tuple(a) if isinstance(a, list) else a for a in built]
            if entry.input_grad:
                args[0].requires_grad_(True)
            times[name] = per_call(partial(_forward_backward, twin, args), device)
        out.append({"module": type(entry.module).__name__, "calls": entry.calls, **times})
    return out
