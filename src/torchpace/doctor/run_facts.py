"""The run's facts the patterns read, as typed values: the step summary (doctor/summary.py), the
settings in effect (doctor/settings.py), the loaders and the dataset's pace by worker count.

Each is built once from the result's own dicts (``of``), where a missing or mistyped key fails,
naming it; the patterns read attributes, never a nested dict by key path. The result JSON keeps
the dicts: they are what it publishes (docs/doctor-result.schema.json).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torchpace.doctor.sites import Site


def _site(d: Mapping[str, Any] | None) -> Site | None:
    return None if d is None else (str(d["path"]), int(d["line"]))


@dataclass(frozen=True)
class Phase:
    """One phase of the step breakdown: its share of the step and its seconds per step."""

    share: float
    seconds: float  # median per step


@dataclass(frozen=True)
class HotSpot:
    """A function the sampler found holding a share of the steps (doctor/sampler.py)."""

    function: str
    path: str
    line: int
    phase: str
    share: float
    samples: int


@dataclass(frozen=True)
class SyncRow:
    """A line that read a value to the host (or waited on the device), per measured step."""

    path: str
    line: int
    call: str
    per_step: float
    every_step: bool
    blocked_s_per_step: float | None  # measured on CUDA; None on CPU


@dataclass(frozen=True)
class Padding:
    share: float
    tokens_per_step: float
    padded_per_step: float
    past_longest_share: float  # padding beyond each batch's longest sample
    padded_in_dataset: bool  # samples came padded from the dataset


@dataclass(frozen=True)
class RunSummary:
    step_s: float  # the median step
    breakdown: Mapping[str, Phase]  # host time by phase
    device_breakdown: Mapping[str, Phase] | None  # device time by phase, on CUDA
    measured_steps: int
    compiled_steps: int  # measured steps left out because they compiled
    syncs: tuple[SyncRow, ...] = ()
    hot_spots: tuple[HotSpot, ...] = ()
    padding: Padding | None = None
    data_cpu_fraction: float = 0.0  # of the data wait, the share the loader spent computing
    data_batches_per_step: float = 1.0

    @property
    def timed(self) -> Mapping[str, Phase]:
        """The breakdown the estimates use: the device's where there is one."""
        return self.device_breakdown or self.breakdown

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> RunSummary:
        def phases(b: Mapping[str, Any] | None) -> dict[str, Phase] | None:
            if not b:
                return None
            return {
                p: Phase(float(v.get("share", 0.0)), float(v["seconds"]["median"]))
                for p, v in b.items()
            }

        padding = d.get("padding")
        return cls(
            step_s=float(d["step_seconds"]["median"]),
            breakdown=phases(d["breakdown"]) or {},
            device_breakdown=phases(d.get("device_breakdown")),
            measured_steps=int(d["steps"]["measured"]),
            compiled_steps=int(d["steps"]["excluded"].get("compiled", 0)),
            syncs=tuple(
                SyncRow(
                    str(r["path"]),
                    int(r["line"]),
                    str(r["call"]),
                    float(r["per_step"]),
                    bool(r["every_step"]),
                    r.get("blocked_s_per_step"),
                )
                for r in d.get("syncs", [])
            ),
            hot_spots=tuple(
                HotSpot(
                    str(s["function"]),
                    str(s["path"]),
                    int(s["line"]),
                    str(s["phase"]),
                    float(s["share"]),
                    int(s["samples"]),
                )
                for s in (d.get("hot_spots") or {}).get("spots") or []
            ),
            padding=None
            if padding is None
            else Padding(
                float(padding["share"]),
                float(padding["tokens_per_step"]),
                float(padding["padded_per_step"]),
                float(padding.get("past_longest_share") or 0.0),
                bool(padding.get("padded_in_dataset")),
            ),
            data_cpu_fraction=float(d.get("data_cpu_fraction") or 0.0),
            data_batches_per_step=float(d.get("data_batches_per_step") or 1.0),
        )


@dataclass(frozen=True)
class OptimizerSetting:
    name: str  # the class, "AdamW"
    fused: bool
    site: Site | None


