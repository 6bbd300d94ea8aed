"""What one technique is to each part of torchpace: a ``Facets`` record per catalogue id.

A facet is either there (``True``, or what it is) or absent with the reason a user reads (``No``).
Where another table already names the technique, the record only says whether the facet exists
and the registry test checks that table: plan fields (``train.plan``, each field's
``technique``), runtime patterns (``doctor``), rules (``lint.rules.RULES``). Pure data: no torch,
no import of the verbs that read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class No:
    """A facet the technique does not have, and why."""

    why: str

    def __post_init__(self) -> None:
        if not self.why.strip():
            raise ValueError("say why the facet does not exist")


@dataclass(frozen=True)
class Hand:
    """``apply`` has no sound static edit: it tells the user what to change by hand, and why."""

    why: str


@dataclass(frozen=True)
class Trial:
    """The tune tries it as a candidate; a lower ``order`` runs first when the budget is short.

    Cheap, likely gains first, compile last as each compile trial costs 15-20 s. Measured alone
    against naive on the 2-core AMX Xeon (benchmarks/README.md, "Speed-ups library"): bf16 2.12x
    and bucketing 7x where they apply, channels_last 1.19x, compile 1.26x, fused 1.08x, folding
    1.04x."""

    order: int


@dataclass(frozen=True)
class Search:
    """The tune reaches it through a search of its own, after the candidates."""

    what: str


@dataclass(frozen=True)
class Planned:
    """The plan has fields for it. ``prepare()``/``fit()`` apply them (train/), the interposer to
    a running script (script/interpose.py, script/loaders.py), ``apply`` as a source edit
    (script/edits.py); ``tune`` says how the tune tries it."""

    script: Literal[True] | No
    edit: Literal[True] | Hand | No
    tune: Trial | Search | No


@dataclass(frozen=True)
class Via:
    """The plan applies it through another technique's fields (``technique``), everywhere that
    one is applied."""

    technique: str


@dataclass(frozen=True)
class Fit:
    """``fit()`` always applies it (its field, if any, only tunes how); a script's own loop keeps
    what it does, so a script's plan never lists it."""

    why: str


@dataclass(frozen=True)
class Facets:
    """One technique: its ``torchpace.speedups`` verb, whether the doctor and lint report it, and
    how a plan applies it."""

    id: str
    verb: str | No
    doctor: Literal[True] | No
    lint: Literal[True] | No
    plan: Planned | Via | Fit | No
