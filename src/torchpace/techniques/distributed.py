"""Distributed training and schedule techniques."""

from __future__ import annotations

from torchpace.techniques.facets import Facets, No, Planned

ENTRIES: tuple[Facets, ...] = (
    Facets(
        "ddp-not-dp",
        verb=No("DistributedDataParallel changes how the script is launched (torchrun)"),
        doctor=True,
        lint=True,
        plan=No("a change of launcher, not a setting a plan holds"),
    ),
    Facets(
        "ddp-no-sync",
        verb=No("fit() accumulates micro-batches itself"),
        doctor=No("gradient syncs per micro-batch are not timed apart"),
        lint=True,
        plan=Planned(
            script=No("the script's own loop decides its micro-batches"),
            edit=No("the script's own loop decides its micro-batches"),
            tune=No("accumulation changes what an optimizer step is; the tune keeps the user's"),
        ),
    ),
    Facets(
        "ddp-unused-params",
        verb=No("an argument of the user's DistributedDataParallel(...)"),
        doctor=No("the cost of searching for unused parameters is not timed apart"),
        lint=True,
        plan=No("an argument in the user's code, not a setting a plan holds"),
    ),
    Facets(
        "sampler-set-epoch",
        verb=No("one call in the user's epoch loop"),
        doctor=No("a shuffle repeated each epoch does not show in a step's time"),
        lint=True,
        plan=No("a call in the user's loop, not a setting a plan holds"),
    ),
    Facets(
        "rank-load-balance",
        verb=No("how the data is split between ranks is the user's design"),
        doctor=True,
        lint=No("ranks waiting on each other is seen only at run time"),
        plan=No("a change to how the data is split, not a setting a plan holds"),
    ),
    Facets(
        "lr-schedule",
        verb=No("fit() applies the plan's schedule"),
        doctor=No("a schedule changes convergence, not the time of a step"),
        lint=No("whether a schedule converges faster is not read from the source"),
        plan=Planned(
            script=No("the script's own loop decides its LR schedule"),
            edit=No("the script's own loop decides its LR schedule"),
            tune=No("a schedule changes convergence, not the step time the tune measures"),
        ),
    ),
)
