"""Was the machine quiet while the doctor measured? Other processes' CPU time over the measured
steps (``torchpace.measure.noise.LoadProbe``: /proc/stat against this process tree, which holds
the script's DataLoader workers) and the spread of the step times.

On a busy machine the same script gave different top findings from run to run (none at all,
then bf16 24% and input 10%) at step-time spreads of 1.0-1.8 (IQR/median). So a noisy run says
so, and an estimated gain smaller than the run's own step-time spread is withheld: it is not
ranked, and the finding says why.

``--verify`` asks the same of its trials as the tune does (``tune.noise.trials_noise``): on a
2-core CPU beside another heavy job, a VAE's first baseline read 25-440 ms a step (median 138
ms), its seed-1 baseline 464 ms and the fused optimizer's trial 408 ms, so the change measured
0.34x against the one and 1.14x against the other. A verdict is only drawn when the two
baselines agree and the two runs compared are as steady as the script allows.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from torchpace.doctor.evidence import RuntimeFinding
from torchpace.measure.noise import verdict


def judge(
    summary: dict[str, Any], other_cores: float | None, probe_cores: float | None = None
) -> dict[str, Any]:
    """The run's noise: other processes' cores, the step-time spread, and whether it is noisy
    (``measure.noise.verdict``'s load limit, the paired benchmarks' own; unknown without
    /proc). The step spread is reported, not judged: a script's steps may vary by design.
    ``probe_cores``: other processes' cores while the loader's pace was measured after the
    steps (``loader_rate.measure``); the input estimate reads that pace, so its load counts."""
    spread = (summary.get("step_seconds") or {}).get("rel_iqr")
    reasons = verdict(0.0, other_cores)  # 0.0: no paired ratios to judge here
    reasons += [
        f"{r} (while the loader's pace was measured, after the steps)"
        for r in verdict(0.0, probe_cores)
    ]
    return {
        "other_cores": other_cores,
        "step_rel_iqr": spread,
        "noisy": bool(reasons),
        "reason": f"noisy: {reasons[0]}" if reasons else None,
    }


def withhold(findings: list[RuntimeFinding], noise: dict[str, Any]) -> list[RuntimeFinding]:
    """On a noisy run, the findings whose estimated gain is below the step-time spread keep
    no gain (not ranked by it), with the estimate and the reason in ``measured``."""
    spread = noise.get("step_rel_iqr")
    if not noise.get("noisy") or spread is None:
        return findings
    out = []
    for f in findings:
        if f.gain is not None and f.gain < spread:
            f = dataclasses.replace(
                f,
                gain=None,
                measured={
                    **f.measured,
                    "withheld_gain": f.gain,
                    "withheld_because": (
                        f"{noise['reason']}; the estimate ({f.gain:.0%}) is below the step "
                        f"times' spread ({spread:.0%} IQR/median)"
                    ),
                },
            )
        out.append(f)
    return out
