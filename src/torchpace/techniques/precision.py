"""Precision and optimizer techniques: autocast, float32, TF32, AdamW, fused kernels,
set_to_none."""

from __future__ import annotations

from torchpace.techniques.facets import Facets, Hand, No, Planned, Search, Trial

ENTRIES: tuple[Facets, ...] = (
    Facets(
        "amp-fp16",
        verb="autocast",
        doctor=No("the float32-compute finding proposes bf16, which needs no loss scaling"),
        lint=True,
        plan=Planned(
            script=True,
            edit=Hand("fp16 needs a GradScaler around the script's backward and step"),
            tune=Trial(3),
        ),
    ),
    Facets(
        "amp-bf16",
        verb="autocast",
        doctor=True,
        lint=True,
        plan=Planned(script=True, edit=True, tune=Trial(2)),
    ),
    Facets(
        "float32-not-float64",
        verb=No("a float64 model becomes float32 with the user's own .float() on model and data"),
        doctor=True,
        lint=No("the dtype a model trains in is seen from its parameters at run time"),
        plan=No("a plan does not change the dtype the user chose for the model"),
    ),
    Facets(
        "tf32",
        verb="set_fast_math",
        doctor=No("float32 matmul time is reported by the float32-compute finding"),
        lint=True,
        plan=Planned(script=True, edit=True, tune=Trial(8)),
    ),
    Facets(
        "adamw",
        verb=No("the optimizer is the user's choice; make_optimizer builds a fused one by name"),
        doctor=No("which optimizer converges best is not a speed measurement"),
        lint=True,
        plan=No("a plan does not change the user's optimizer"),
    ),
    Facets(
        "fused-optimizer",
        verb="fuse_optimizer",
        doctor=True,
        lint=True,
        plan=Planned(script=True, edit=True, tune=Trial(6)),
    ),
    Facets(
        "grad-set-to-none",
        verb=No("one argument: optimizer.zero_grad(set_to_none=True)"),
        doctor=No("a memset per step is too small to tell apart at run time"),
        lint=True,
        plan=Planned(
            script=True,
            edit=True,
            tune=Search("tried after the candidates where lint finds set_to_none=False"),
        ),
    ),
)
