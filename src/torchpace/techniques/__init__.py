"""The technique registry: every catalogue technique's facets, declared once, side by side.

Each family module lists its techniques' ``Facets`` (``facets.py``): the verb, the doctor's
pattern, the lint rules, and how a plan applies it (``prepare()``/``fit()``, the interposer for a
script, ``apply``'s source edit, the tune's trial), or why a facet does not exist. The verbs read
these answers here instead of keeping lists of their own; ``tests/test_techniques.py`` checks
every entry against the code that implements it. How to add a technique: docs/contributing.md.
Pure data: importing it imports neither torch nor a verb.
"""

from __future__ import annotations

from torchpace.techniques import compute, distributed, loading, memory, precision
from torchpace.techniques.facets import Facets, Fit, Hand, No, Planned, Search, Trial, Via

__all__ = [
    "REGISTRY",
    "Facets",
    "Fit",
    "Hand",
    "No",
    "Planned",
    "Search",
    "Trial",
    "Via",
    "fit_only",
    "get",
    "not_for_scripts",
    "script_tunable",
    "trial_order",
    "tune_applies",
    "verb",
]

# In catalogue order (torchpace.catalog.TECHNIQUES); the registry test keeps the two the same.
REGISTRY: tuple[Facets, ...] = (
    loading.ENTRIES + precision.ENTRIES + compute.ENTRIES + memory.ENTRIES + distributed.ENTRIES
)
_BY_ID = {f.id: f for f in REGISTRY}


def get(technique_id: str) -> Facets:
    """The facets of this technique; KeyError names the known ids."""
    try:
        return _BY_ID[technique_id]
    except KeyError:
        known = ", ".join(_BY_ID)
        raise KeyError(f"unknown technique id {technique_id!r}; known: {known}") from None


def verb(technique_id: str) -> str | None:
    """The ``torchpace.speedups`` verb that applies it, or None."""
    found = _BY_ID.get(technique_id)
    return found.verb if found is not None and isinstance(found.verb, str) else None


def tune_applies() -> frozenset[str]:
    """What a tune's plan can hold: what it tries, and what ``fit()`` always applies."""
    return frozenset(
        f.id
        for f in REGISTRY
        if isinstance(f.plan, Fit)
        or (isinstance(f.plan, Planned) and isinstance(f.plan.tune, (Trial, Search)))
    )


def fit_only() -> frozenset[str]:
    """What only ``fit()`` applies: a script's plan leaves these out."""
    return frozenset(f.id for f in REGISTRY if isinstance(f.plan, Fit))


def script_tunable(technique_id: str) -> bool:
    """Whether a script tune can try it (the doctor's "Tune verifies it")."""
    found = _BY_ID.get(technique_id)
    plan = found.plan if found is not None else None
    return isinstance(plan, Planned) and plan.script is True and not isinstance(plan.tune, No)


def trial_order() -> tuple[str, ...]:
    """The tune's candidates' techniques, the first to try first."""
    order = {
        f.id: f.plan.tune.order
        for f in REGISTRY
        if isinstance(f.plan, Planned) and isinstance(f.plan.tune, Trial)
    }
    return tuple(sorted(order, key=order.__getitem__))


def not_for_scripts() -> dict[str, str]:
    """Technique -> why the interposer cannot apply its plan fields to a running script."""
    return {
        f.id: f.plan.script.why
        for f in REGISTRY
        if isinstance(f.plan, Planned) and isinstance(f.plan.script, No)
    }
