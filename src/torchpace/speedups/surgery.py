"""Model surgery that keeps what a model computes: fold a convolution's bias into its BatchNorm.

A convolution whose output goes only into a BatchNorm does not need its bias. Per channel ``c``
the folded model sees ``x_c - b_c`` where the original saw ``x_c``:

- train mode: BatchNorm subtracts the batch mean, which shifts by the same ``b_c``, so the
  output is unchanged; the batch variance is shift-invariant, so ``running_var`` is too.
- running statistics: shifting ``running_mean`` by ``-b_c`` once keeps it exactly ``b_c`` below
  the original's for good, because every update is an affine average whose weights sum to one:
  ``(1 - m) * rm + m * mean`` with a momentum, or ``rm + (mean - rm) / n`` with ``momentum=None``
  (the cumulative average).
- eval mode: ``x_c - b_c - (rm_c - b_c) = x_c - rm_c``, so the output is unchanged.
- ``track_running_stats=False`` with no buffers: batch statistics in both modes, nothing to
  shift. With buffers kept but tracking turned off, eval mode still reads them, so they are
  shifted whenever they exist.

Edges are found by ``torch.fx`` symbolic tracing of ``model.forward``; a model that cannot be
traced falls back to a convolution immediately followed by a BatchNorm inside ``nn.Sequential``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import pairwise

import torch
from torch import fx, nn
from torch.nn.modules.lazy import LazyModuleMixin

from torchpace.speedups.applied import Applied, done

TECHNIQUE = "conv-bias-before-bn"

_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
# BatchNorm1d/2d/3d share _BatchNorm.forward; SyncBatchNorm subtracts the (global) batch mean too.
_BN_FORWARDS = frozenset({nn.BatchNorm1d.forward, nn.SyncBatchNorm.forward})
_BNS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


@dataclass(frozen=True)
class _Pair:
    conv_name: str
    conv: nn.Module
    bn_name: str
    bn: nn.Module


def fold_conv_bias(model: nn.Module) -> Applied:
    """Remove the bias of every Conv1d/2d/3d that feeds only a BatchNorm; shift that BN to match.

    Outputs stay the same in train and eval mode, up to float rounding. The removed biases leave
    ``model.parameters()``, so build the optimizer after this call (a removed bias left in an
    optimizer gets no gradient and is skipped, but its state is wasted memory), and note that
    the ``state_dict`` no longer has those keys. Only ``model.forward`` is traced: a conv that
    is also called from another method is not seen there.
    """
    pairs, fallback_reason = _find_pairs(model)
    changes: list[str] = []
    for pair in pairs:
        where = _fold(pair)
        changes.append(f"{pair.conv_name} -> {pair.bn_name}: conv bias {where}")
    if changes:
        return done(TECHNIQUE, changes, reason=fallback_reason)
    # Not a mistake (the model may be folded already, or have no such pair): no warning.
    reasons = ["no convolution with a bias feeds only a BatchNorm", fallback_reason]
    return done(TECHNIQUE, [], reason="; ".join(r for r in reasons if r))


def _find_pairs(model: nn.Module) -> tuple[list[_Pair], str]:
    try:
        graph = _LeafTracer().trace(model)
    except Exception as exc:  # tracing runs user code: any error means "cannot trace"
        reason = (
            f"torch.fx could not trace the model ({type(exc).__name__}: {_first_line(exc)}); "
            "folded only convolutions directly followed by a BatchNorm inside nn.Sequential"
        )
        return _sequential_pairs(model), reason
    return _traced_pairs(model, graph), ""


class _LeafTracer(fx.Tracer):
    """Keeps convolutions and BatchNorms (user subclasses with stock forwards too) as leaves."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return _is_conv(m) or _is_bn(m) or super().is_leaf_module(m, module_qualified_name)


def _traced_pairs(model: nn.Module, graph: fx.Graph) -> list[_Pair]:
    modules = dict(model.named_modules())
    calls: Counter[int] = Counter()  # call sites per module object (a shared module counts once)
    touched: set[str] = set()  # modules whose tensors forward reads directly (get_attr)
    for node in graph.nodes:
        if node.op == "call_module":
            calls[id(modules[str(node.target)])] += 1
        elif node.op == "get_attr":
            touched.add(str(node.target).rpartition(".")[0])
    pairs = []
    for node in graph.nodes:
        if node.op != "call_module":
            continue
        conv_name = str(node.target)
        conv = modules[conv_name]
        if not _is_conv(conv) or calls[id(conv)] != 1 or len(node.users) != 1:
            continue
        (user,) = node.users
        if user.op != "call_module" or user.args != (node,) or user.kwargs:
            continue
        bn_name = str(user.target)
        bn = modules[bn_name]
        if not _is_bn(bn) or calls[id(bn)] != 1 or {conv_name, bn_name} & touched:
            continue
        if _foldable(conv, bn):
            pairs.append(_Pair(conv_name, conv, bn_name, bn))
    return pairs


def _sequential_pairs(model: nn.Module) -> list[_Pair]:
    # Without a graph, a module listed twice (shared) may run twice: leave those alone.
    seen = Counter(id(m) for _, m in model.named_modules(remove_duplicate=False))
    pairs = []
    for seq_name, seq in model.named_modules():
        if not isinstance(seq, nn.Sequential) or type(seq).forward is not nn.Sequential.forward:
            continue
        if "forward" in vars(seq):
            continue
        children = list(seq.named_children())
        for (c_name, conv), (b_name, bn) in pairwise(children):
            if not (_is_conv(conv) and _is_bn(bn)) or seen[id(conv)] + seen[id(bn)] != 2:
                continue
            if _foldable(conv, bn):
                prefix = f"{seq_name}." if seq_name else ""
                pairs.append(_Pair(prefix + c_name, conv, prefix + b_name, bn))
    return pairs


def _is_conv(m: nn.Module) -> bool:
    # A subclass with its own forward (weight standardisation, say) may not add the bias last.
    return (
        isinstance(m, _CONVS)
        and any(type(m).forward is c.forward for c in _CONVS)
        and "forward" not in vars(m)
    )


def _is_bn(m: nn.Module) -> bool:
    return isinstance(m, _BNS) and type(m).forward in _BN_FORWARDS and "forward" not in vars(m)


def _foldable(conv: nn.Module, bn: nn.Module) -> bool:
    if isinstance(conv, LazyModuleMixin) and conv.has_uninitialized_params():
        return False
    if isinstance(bn, LazyModuleMixin) and bn.has_uninitialized_params():
        return False
    bias = getattr(conv, "bias", None)
    if not isinstance(bias, torch.Tensor) or bias.shape != (getattr(bn, "num_features", -1),):
        return False
    # A forward hook on the conv or a pre-hook on the BN would see the biased tensor change.
    return not (conv._forward_hooks or bn._forward_pre_hooks)


def _fold(pair: _Pair) -> str:
    bias = pair.conv.bias
    assert isinstance(bias, torch.Tensor)  # checked by _foldable
    running_mean = getattr(pair.bn, "running_mean", None)
    pair.conv.register_parameter("bias", None)
    if not isinstance(running_mean, torch.Tensor):
        return "removed (the BatchNorm keeps no running mean)"
    with torch.no_grad():
        running_mean.sub_(bias.detach().to(running_mean.device, running_mean.dtype))
    return "folded into running_mean"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else "no message"  # 160: keep the reason one readable line
