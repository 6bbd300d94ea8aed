"""The flat registry of lint rules, in code order. One module per family."""

from __future__ import annotations

from torchpace.lint.rule import Rule
from torchpace.lint.rules import debug, distributed, loading, memory, pending, precision, syncs

RULES: tuple[Rule, ...] = tuple(
    sorted(
        loading.RULES
        + syncs.RULES
        + precision.RULES
        + memory.RULES
        + distributed.RULES
        + debug.RULES
        + pending.RULES,
        key=lambda r: r.code,
    )
)


def get(code: str) -> Rule:
    """The rule with this code, or raise KeyError naming the known codes."""
    for rule in RULES:
        if rule.code == code.upper():
            return rule
    known = ", ".join(r.code for r in RULES)
    raise KeyError(f"unknown rule code {code!r}; known codes: {known}")
