"""Training events that more than one runtime watches, each patched in one place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torchpace.runtime.patching import Patches


def on_scaler_update(patches: Patches, callback: Callable[[], None]) -> None:
    """Call ``callback`` after every ``GradScaler.update()`` until ``patches`` are undone. An
    fp16 step ends at its scaler's update, the one it skipped (overflow, no optimizer step)
    included: a tune trial's clock and a script trial's step counter both stamp it there."""
    update = torch.amp.GradScaler.update

    def counted_update(self: Any, new_scale: Any = None) -> None:
        update(self, new_scale)
        callback()

    patches.set(torch.amp.GradScaler, "update", counted_update)
