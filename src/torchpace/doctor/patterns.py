"""Diagnosis: runtime patterns that turn the measurement into ranked findings.

Each pattern (after torch's ``profiler/_pattern_matcher.py``) has a name, the catalogue technique
that removes the problem, a ``skip`` precondition that says why it does not apply, and ``match``,
which returns findings with an *estimated gain*: the share of step time the technique can
recover, computed from this run's measurement. A gain that cannot be computed from the
measurement is None, and such findings rank after the estimated ones.
"""

from __future__ import annotations

from torchpace.doctor import measured_patterns as m
from torchpace.doctor import setting_patterns as s
from torchpace.doctor.evidence import (
    HIGH,
    MODERATE,
    Evidence,
    Pattern,
    RuntimeFinding,
    estimated,
)

__all__ = ["HIGH", "MODERATE", "PATTERNS", "Evidence", "RuntimeFinding", "diagnose", "rank"]


def _never(ev: Evidence) -> str | None:
    return None


PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        "input-bound", "loader-workers", "Load batches in workers.", m.input_skip, m.input_match
    ),
    Pattern(
        "padding-waste",
        "length-bucketing",
        "Batch sequences of similar length.",
        m.padding_skip,
        m.padding_match,
    ),
    Pattern(
        "sync-every-step",
        "avoid-syncs",
        "Read values only at the log cadence.",
        m.sync_skip,
        m.sync_match,
    ),
    Pattern(
        "blocking-copies",
        "pinned-memory",
        "Pin and copy non-blocking.",
        m.copy_skip,
        m.copy_match,
    ),
    Pattern(
        "float64-compute",
        "float32-not-float64",
        "Train in float32.",
        m.float64_skip,
        m.float64_match,
    ),
    Pattern("float32-compute", "amp-bf16", "Use bf16 autocast.", m.amp_skip, m.amp_match),
    Pattern(
        "unfused-optimizer", "fused-optimizer", "Pass fused=True.", m.fused_skip, m.fused_match
    ),
    Pattern("recompiling", "fixed-shapes", "Keep shapes fixed.", _never, m.recompile_match),
    Pattern(
        "channels-first-convs",
        "channels-last",
        "Use channels_last.",
        _never,
        s.channels_last_match,
    ),
    Pattern(
        "cudnn-autotuner-off", "cudnn-benchmark", "Turn on cudnn.benchmark.", _never, s.cudnn_match
    ),
    Pattern(
        "anomaly-detection-on",
        "disable-debug-apis",
        "Turn anomaly detection off.",
        _never,
        s.anomaly_match,
    ),
    Pattern("data-parallel", "ddp-not-dp", "Use DDP.", _never, s.dp_match),
    Pattern("allocator-retries", "fixed-shapes", "Keep shapes fixed.", _never, s.alloc_match),
)


def rank(findings: list[RuntimeFinding]) -> list[RuntimeFinding]:
    """Estimated gains first, largest first; then the rest, high severity first."""
    order = {"high": 0, "moderate": 1, "info": 2}
    return sorted(
        findings,
        key=lambda f: (not estimated(f.gain), -(f.gain or 0.0), order[f.severity], f.pattern),
    )


def diagnose(ev: Evidence) -> tuple[list[RuntimeFinding], dict[str, str]]:
    """Ranked findings, and for each pattern that was skipped, why."""
    found: list[RuntimeFinding] = []
    skipped: dict[str, str] = {}
    for pattern in PATTERNS:
        reason = pattern.skip(ev)
        if reason is not None:
            skipped[pattern.name] = reason
            continue
        found.extend(pattern.match(ev))
    return rank(found), skipped
