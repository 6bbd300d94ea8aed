"""Compute techniques: attention, modules, cuDNN, compile, memory format, conv bias, sizes,
syncs, tensors made on the device."""

from __future__ import annotations

from torchpace.techniques.facets import Facets, Fit, Hand, No, Planned, Trial, Via

_SOURCE_ONLY = "a change to the user's code, not a setting a plan holds"

ENTRIES: tuple[Facets, ...] = (
    Facets(
        "attention-backend",
        verb="use_attention_backend",
        doctor=No("attention kernels are not timed apart from the rest of the forward"),
        lint=No("which SDPA backend is fastest depends on the device and shapes: it is tried"),
        plan=Planned(
            script=True,
            edit=Hand("the backend is chosen around the forward, with sdpa_kernel"),
            tune=Trial(4),
        ),
    ),
    Facets(
        "sdpa-attention",
        verb=No("rewriting attention into F.scaled_dot_product_attention is a source change"),
        doctor=No("at run time hand-written attention is matmuls and a softmax like others"),
        lint=True,
        plan=No(_SOURCE_ONLY + " (lint's TP307 fix makes it)"),
    ),
    Facets(
        "modules-built-once",
        verb=No("a source change: build the module once, in __init__"),
        doctor=No("a module built in forward() is found in the source, by lint"),
        lint=True,
        plan=No(_SOURCE_ONLY),
    ),
    Facets(
        "cudnn-benchmark",
        verb="set_fast_math",
        doctor=True,
        lint=True,
        plan=Via("tf32"),  # set_fast_math turns on cudnn.benchmark on CUDA
    ),
    Facets(
        "torch-compile",
        verb="compile_model",
        doctor=No("what compiling gains is measured by trying it: the tune's compile trial"),
        lint=True,
        plan=Planned(script=True, edit=True, tune=Trial(9)),
    ),
    Facets(
        "channels-last",
        verb="use_channels_last",
        doctor=True,
        lint=No("whether a conv net gains depends on its layers and device, seen at run time"),
        plan=Planned(script=True, edit=True, tune=Trial(5)),
    ),
    Facets(
        "conv-bias-before-bn",
        verb="fold_conv_bias",
        doctor=No("a conv bias before BatchNorm is found in the source, by lint"),
        lint=True,
        plan=Planned(
            script=True,
            edit=Hand("which convolutions feed only a BatchNorm is known from the built model"),
            tune=Trial(7),
        ),
    ),
    Facets(
        "sizes-multiple-of-8",
        verb=No("a model's sizes are its design, chosen by the user"),
        doctor=No("Tensor Core shapes are a CUDA matter the doctor does not time apart"),
        lint=True,
        plan=No("a plan does not change a model's sizes"),
    ),
    Facets(
        "avoid-syncs",
        verb=No("reading values only at a cadence is a change to the loop"),
        doctor=True,
        lint=True,
        plan=Fit("fit() reads losses every log_every steps; a script keeps its own cadence"),
    ),
    Facets(
        "create-on-device",
        verb=No("a source change: pass device= to the factory"),
        doctor=No("a tensor made on the host and copied is found in the source, by lint"),
        lint=True,
        plan=No(_SOURCE_ONLY),
    ),
)
