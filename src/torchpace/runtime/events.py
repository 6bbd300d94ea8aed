"""Training events that more than one runtime watches (the doctor's instruments, the plan
interposer, the script trial, the tune's and compare's workers), each patched in one place."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import torch

from torchpace.runtime.patching import Patches

Args = tuple[Any, ...]
Kwargs = dict[str, Any]


def on_scaler_update(patches: Patches, callback: Callable[[], None]) -> None:
    """Call ``callback`` after every ``GradScaler.update()`` until ``patches`` are undone. An
    fp16 step ends at its scaler's update, the one it skipped (overflow, no optimizer step)
    included: a tune trial's clock and a script trial's step counter both stamp it there."""
    update = torch.amp.GradScaler.update

    def counted_update(self: Any, new_scale: Any = None) -> None:
        update(self, new_scale)
        callback()

    patches.set(torch.amp.GradScaler, "update", counted_update)


def on_optimizer_built(patches: Patches, callback: Callable[[torch.optim.Optimizer], None]) -> None:
    """Call ``callback(optimizer)`` after every optimizer's ``__init__`` until ``patches`` are
    undone (subclasses included: they call ``Optimizer.__init__``)."""
    init = torch.optim.Optimizer.__init__

    def __init__(self: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        callback(self)

    patches.set(torch.optim.Optimizer, "__init__", __init__)


def on_backward(
    patches: Patches,
    before: Callable[[torch.Tensor | None, bool, Args, Kwargs], tuple[Args, Kwargs]],
    after: Callable[[], None],
    done: Callable[[], None] = lambda: None,
) -> None:
    """Around every top-level ``backward()`` on the thread that calls this, until ``patches``
    are undone. ``Tensor.backward`` calls ``torch.autograd.backward``: one backward, seen once.

    ``before(tensor, method, args, kwargs)`` gets the tensor differentiated (the loss, or None)
    and whether it was called as ``Tensor.backward``, and returns the arguments to call it with;
    ``done()`` runs once it has returned or raised, ``after()`` once it has returned."""
    main = threading.get_ident()
    state = {"inside": False}

    def wrap(original: Callable[..., Any], method: bool) -> Callable[..., Any]:
        @functools.wraps(original)
        def backward(*args: Any, **kwargs: Any) -> Any:
            if state["inside"] or threading.get_ident() != main:
                return original(*args, **kwargs)
            state["inside"] = True
            try:
                tensor = args[0] if args else kwargs.get("tensors", kwargs.get("self"))
                loss = tensor if isinstance(tensor, torch.Tensor) else None
                args, kwargs = before(loss, method, args, kwargs)
            except BaseException:
                state["inside"] = False
                raise
            try:
                out = original(*args, **kwargs)
            finally:
                state["inside"] = False
                done()
            after()
            return out

        return backward

    patches.set(torch.Tensor, "backward", wrap(torch.Tensor.backward, True))
    patches.set(torch.autograd, "backward", wrap(torch.autograd.backward, False))
