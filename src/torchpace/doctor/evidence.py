"""What diagnosis works from and gives back: the evidence of one run, a runtime finding, the
pattern shape, and the thresholds every pattern shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torchpace.doctor.run_facts import (
    LoaderSetting,
    Replay,
    RunSummary,
    Settings,
    worker_paces,
)
from torchpace.doctor.sites import Site

# 5%: the PyTorch profiler's TensorBoard plugin flags input loading above 5% of step time
# (torch_tb_profiler RunProfileData.analyze, "dataloader_ratio > 0.05"). The same line is used for
# every estimated gain: below it, a change is within this machine's step-to-step noise.
MODERATE = 0.05
# 20%: "high" for input-bound steps, the mark torchpace's doctor issue set (four times the
# profiler's line: one step in five spent waiting).
HIGH = 0.20
# 3x: fused AdamW against the default on a 2-core AMX Xeon, torch 2.13 (the brief's figure; our
# benchmarks measured 5.6x, benchmarks/README.md). The lower figure keeps the estimate modest.
FUSED_OPTIMIZER_SPEEDUP = 3.0
NEGLIGIBLE = 0.005  # see estimated()
# In a pattern's skip reason: the change was measured on this run and would make it slower.
NOT_PAYING = "would not pay"


@dataclass(frozen=True)
class Evidence:
    """What diagnosis works from, typed (doctor/run_facts.py); ``Evidence.of`` builds it from
    the result's dicts."""

    summary: RunSummary
    settings: Settings
    loaders: tuple[LoaderSetting, ...]
    device: str  # "cpu" or "cuda"
    peaks: dict[str, float]  # TFLOP/s by math mode: "fp32", "bf16", "tf32"
    flops_per_step: int | None
    forward_site: Site | None
    alloc_retries: int = 0  # the CUDA allocator's retries during the measured steps
    precision: Replay | None = None  # precision.estimate(): bf16 timed on this model
    worker_paces: dict[int, float] = field(default_factory=dict)  # the dataset's, by workers
    threads: int | None = None  # torch's intra-op threads (env "torch_threads")
    # The run's own files put tensors or modules on a CUDA device (lint's reading), or it ran on
    # one: host reads would block there. None: not known (evidence built by hand).
    uses_accelerator: bool | None = None

    @classmethod
    def of(
        cls,
        *,
        summary: dict[str, Any],
        settings: dict[str, Any],
        loaders: list[dict[str, Any]],
        memory: dict[str, Any] | None = None,
        loader_rates: dict[str, Any] | None = None,
        precision: dict[str, Any] | None = None,
        **rest: Any,
    ) -> Evidence:
        """From the result's own dicts: the summary, settings, loaders (``LoaderInfo.to_dict()``
        plus "key"), memory, the loader pace (``loader_rate.measure()``) and the precision replay
        (``precision.estimate()``)."""
        return cls(
            summary=RunSummary.of(summary),
            settings=Settings.of(settings),
            loaders=tuple(LoaderSetting.of(ld) for ld in loaders),
            alloc_retries=int((memory or {}).get("alloc_retries") or 0),
            worker_paces=worker_paces(loader_rates),
            precision=None if precision is None else Replay.of(precision),
            **rest,
        )

    def share(self, phase: str) -> float:
        found = self.summary.timed.get(phase)
        return found.share if found is not None else 0.0

    @property
    def step_s(self) -> float:
        return self.summary.step_s


@dataclass(frozen=True)
class RuntimeFinding:
    pattern: str
    technique: str
    severity: str  # "high", "moderate" or "info"
    message: str  # the problem, with the figure measured
    fix: str  # what to change
    site: Site | None
    gain: float | None  # estimated share of step time recovered
    measured: dict[str, Any] = field(default_factory=dict)
    # False where the fix needs a change to the script no plan makes (samples padded to a fixed
    # length: trim them first), so neither the tune nor --verify can try it as stated.
    plan_applies: bool = True

    def __post_init__(self) -> None:
        """``measured`` holds numbers, strings and None only (the published schema's
        ``finding.measured``): a list or a dict is refused here, where the finding is built,
        not found later in a result that breaks the schema. Lists have result fields of their
        own (``settings.param_dtypes``, ``precision.recurrent_twins``)."""
        for key, value in self.measured.items():
            scalar = isinstance(value, (int, float, str)) and not isinstance(value, bool)
            if value is not None and not scalar:
                raise TypeError(
                    f"the {self.pattern} finding's measured[{key!r}] is a "
                    f"{type(value).__name__}: measured holds numbers, strings and None only "
                    "(docs/doctor-result.schema.json); put lists in a result field of their own"
                )


@dataclass(frozen=True)
class Pattern:
    name: str
    technique: str
    description: str  # states the fix
    skip: Callable[[Evidence], str | None]
    match: Callable[[Evidence], list[RuntimeFinding]]


def times(n: float) -> str:
    return "once" if n == 1 else f"{n:g} times"


def severity(gain: float) -> str:
    return "high" if gain >= HIGH else "moderate"


def estimated(gain: float | None) -> bool:
    """A gain worth ranking by: half a percent is finer than step timing resolves on a shared
    machine, so a smaller estimate ranks with the findings that have none."""
    return gain is not None and gain >= NEGLIGIBLE
