"""What one contestant run of ``peers.py`` trains (``Job``) and hands back (``Trained``), and the
training loader the tuned contestants share. Used by the child harness and every ``peer_*.py``.

A contestant module defines ``train(job: Job) -> Trained``: build the workload from ``job.seed``,
train exactly ``job.steps`` optimizer steps, and return the trained model. The harness around it
(``_peers_child.py``) does all the timing and measuring, the same way for every contestant.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Job:
    workload: str  # cnn, lm or seqcls
    recipe: str  # what load_recipe reads: the workload, or a generated lm-size recipe file
    lm_size: str  # the lm preset the naive script is given (registered by that recipe file)
    device: str  # "cpu" or "cuda"
    seed: int  # the model's initial weights, the training set and the shuffle
    steps: int  # optimizer steps, warm-up included
    warmup: int  # steps before the measured window (compiles land here)
    compile: bool  # torch.compile for Lightning, Accelerate and the hand-tuned loop
    plan: str | None = None  # torchpace: the plan `torchpace tune` wrote

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Job:
        return cls(**json.loads(text))


@dataclass
class Trained:
    model: Any  # the trained nn.Module, as the contestant left it (any wrapper kept)
    amp: str  # "bf16" or "off": the autocast it trained under; evaluation uses the same
    techniques: tuple[str, ...]  # catalogue ids of what it applied (torchpace.catalog)
    settings: dict[str, Any] = field(default_factory=dict)  # what it chose, and why


def guide_loader_settings(device: Any) -> tuple[Any, dict[str, Any]]:
    """The DataLoader settings the guides give for ``device`` (a ``LoaderSettings``), and the
    same as a dict with why, for the results.

    On CUDA: workers (4 per GPU, a core left to the main process), pinned memory, persistent
    workers: Lightning's and Accelerate's docs and the guides agree on these. On this 2-core CPU:
    no workers, as a worker takes a core from the step's intra-op threads (1 worker measured
    0.91x on cnn, benchmarks/README.md), and no pinning, which speeds host-to-GPU copies only."""
    from torchpace.speedups.loading import loader_settings

    settings = loader_settings(device)
    why = (
        "the guides' CUDA settings (torchpace.speedups.loader_settings)"
        if settings.num_workers
        else "0 workers: on 2 cores a worker takes a core from the step (1 worker measured 0.91x "
        "on cnn); no pinning off CUDA"
    )
    return settings, {**asdict(settings), "why": why}


def peer_loader(recipe: Any, seed: int, device: Any) -> tuple[Any, dict[str, Any]]:
    """The recipe's training loader as ``torchpace fit`` builds it (the same batches in the same
    order from ``seed``) with ``guide_loader_settings(device)``; and those settings."""
    from torchpace.speedups.loading import tuned_loader
    from torchpace.train.build import training_loader

    settings, record = guide_loader_settings(device)
    return tuned_loader(training_loader(recipe, seed), device=device, settings=settings), record


def loader_techniques(settings: dict[str, Any]) -> tuple[str, ...]:
    """The catalogue ids a loader's settings apply."""
    out = ["loader-workers"] if settings["num_workers"] else []
    out += ["pinned-memory"] if settings["pin_memory"] else []
    out += ["persistent-workers"] if settings["persistent_workers"] else []
    return tuple(out)
