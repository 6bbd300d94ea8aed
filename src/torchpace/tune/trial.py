"""One tune trial: what to run (``TrialSpec``) and what it measured (``TrialResult``).

Both are plain data, stored as JSON: specs go to the worker process, results come back and are
appended to the results file. ``TrialSpec.key()`` identifies a trial across runs (the cache and
the resume of a killed tune use it). This module does not import torch.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, get_args

Status = Literal["ok", "failed", "oom", "timeout"]
_STATUSES = get_args(Status)


@dataclass(frozen=True)
class TrialSpec:
    """Train ``recipe`` under ``plan`` for ``warmup + steps`` optimizer steps from ``seed``.

    ``name`` labels the trial in tables ("baseline", "channels-last", "combined", ...);
    ``techniques`` are the catalogue ids it tries. ``batch_size`` None keeps the recipe's; the
    LR is then scaled by the plan's rule inside fit(). ``memory_budget_bytes`` makes the worker
    report "oom" when its peak memory passes it (CPU has no allocator limit of its own).
    """

    name: str
    recipe: str
    plan: dict[str, Any]  # Plan.to_dict()
    seed: int = 0
    warmup: int = 3
    steps: int = 20
    techniques: tuple[str, ...] = ()
    device: str = "auto"
    memory_budget_bytes: int | None = None
    loader_only: bool = False  # time the input pipeline alone: no model, no step
    # A script trial: ``recipe`` is the script's path, run as ``python recipe *args`` in ``cwd``
    # with the plan applied by interposition (torchpace.script). None: a recipe trial.
    args: tuple[str, ...] | None = None
    cwd: str | None = None
    # 2: the same trial run again because the machine's noise spoiled the first (tune.noise);
    # a trial of its own in the cache, so that a resumed tune replays the same decisions.
    attempt: int = 1
    # The key of the trial this run of the script as written follows (the tune's baseline after
    # each timed trial): a cached one is recalled with the trial it was measured next to.
    follows: str | None = None

    def key(self) -> str:
        """A stable hash of what the trial runs (the name and techniques are labels only)."""
        body = asdict(self)
        for label in ("name", "techniques"):
            body.pop(label)
        for added in ("args", "cwd", "follows"):  # older trials keep the keys they had
            if body[added] is None:
                body.pop(added)
        if body["attempt"] == 1:  # and first attempts the keys they had before re-runs
            body.pop("attempt")
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["techniques"] = list(self.techniques)
        if self.args is not None:
            d["args"] = list(self.args)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrialSpec:
        args = d.get("args")
        return cls(
            **{
                **d,
                "techniques": tuple(d.get("techniques", ())),
                "args": None if args is None else tuple(args),
            }
        )

    @property
    def is_script(self) -> bool:
        return self.args is not None

    @property
    def module(self) -> str:
        """The module its trial process runs (``python -m``): the tune's worker for a recipe;
        a script's trial has its own entry, so the tune never imports the script verb."""
        return "torchpace.script.trial_worker" if self.is_script else "torchpace.tune.worker"


@dataclass(frozen=True)
class TrialResult:
    """What one trial measured. Times are seconds; ``step_seconds`` are the measured steps only
    (warm-up excluded); ``losses`` are every step's training loss, warm-up included, so
    trajectories compare from the first step; ``first_step_seconds`` holds any compilation."""

    key: str
    name: str
    status: Status
    reason: str = ""  # why it failed, in one line, with the worker's last error line
    step_seconds: tuple[float, ...] = ()
    median_step_s: float | None = None
    q1_step_s: float | None = None
    q3_step_s: float | None = None
    samples_per_step: float | None = None
    samples_per_s: float | None = None
    first_step_seconds: float | None = None
    compile_seconds: float | None = None  # first step minus a steady step, when compiled
    peak_memory_bytes: int | None = None
    memory_kind: str = ""  # "cuda-allocator" or "process-rss"
    losses: tuple[float, ...] = ()
    scaler_skip_rate: float | None = None  # fp16: share of steps the GradScaler skipped
    batch_size: int | None = None
    applied: tuple[str, ...] = ()  # catalogue ids prepare() reported as changed
    wall_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rel_iqr(self) -> float | None:
        """The step times' spread, IQR/median (``measure.stats.Summary.rel_iqr``)."""
        if not self.median_step_s or self.q1_step_s is None or self.q3_step_s is None:
            return None
        return (self.q3_step_s - self.q1_step_s) / self.median_step_s

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("step_seconds", "losses", "applied"):
            d[k] = list(d[k])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrialResult:
        """Raises ValueError naming the first field that is missing or of the wrong type: a
        cache line someone edited must be skipped, not crash every later tune (issue 17)."""
        if not isinstance(d, dict):
            raise ValueError(f"a trial result is a JSON object, not {type(d).__name__}")
        for name in ("key", "name", "status"):
            if not isinstance(d.get(name), str):
                raise ValueError(f"trial result field {name!r} must be a string")
        if d["status"] not in _STATUSES:
            raise ValueError(f"trial result status {d['status']!r} is not one of {_STATUSES}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ValueError(f"unknown trial result field {unknown[0]!r}")
        for name in ("step_seconds", "losses", "applied"):
            value = d.get(name, [])
            want = str if name == "applied" else (int, float)
            if not isinstance(value, list) or not all(
                isinstance(v, want) and not isinstance(v, bool) for v in value
            ):
                raise ValueError(f"trial result field {name!r} must be a list of {want}")
        for name, f in known.items():
            value = d.get(name)
            if value is None or name in ("step_seconds", "losses", "applied", "extra"):
                continue
            if f.type in ("float | None", "float") and (
                isinstance(value, bool) or not isinstance(value, (int, float))
            ):
                raise ValueError(f"trial result field {name!r} must be a number")
            if f.type == "int | None" and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"trial result field {name!r} must be a whole number")
        if not isinstance(d.get("extra", {}), dict):
            raise ValueError("trial result field 'extra' must be an object")
        tuples = {k: tuple(d.get(k, ())) for k in ("step_seconds", "losses", "applied")}
        return cls(**{**d, **tuples})


def over_budget(spec: TrialSpec, peak_bytes: int, kind: str) -> str:
    """Why a trial that peaked at ``peak_bytes`` is out of ``spec``'s memory budget, or "" (CPU
    has no allocator limit of its own: the worker reports "oom" from this)."""
    budget = spec.memory_budget_bytes
    if budget is None or peak_bytes <= budget:
        return ""
    return f"peak memory {peak_bytes:,} bytes ({kind}) is over the budget of {budget:,} bytes"
