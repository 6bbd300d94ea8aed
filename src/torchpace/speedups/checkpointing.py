"""Activation checkpointing: chosen submodules keep only their inputs and recompute in backward.

The wrapping replaces the instance's ``forward`` (the class and the ``state_dict`` keys stay as
they were) with one that runs the original under ``torch.utils.checkpoint.checkpoint`` in its
non-reentrant form, which supports keyword arguments, inputs that do not require grad, and
nesting. With grad disabled (``torch.no_grad``, ``torch.inference_mode``) it calls straight
through: no backward will come, so there is nothing to save or recompute.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import MethodType
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from torchpace.speedups.applied import Applied, done, skipped

TECHNIQUE = "activation-checkpointing"

# The instance attribute holding the forward that was there before wrapping (a bound method,
# so that copy.deepcopy rebinds it to the copy rather than calling back into the original).
_ORIGINAL = "_torchpace_unwrapped_forward"
# Norms that update running statistics in forward (training mode, track_running_stats=True).
_RUNNING_STAT_NORMS = (
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.SyncBatchNorm,
    nn.InstanceNorm1d,
    nn.InstanceNorm2d,
    nn.InstanceNorm3d,
)


def checkpoint_activations(
    model: nn.Module, *, filter_fn: Callable[[str, nn.Module], bool]
) -> Applied:
    """Checkpoint each submodule of ``model`` (itself included, named ``""``) that ``filter_fn``
    selects, e.g. ``filter_fn=lambda name, m: isinstance(m, nn.TransformerEncoderLayer)``.

    A selected module inside one already checkpointed is left alone (its ancestor's recompute
    covers it); one already checkpointed by an earlier call is not wrapped again, and one that
    an ancestor now covers is unwrapped. A filter that selects nothing warns: that is most likely
    a mistake in the filter. Undo with ``remove_activation_checkpointing``.
    """
    selected = [name for name, m in model.named_modules() if filter_fn(name, m)]
    if not selected:
        return skipped(TECHNIQUE, "filter_fn selected no submodule; check what it tests for")
    # Ancestors first (named_modules is pre-order), so a descendant sees its ancestor covered.
    covered: list[str] = [n for n, m in model.named_modules() if is_checkpointed(m)]
    changes: list[str] = []
    for name in selected:
        if any(_inside(name, a) for a in covered):
            continue
        module = model.get_submodule(name)
        if not is_checkpointed(module):
            _wrap(module)
            changes.append(f"{name or '<model>'}: checkpointed ({type(module).__name__})")
        covered.append(name)
        for inner_name, inner in module.named_modules(prefix=name):
            if inner is not module and is_checkpointed(inner):
                _unwrap(inner)
                changes.append(f"{inner_name}: unwrapped, now recomputed inside {name}")
    if not changes:
        return done(TECHNIQUE, [], reason="every selected submodule is already checkpointed")
    return done(TECHNIQUE, changes, reason=_side_effects_note(model))


def remove_activation_checkpointing(model: nn.Module) -> Applied:
    """Restore the forward of every submodule that ``checkpoint_activations`` wrapped."""
    changes = []
    for name, module in model.named_modules():
        if is_checkpointed(module):
            _unwrap(module)
            changes.append(f"{name or '<model>'}: checkpointing removed")
    return done(TECHNIQUE, changes, reason="" if changes else "nothing was checkpointed")


def is_checkpointed(module: nn.Module) -> bool:
    return _ORIGINAL in vars(module)


def _checkpointed_forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
    inner = vars(self)[_ORIGINAL]
    if not torch.is_grad_enabled():
        return inner(*args, **kwargs)
    # use_reentrant=False: the form torch recommends; it is correct when no input requires grad
    # (the reentrant form would then drop the parameters' grads) and lets tensors reach the
    # function other than as positional inputs. kwargs go in through partial so that a forward
    # keyword named like one of checkpoint's own (debug, context_fn, ...) is not taken by it.
    return checkpoint(partial(inner, **kwargs), *args, use_reentrant=False)


def _wrap(module: nn.Module) -> None:
    # Keep whatever forward the instance had: its class's, or one set on it by someone else.
    vars(module)[_ORIGINAL] = module.forward
    vars(module)["forward"] = MethodType(_checkpointed_forward, module)


def _unwrap(module: nn.Module) -> None:
    original = vars(module).pop(_ORIGINAL)
    if isinstance(original, MethodType) and original.__func__ is type(module).forward:
        vars(module).pop("forward", None)  # back to the class's forward
    else:
        vars(module)["forward"] = original


def _inside(name: str, ancestor: str) -> bool:
    return name != ancestor and (ancestor == "" or name.startswith(ancestor + "."))


def _side_effects_note(model: nn.Module) -> str:
    # The recompute runs forward a second time: a norm with running statistics inside a
    # checkpointed module updates them twice per training step (the catalogue's "hurts when").
    twice = sorted(
        {
            name
            for name, m in model.named_modules()
            if is_checkpointed(m)
            for inner in m.modules()
            if isinstance(inner, _RUNNING_STAT_NORMS) and inner.track_running_stats
        }
    )
    if not twice:
        return ""
    return (
        f"in training mode, the norms inside {', '.join(twice)} update their running statistics "
        "again when backward recomputes the forward"
    )
