"""The flat registry of lint rules, in code order. One module per idea, named for it."""

from __future__ import annotations

from torchpace.lint.rule import Rule
from torchpace.lint.rules import (
    allocation,
    attention,
    compilation,
    convs,
    debug,
    distributed,
    evaluation,
    loading,
    memory,
    modules,
    precision,
    syncs,
)

_MODULES = (
    allocation,
    attention,
    compilation,
    convs,
    debug,
    distributed,
    evaluation,
    loading,
    memory,
    modules,
    precision,
    syncs,
)
RULES: tuple[Rule, ...] = tuple(
    sorted((r for m in _MODULES for r in m.RULES), key=lambda r: r.code)
)


def get(code: str) -> Rule:
    """The rule with this code, or raise KeyError naming the known codes."""
    for rule in RULES:
        if rule.code == code.upper():
            return rule
    known = ", ".join(r.code for r in RULES)
    raise KeyError(f"unknown rule code {code!r}; known codes: {known}")
