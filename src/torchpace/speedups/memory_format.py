"""channels_last: keep a conv net's activations in NHWC, the layout oneDNN and cuDNN prefer.

The model's 4-d weights are converted here; its inputs are converted where batches reach the
device (``to_device(..., channels_last=True)`` or ``DevicePrefetcher(..., channels_last=True)``).
"""

from __future__ import annotations

import torch
from torch import nn

from torchpace.speedups.applied import Applied, done, skipped

TECHNIQUE = "channels-last"

# oneDNN, which computes torch's CPU convolutions, gets the weight gradient of a 1x1 convolution
# with a stride wrong in channels_last when it has fewer input channels (per group) than its
# channel block (8 with AVX2, 16 with AVX-512), and crashes with one thread or hangs
# (uxlfoundation/oneDNN#6035). Seen with torch 2.13.0+cpu on an AVX2 EPYC: 3-29% off with two
# threads for 2-7 channels, SIGSEGV with one (tests/speedups/test_channels_last_hazard.py). The
# block is taken as 16 on every CPU: torch's own dispatch level does not say which one oneDNN
# runs (ATEN_CPU_CAPABILITY and ONEDNN_MAX_CPU_ISA set them apart).
ONEDNN_CHANNEL_BLOCK = 16

ALREADY = "already channels_last"


def channels_last_hazard(model: nn.Module) -> str | None:
    """Why channels_last must not be used on ``model`` here (a CPU convolution that oneDNN gets
    wrong in that format), or None. Such a model keeps its layout and its inputs theirs."""
    if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled):
        return None
    for name, m in model.named_modules():
        if not isinstance(m, nn.Conv2d) or m.weight.device.type != "cpu":
            continue
        per_group = m.in_channels // m.groups
        if (
            tuple(m.kernel_size) == (1, 1)
            and tuple(m.stride) != (1, 1)
            and per_group < ONEDNN_CHANNEL_BLOCK
            and m.weight.requires_grad
        ):
            return (
                f"{name or type(m).__name__} is a 1x1 convolution with stride "
                f"{tuple(m.stride)} and {per_group} input channels, whose weight gradient oneDNN "
                "computes wrong in channels_last on a CPU (and crashes with one thread: "
                "uxlfoundation/oneDNN#6035)"
            )
    return None


def use_channels_last(model: nn.Module) -> Applied:
    """Convert ``model`` in place to channels_last; a no-op for a model with no 2-d convolutions
    (the format only pays off where convolutions consume it; elsewhere it adds conversions) and
    for one with a convolution the format breaks on this device (``channels_last_hazard``): the
    caller then leaves the inputs as they are too (``in_effect``). Call it once the model is on
    its device: the hazard is a CPU one."""
    convs = [name for name, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    if not convs:
        return skipped(TECHNIQUE, "the model has no Conv2d layers; channels_last would not help")
    already = all(
        p.is_contiguous(memory_format=torch.channels_last)
        for p in model.parameters()
        if p.ndim == 4
    )
    hazard = channels_last_hazard(model)
    if (
        hazard is not None
        and already
        and any(not p.is_contiguous() for p in model.parameters() if p.ndim == 4)
    ):
        # The model came in channels_last: it is in the layout that breaks, not kept out of it.
        return skipped(
            TECHNIQUE,
            hazard + "; the model is already in channels_last: "
            "model.to(memory_format=torch.contiguous_format) puts it back",
        )
    if hazard is not None:
        return skipped(
            TECHNIQUE,
            hazard + "; the model keeps its layout, and its inputs must keep theirs (a "
            "channels_last input alone makes oneDNN use the format)",
        )
    if already:
        return done(TECHNIQUE, [], reason=ALREADY)
    # memory_format is a documented keyword of Module.to that torch's type stubs omit.
    model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    return done(TECHNIQUE, [f"{len(convs)} Conv2d layers' weights to channels_last"])


def in_effect(record: Applied) -> bool:
    """Whether the model is in channels_last after ``use_channels_last`` returned ``record``, so
    that its inputs are to be converted too."""
    return record.changed or record.reason == ALREADY