@dataclass(frozen=True)
class Settings:
    """What was in effect at the end of warm-up (doctor/settings.py)."""

    autocast: tuple[str, ...] = ()  # "cpu:bfloat16"; empty: a float32 forward
    optimizers: tuple[OptimizerSetting, ...] = ()
    param_dtypes: tuple[str, ...] = ()
    conv_model: bool = False
    channels_last_input: bool | None = None  # None: no 4-d input seen
    channels_last_hazard: bool = False  # a convolution the format breaks on this device
    cudnn_benchmark: bool = False
    anomaly_detection: bool = False
    data_parallel: bool = False

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> Settings:
        return cls(
            autocast=tuple(d.get("autocast", ())),
            optimizers=tuple(
                OptimizerSetting(str(o["class"]), bool(o.get("fused")), _site(o.get("site")))
                for o in d.get("optimizers", ())
            ),
            param_dtypes=tuple(d.get("param_dtypes", ())),
            conv_model=bool(d.get("conv_model")),
            channels_last_input=d.get("channels_last_input"),
            channels_last_hazard=bool(d.get("channels_last_hazard")),
            cudnn_benchmark=bool(d.get("cudnn_benchmark")),
            anomaly_detection=bool(d.get("anomaly_detection")),
            data_parallel=bool(d.get("data_parallel")),
        )


@dataclass(frozen=True)
class LoaderSetting:
    """A DataLoader the script built (doctor/loaders.py), and what it feeds."""

    role: str  # "train", "eval", ...
    num_workers: int
    pin_memory: bool
    site: Site | None
    dataset: str = ""  # the dataset's class

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> LoaderSetting:
        return cls(
            str(d["role"]),
            int(d.get("num_workers") or 0),
            bool(d.get("pin_memory")),
            _site(d.get("site")),
            str(d.get("dataset") or ""),
        )


@dataclass(frozen=True)
class Replay:
    """The precision replay (doctor/precision.py ``estimate``): the model's own matmul,
    convolution and attention calls, timed after the run in the precision it ran (``source``)
    and in ``to``, with autocast's casts. ``saved_s`` is None where no estimate stands (``note``
    says why)."""

    source: str  # the result's "from"
    to: str
    signatures: int
    timed: int
    failed: int
    flops_share_timed: float
    share_of: str  # "FLOPs" or "calls"
    from_timed_s: float
    to_timed_s: float
    cast_timed_s: float
    saved_s: float | None
    speedup: float | None
    recurrent_twins: int  # the result's list, counted
    note: str | None = None
    compute_measured_s: float | None = None  # the run's forward and backward (result.py)

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> Replay:
        def number(key: str) -> float | None:
            return None if d[key] is None else float(d[key])

        measured = d.get("compute_measured_s")
        return cls(
            str(d["from"]),
            str(d["to"]),
            int(d["signatures"]),
            int(d["timed"]),
            int(d["failed"]),
            float(d["flops_share_timed"]),
            str(d["share_of"]),
            float(d["from_timed_s"]),
            float(d["to_timed_s"]),
            float(d["cast_timed_s"]),
            number("saved_s"),
            number("speedup"),
            len(d["recurrent_twins"] or []),
            None if d.get("note") is None else str(d["note"]),
            None if measured is None else float(measured),
        )

    def figures(self) -> dict[str, Any]:
        """The replay's figures as a finding's ``measured`` reports them, in the result's
        names and order."""
        out: dict[str, Any] = {
            "from": self.source,
            "to": self.to,
            "signatures": self.signatures,
            "timed": self.timed,
            "failed": self.failed,
            "flops_share_timed": self.flops_share_timed,
            "share_of": self.share_of,
            "from_timed_s": self.from_timed_s,
            "to_timed_s": self.to_timed_s,
            "cast_timed_s": self.cast_timed_s,
            "saved_s": self.saved_s,
            "speedup": self.speedup,
        }
        if self.note is not None:
            out["note"] = self.note
        if self.compute_measured_s is not None:
            out["compute_measured_s"] = self.compute_measured_s
        out["recurrent_twins"] = self.recurrent_twins
        return out


def worker_paces(loader_rates: Mapping[str, Any] | None) -> dict[int, float]:
    """Seconds per batch by worker count, as loader_rate.measure() measured them ({} if not)."""
    rates = (loader_rates or {}).get("seconds_per_batch") or {}
    return {int(k): float(v) for k, v in rates.items()}
