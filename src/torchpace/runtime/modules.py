"""What torchpace leaves on a script's modules while it runs stays out of what the script saves
or copies. The doctor and the plan interposer hook the model's forward (``register_forward_*``),
and a compile plan compiles its forward in place: all of it lives in the module's ``__dict__``,
which ``torch.save(model)``, ``pickle`` and ``copy.deepcopy(model)`` (an EMA copy) take whole. A
script that saved its whole model then failed under ``compare`` (pytorch/examples'
word_language_model: "Can't pickle <function DataLoader.__init__>", reached from the
interposer's hook through its patches), or would have written torchpace's objects into the
user's checkpoint.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from torch import nn

from torchpace.runtime.patching import Patches
from torchpace.speedups.compile import COMPILED_HERE

_HOOKS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
# Keyed by the same handle ids as the hooks above.
_BY_ID = (
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
)


def ours(hook: Any) -> bool:
    """A hook torchpace registered: a function or bound method defined in a torchpace module."""
    fn = getattr(hook, "__func__", hook)
    return str(getattr(fn, "__module__", None) or "").startswith("torchpace.")


def module_state(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` (a copy of a module's ``__dict__``, as ``Module.__getstate__`` returns) without
    torchpace's hooks and in-place compiled forward; the dicts it changes are new ones."""
    dropped: set[int] = set()
    for key in _HOOKS:
        hooks = state.get(key)
        if hooks and any(ours(h) for h in hooks.values()):
            mine = {k for k, h in hooks.items() if ours(h)}
            state[key] = OrderedDict((k, h) for k, h in hooks.items() if k not in mine)
            dropped |= mine
    for key in _BY_ID:
        ids = state.get(key)
        if dropped and ids and dropped & ids.keys():
            state[key] = OrderedDict((k, v) for k, v in ids.items() if k not in dropped)
    if getattr(state.get("forward"), COMPILED_HERE, False):
        del state["forward"]  # the class's forward, as before the plan compiled it
    return state


def keep_out_of_saves(patches: Patches) -> None:
    """Until ``patches`` are undone, a module pickles and deep-copies without what torchpace put
    on it (:func:`module_state`)."""
    getstate = nn.Module.__getstate__

    def __getstate__(self: nn.Module) -> dict[str, Any]:
        return module_state(getstate(self))

    patches.set(nn.Module, "__getstate__", __getstate__)
