"""``Plan``: the technique settings a run applies, as a frozen, versioned, validated record.

Every field names the catalogue technique it sets (``technique_of``). A plan is stored as JSON
(``save``/``load``, atomic); loading checks the schema version, rejects unknown keys and bad
values, and names the field. ``torchpace tune`` writes plans; ``prepare()`` and ``fit()`` apply
them. This module does not import torch.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from torchpace._files import atomic_write_text
from torchpace.catalog import AMP_CHOICES
from torchpace.train import lr

PLAN_VERSION = 1
COMPILE = ("off", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
ATTENTION = ("default", "math", "flash", "efficient")
LOADER = ("keep", "auto")
BATCHING = ("as-is", "length-bucket", "token-budget")
LR_SCALING = lr.RULES
SCHEDULE = ("constant", "onecycle")


# A field value that sets another technique than the field's own: fp16 autocast is the amp
# field's "fp16".
_BY_VALUE = {("amp", "fp16"): "amp-fp16"}
# Values that leave a technique off, and fields that only qualify another one.
_OFF: tuple[Any, ...] = (False, None, "off", "keep", "as-is", "constant", ())
_FOLLOWERS = ("loader_workers", "max_tokens", "lr_scaling")


class PlanError(ValueError):
    """A plan file or value that cannot be used; the message names the field."""


def _f(default: Any, technique: str, choices: tuple[str, ...] = (), **kw: Any) -> Any:
    return field(default=default, metadata={"technique": technique, "choices": choices}, **kw)


# The key of a plan file's note on what the machine's noise kept its tune from judging
# ({"verdicts_not_drawn": [...], "loaded_trials": [...]}), written by the tune.
NOISE_NOTE = "noisy"


@dataclass(frozen=True)
class Plan:
    """Technique settings. The defaults apply nothing beyond what ``fit()`` always does (free
    gradients with set_to_none, read losses only at the log cadence)."""

    amp: str = _f("off", "amp-bf16", AMP_CHOICES)  # "auto": bf16 where native, else float32
    channels_last: bool = _f(False, "channels-last")
    fold_conv_bias: bool = _f(False, "conv-bias-before-bn")
    fused_optimizer: bool = _f(False, "fused-optimizer")
    grad_set_to_none: bool = _f(True, "grad-set-to-none")
    fast_math: bool = _f(False, "tf32")
    compile: str = _f("off", "torch-compile", COMPILE)
    attention: str = _f("default", "attention-backend", ATTENTION)
    loader: str = _f("keep", "loader-workers", LOADER)  # "auto": loader_settings(device)
    loader_workers: int | None = _f(None, "loader-workers")  # overrides "auto"'s choice
    prefetch: bool = _f(False, "async-prefetch")
    batching: str = _f("as-is", "length-bucketing", BATCHING)
    max_tokens: int | None = _f(None, "length-bucketing")  # for batching="token-budget"
    batch_size: int | None = _f(None, "max-batch-size")  # None: the loader's own
    lr_scaling: str = _f(lr.DEFAULT, "max-batch-size", LR_SCALING)  # when batch_size differs
    accumulate: int = _f(1, "ddp-no-sync")  # micro-batches per optimizer step
    schedule: str = _f("constant", "lr-schedule", SCHEDULE)
    checkpoint_modules: tuple[str, ...] = _f((), "activation-checkpointing")  # class names
    preallocate: bool = _f(False, "fixed-shapes")
    log_every: int = _f(50, "avoid-syncs")  # the only host syncs of fit() happen at this cadence

    def __post_init__(self) -> None:
        for f in fields(self):
            _check(f, getattr(self, f.name))
        if self.batching == "token-budget" and self.max_tokens is None:
            raise PlanError("batching='token-budget' needs max_tokens (padded tokens per batch)")

    @classmethod
    def as_written(cls) -> Plan:
        """The plan that changes nothing in a user's script: every technique off, gradients
        zeroed as the script zeroes them (the default plan frees them, as ``fit()`` does). The
        baseline of the tune's script trials, ``doctor --verify`` and ``compare``."""
        return cls(grad_set_to_none=False)

    # -- what it applies -----------------------------------------------------------------------
    def techniques(self) -> tuple[str, ...]:
        """The catalogue ids this plan turns on, in field order, each once."""
        out: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _FOLLOWERS or value in _OFF or (f.name == "accumulate" and value == 1):
                continue
            if (f.name, value) == ("attention", "default"):  # the backend torch picks: no change
                continue
            tid = _BY_VALUE.get((f.name, value), f.metadata["technique"])
            if tid not in out:
                out.append(tid)
        return tuple(out)

    def replace(self, **changes: Any) -> Plan:
        unknown = sorted(set(changes) - {f.name for f in fields(self)})
        if unknown:
            raise PlanError(f"unknown plan field(s) {', '.join(unknown)}; known: {_known()}")
        return dataclasses.replace(self, **changes)

    # -- JSON ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"version": PLAN_VERSION}
        for f in fields(self):
            v = getattr(self, f.name)
            d[f.name] = list(v) if isinstance(v, tuple) else v
        d["techniques"] = list(self.techniques())
        return d

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "plan") -> Plan:
        if not isinstance(data, dict):
            raise PlanError(f"{source}: a plan is a JSON object, got {type(data).__name__}")
        version = data.get("version")
        if version != PLAN_VERSION:
            raise PlanError(
                f"{source}: plan version {version!r} is not supported (this torchpace reads "
                f"version {PLAN_VERSION}); re-run `torchpace tune` to write a current plan"
            )
        # "techniques", "expected" (the tune's estimate of what the plan buys) and "noisy" (what
        # the machine's noise kept it from judging) are notes for the reader: written by
        # to_dict and the tune, never settings.
        notes = ("version", "techniques", "expected", NOISE_NOTE)
        body = {k: v for k, v in data.items() if k not in notes}
        unknown = sorted(set(body) - {f.name for f in fields(cls)})
        if unknown:
            raise PlanError(f"{source}: unknown field(s) {', '.join(unknown)}; known: {_known()}")
        if "checkpoint_modules" in body and isinstance(body["checkpoint_modules"], list):
            body["checkpoint_modules"] = tuple(body["checkpoint_modules"])
        try:
            return cls(**body)
        except PlanError as e:
            raise PlanError(f"{source}: {e}") from None

    def save(self, path: str | Path) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Plan:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise PlanError(f"cannot read plan {path}: {e.strerror}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise PlanError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
        return cls.from_dict(data, source=str(path))

    @staticmethod
    def noise_note(path: str | Path) -> str | None:
        """What a plan file says the machine's noise kept its tune from judging (its "noisy"
        note), as one line for ``run`` and ``apply`` to print; None when it says nothing."""
        try:
            noisy = json.loads(Path(path).read_text(encoding="utf-8")).get(NOISE_NOTE)
        except (OSError, ValueError, AttributeError):
            return None
        if not isinstance(noisy, dict):
            return None
        parts = []
        if noisy.get("verdicts_not_drawn"):
            parts.append(f"verdicts not drawn for {', '.join(noisy['verdicts_not_drawn'])}")
        if noisy.get("loaded_trials"):
            parts.append(f"{len(noisy['loaded_trials'])} trial(s) ran beside other work")
        if not parts:
            return None
        return (
            f"{path} was tuned on a noisy machine ({'; '.join(parts)}): it holds only what "
            "could be judged; tune again on a quiet machine for the rest"
        )

    @classmethod
    def preset(cls, name: str) -> Plan:
        if name not in PRESETS:
            raise PlanError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
        return PRESETS[name]


def technique_of(name: str) -> str:
    """The catalogue id a plan field sets."""
    for f in fields(Plan):
        if f.name == name:
            technique: str = f.metadata["technique"]
            return technique
    raise PlanError(f"unknown plan field {name!r}; known: {_known()}")


def fields_of(technique: str) -> tuple[str, ...]:
    """The plan fields that set or qualify a catalogue technique, in field order (the amp field
    for fp16 autocast, which one of its values sets)."""
    by_value = {name for (name, _), tid in _BY_VALUE.items() if tid == technique}
    return tuple(
        f.name for f in fields(Plan) if f.metadata["technique"] == technique or f.name in by_value
    )


def _known() -> str:
    return ", ".join(f.name for f in fields(Plan))


# Upper bounds a hand-edited plan could otherwise exceed into a hang or an overflow (issue 17:
# `accumulate: 10**30` was accepted). Generous: far above any real run on one machine.
_MOST = {
    "accumulate": 1 << 16,  # micro-batches per optimizer step
    "batch_size": 1 << 24,
    "max_tokens": 1 << 32,
    "loader_workers": 1024,
    "log_every": 1 << 30,
}


def _check(f: dataclasses.Field[Any], value: Any) -> None:
    name, default, choices = f.name, f.default, f.metadata["choices"]
    if choices:
        if value not in choices:
            raise PlanError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    elif isinstance(default, bool):
        if not isinstance(value, bool):
            raise PlanError(f"{name} must be true or false; got {value!r}")
    elif name == "checkpoint_modules":
        if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
            raise PlanError(f"{name} must be a list of module class names; got {value!r}")
    elif isinstance(default, int) or default is None:
        optional = default is None
        if value is None and optional:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            kind = "a whole number or null" if optional else "a whole number"
            raise PlanError(f"{name} must be {kind}; got {value!r}")
        low = 0 if name == "loader_workers" else 1
        if value < low:
            raise PlanError(f"{name} must be at least {low}; got {value}")
        high = _MOST.get(name)
        if high is not None and value > high:
            raise PlanError(f"{name} must be at most {high:,}; got {value:,}")


# "safe": numerics-preserving techniques only (the catalogue's changes_numerics=False): same
# losses from the same seed, up to floating-point rounding. "fast": also the ones that change
# numerics within the convergence band on the built-in workloads: bf16 where native, fast
# float32 matmuls, and torch.compile. Compiling costs ~14 s cold on the 2-core AMX Xeon and
# then took the cnn step from 53 to 41 ms (fit, torch 2.13), so "fast" pays off from a few
# hundred steps on; `torchpace tune` decides per model and run length (--run-steps).
PRESETS: dict[str, Plan] = {
    "none": Plan(),
    "safe": Plan(
        channels_last=True,
        fold_conv_bias=True,
        fused_optimizer=True,
        grad_set_to_none=True,
        loader="auto",
        prefetch=True,
    ),
    "fast": Plan(
        amp="auto",
        channels_last=True,
        fold_conv_bias=True,
        fused_optimizer=True,
        grad_set_to_none=True,
        fast_math=True,
        compile="default",
        loader="auto",
        prefetch=True,
    ),
}
