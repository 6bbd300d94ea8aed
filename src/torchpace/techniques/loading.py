"""Input pipeline techniques: workers, pinned memory, prefetching, sample format, batch size,
shapes, length bucketing."""

from __future__ import annotations

from torchpace.techniques.facets import Facets, Hand, No, Planned, Search, Trial, Via

_NOT_A_SETTING = "a change to the user's code, not a setting a plan holds"

ENTRIES: tuple[Facets, ...] = (
    Facets(
        "loader-workers",
        verb="tuned_loader",
        doctor=True,
        lint=True,
        plan=Planned(
            script=True,
            edit=True,
            tune=Search("the loader search: worker counts by the cores' rule, to no gain"),
        ),
    ),
    Facets(
        "pinned-memory",
        verb="DevicePrefetcher",
        doctor=True,
        lint=True,
        plan=Via("loader-workers"),  # loader_settings pins on CUDA
    ),
    Facets(
        "async-prefetch",
        verb="DevicePrefetcher",
        doctor=No("the blocking-copies finding names pinned memory, the step before prefetching"),
        lint=No("whether a copy overlaps the step is seen at run time, not in the source"),
        plan=Planned(
            script=No(
                "the script copies its batches itself; prefetching needs "
                "torchpace.speedups.DevicePrefetcher around its loader"
            ),
            edit=Hand("the code that takes each batch must take it already on the device"),
            tune=No("no trial is built for it: it overlaps host-to-device copies, a CUDA cost"),
        ),
    ),
    Facets(
        "fast-input-format",
        verb=No("samples made once, ahead of the loop, are a change to the dataset's code"),
        doctor=True,
        lint=No("what making a sample costs is measured at run time, not read in the source"),
        plan=No(_NOT_A_SETTING),
    ),
    Facets(
        "persistent-workers",
        verb="tuned_loader",
        doctor=No("workers started each epoch are not told apart from the loader's wait"),
        lint=True,
        plan=Via("loader-workers"),  # loader_settings keeps workers that exist
    ),
    Facets(
        "max-batch-size",
        verb=No("the batch size is the loader's argument; fit() and the interposer scale the LR"),
        doctor=No("the largest batch that fits is found by trying: the tune's batch search"),
        lint=No("a batch's headroom depends on the device's memory, not on the source"),
        plan=Planned(
            script=True,
            edit=True,
            tune=Search("the batch search: larger batches while memory and convergence allow"),
        ),
    ),
    Facets(
        "fixed-shapes",
        verb="preallocate",
        doctor=True,
        lint=No("changing shapes show at run time, as recompiles and allocator retries"),
        plan=Planned(
            script=No("preallocation needs the loss function; use a recipe"),
            edit=No("preallocation needs the loss function and the largest batch: use a recipe"),
            tune=No("preallocation needs the largest batch, which the tune does not build"),
        ),
    ),
    Facets(
        "length-bucketing",
        verb="LengthBucketBatchSampler",
        doctor=True,
        lint=No("padding waste depends on the data's lengths, measured at run time"),
        plan=Planned(script=True, edit=True, tune=Trial(1)),
    ),
)
