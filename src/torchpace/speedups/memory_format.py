"""channels_last: keep a conv net's activations in NHWC, the layout oneDNN and cuDNN prefer.

The model's 4-d weights are converted here; its inputs are converted where batches reach the
device (``to_device(..., channels_last=True)`` or ``DevicePrefetcher(..., channels_last=True)``).
"""

from __future__ import annotations

import torch
from torch import nn

from torchpace.speedups.applied import Applied, done, skipped

TECHNIQUE = "channels-last"


def use_channels_last(model: nn.Module) -> Applied:
    """Convert ``model`` in place to channels_last; a no-op for a model with no 2-d convolutions
    (the format only pays off where convolutions consume it; elsewhere it adds conversions)."""
    convs = [name for name, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    if not convs:
        return skipped(TECHNIQUE, "the model has no Conv2d layers; channels_last would not help")
    already = all(
        p.is_contiguous(memory_format=torch.channels_last)
        for p in model.parameters()
        if p.ndim == 4
    )
    if already:
        return done(TECHNIQUE, [], reason="already channels_last")
    # memory_format is a documented keyword of Module.to that torch's type stubs omit.
    model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    return done(TECHNIQUE, [f"{len(convs)} Conv2d layers' weights to channels_last"])
