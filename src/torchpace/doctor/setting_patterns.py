"""Patterns about settings in effect: what the run shows is off, with no gain the measurement
can estimate (``torchpace tune`` measures those)."""

from __future__ import annotations

from torchpace.doctor.evidence import Evidence, RuntimeFinding
from torchpace.doctor.sites import Site


def _setting(
    pattern: str, technique: str, message: str, fix: str, site: Site | None
) -> list[RuntimeFinding]:
    return [RuntimeFinding(pattern, technique, "moderate", message, fix, site, None)]


def channels_last_match(ev: Evidence) -> list[RuntimeFinding]:
    s = ev.settings
    fast_conv = bool(s.autocast) or ev.device == "cuda"
    # Only when a 4-D input was seen and it was channels-first (None: no 4-D input seen).
    if not (s.conv_model and fast_conv) or s.channels_last_input is not False:
        return []
    if s.channels_last_hazard:  # a convolution the format breaks on this device
        return []
    return _setting(
        "channels-first-convs",
        "channels-last",
        "convolutions run on NCHW (channels-first) inputs",
        "model.to(memory_format=torch.channels_last) and the same for each input batch",
        ev.forward_site,
    )


def cudnn_match(ev: Evidence) -> list[RuntimeFinding]:
    s = ev.settings
    if ev.device != "cuda" or not s.conv_model or s.cudnn_benchmark:
        return []
    return _setting(
        "cudnn-autotuner-off",
        "cudnn-benchmark",
        "torch.backends.cudnn.benchmark is off in a convolutional model",
        "torch.backends.cudnn.benchmark = True (when input shapes do not change)",
        ev.forward_site,
    )


def anomaly_match(ev: Evidence) -> list[RuntimeFinding]:
    if not ev.settings.anomaly_detection:
        return []
    return _setting(
        "anomaly-detection-on",
        "disable-debug-apis",
        "autograd anomaly detection is on: every backward op is checked and its stack kept",
        "remove torch.autograd.set_detect_anomaly(True) outside debugging",
        None,
    )


def dp_match(ev: Evidence) -> list[RuntimeFinding]:
    if not ev.settings.data_parallel:
        return []
    return _setting(
        "data-parallel",
        "ddp-not-dp",
        "nn.DataParallel runs one process and copies the model to every GPU each step",
        "DistributedDataParallel under torchrun, one process per GPU",
        ev.forward_site,
    )


def alloc_match(ev: Evidence) -> list[RuntimeFinding]:
    retries = ev.alloc_retries
    if not retries:
        return []
    return _setting(
        "allocator-retries",
        "fixed-shapes",
        f"the CUDA allocator freed its cache and retried {retries} times: memory is fragmented",
        "keep shapes fixed (or preallocate at the worst case), or lower the batch size",
        ev.forward_site,
    )
