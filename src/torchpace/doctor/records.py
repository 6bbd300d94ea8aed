"""What the doctor keeps per step, per loader and per sync site while a script runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from torchpace.doctor.children import Child
from torchpace.doctor.sampler import Spot
from torchpace.doctor.sites import Site


@dataclass
class Fetch:
    loader: int  # key of the DataLoader in Records.loaders
    seconds: float
    samples: int
    tokens: int = 0  # elements of a batch of token ids (loaders.padding_of), 0 for other batches
    padded: int = 0  # of which trailing padding
    cpu: float = 0.0  # the main thread's CPU seconds during the wait (loading in this process)
    past_longest: int = 0  # of the padding, what even the batch's longest row carries


@dataclass
class Step:
    index: int  # 1-based optimizer step (boundary) number
    seconds: float
    host: dict[str, float]
    events: list[tuple[str, Any]]  # CUDA event trail; resolved once, after the run
    fetches: list[Fetch]
    backward_calls: int
    forward_samples: int  # first dimension of the first tensor given to a training forward
    eval_calls: int  # forward calls without autograd
    syncs: dict[tuple[Site, str], int]  # (site, kind) -> calls in this step
    sync_time: dict[tuple[Site, str], float]  # (site, kind) -> seconds blocked (CUDA only)
    compiled: bool
    kind: str  # "warmup", "probe" or "measured"
    device: dict[str, float] | None = None
    forward_tokens: int = 0  # elements of a 2-D integer (token id) tensor given to that forward


@dataclass
class LoaderInfo:
    key: int
    site: Site | None
    num_workers: int
    pin_memory: bool
    persistent_workers: bool
    prefetch_factor: int | None
    batch_size: int | None
    dataset: str
    training: bool = False  # the last loader fetched from before an optimizer step

    def to_dict(self) -> dict[str, Any]:
        return {
            "site": None if self.site is None else {"path": self.site[0], "line": self.site[1]},
            "role": "train" if self.training else "other",
            "num_workers": self.num_workers,
            "pin_memory": self.pin_memory,
            "persistent_workers": self.persistent_workers,
            "prefetch_factor": self.prefetch_factor,
            "batch_size": self.batch_size,
            "dataset": self.dataset,
        }


@dataclass
class OptimizerInfo:
    name: str
    site: Site | None
    fused: bool
    foreach: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.name,
            "site": None if self.site is None else {"path": self.site[0], "line": self.site[1]},
            "fused": self.fused,
            "foreach": self.foreach,
        }


@dataclass
class Records:
    steps: list[Step] = field(default_factory=list)
    loaders: dict[int, LoaderInfo] = field(default_factory=dict)
    optimizers: dict[int, OptimizerInfo] = field(default_factory=dict)
    lines_run: set[Site] = field(default_factory=set)  # lines executed in the probe step
    flops_per_step: int | None = None
    flops_note: str | None = None
    flops_uncounted: dict[str, int] = field(default_factory=dict)  # heavy ops, no formula
    compute_calls: Any = None  # precision.ComputeCalls of the probe step, timed after the run
    loader_sources: dict[int, Any] = field(default_factory=dict)  # key -> loader_rate.Source
    # loaders whose dataset returns its samples already padded (loaders.padded_in_dataset)
    padded_in_dataset: set[int] = field(default_factory=set)
    probed_datasets: set[int] = field(default_factory=set)  # loaders whose samples were read
    settings: dict[str, Any] = field(default_factory=dict)
    # the doctor's own instruments that failed inside the script's calls, caught and noted
    instrument_errors: list[str] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)  # class names of the models seen
    forward_sites: set[Site] = field(default_factory=set)  # each root's first call
    train_forward_sites: set[Site] = field(default_factory=set)  # a model's first training call
    backward_sites: set[Site] = field(default_factory=set)
    step_sites: set[Site] = field(default_factory=set)
    first_step_s: float | None = None  # from the start of the run to the first optimizer step
    children: list[Child] = field(default_factory=list)  # processes the script started
    # stack samples of the measured steps: (step, phase, user spot or None) -> count
    samples: Mapping[tuple[int, str, Spot | None], int] = field(default_factory=dict)
