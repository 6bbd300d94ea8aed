"""Was the machine quiet while the doctor measured? Other processes' CPU time over the measured
steps (``torchpace.measure.noise.LoadProbe``: /proc/stat against this process tree, which holds
the script's DataLoader workers) and the spread of the step times.

On a busy machine the same script gave different top findings from run to run (none at all,
then bf16 24% and input 10%) at step-time spreads of 1.0-1.8 (IQR/median). So a noisy run says
so, and an estimated gain smaller than the run's own step-time spread is withheld: it is not
ranked, and the finding says why.

``--verify`` asks the same of its trials (``trials_noise``): on a 2-core CPU beside another heavy
job, a VAE's first baseline read 25-440 ms a step (median 138 ms), its seed-1 baseline 464 ms
and the fused optimizer's trial 408 ms, so the change measured 0.34x against the one and 1.14x
against the other. A verdict is only drawn when the two baselines agree and the two runs compared
are as steady as the script allows.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from torchpace.doctor.evidence import RuntimeFinding
from torchpace.measure.noise import MAX_RATIO_REL_IQR, verdict
from torchpace.tune.trial import TrialResult


def judge(summary: dict[str, Any], other_cores: float | None) -> dict[str, Any]:
    """The run's noise: other processes' cores, the step-time spread, and whether it is noisy
    (``measure.noise.verdict``'s load limit, the paired benchmarks' own; unknown without
    /proc). The step spread is reported, not judged: a script's steps may vary by design."""
    spread = (summary.get("step_seconds") or {}).get("rel_iqr")
    reasons = verdict(0.0, other_cores)  # 0.0: no paired ratios to judge here
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


def _verdict_class(speedup: float, min_gain: float) -> int:
    """Which verdict a speed-up gives: slower (0), not worth it (1), kept (2)."""
    return 0 if speedup <= 1.0 else (1 if speedup < min_gain else 2)


def trials_noise(base: TrialResult, other: TrialResult, trial: TrialResult) -> list[str]:
    """Why a change's ``trial`` cannot be judged against the script as written, or [] when it
    can: the two baselines (``base``, the one the tune compares against, and ``other``, its
    second seed) disagree so that the verdict depends on which is taken, or the steps of
    ``base`` or ``trial``, the two runs compared, spread wider than the script's own.
    (``other`` vouches for ``base`` by its median, which a load in a few of its steps does not
    move: a planted script's second baseline went from 81 to 104 ms in its last 6 steps, spread
    28%, median 81 ms as the first's.)"""
    from torchpace.tune.search import MIN_GAIN  # imported here: the doctor's run needs no tune

    spreads = {"first baseline": base.rel_iqr, "change's trial": trial.rel_iqr}
    own = [s for s in (spreads["first baseline"], other.rel_iqr) if s is not None]
    reasons = []
    m0, m1 = base.median_step_s, other.median_step_s
    # The baselines run the same script: medians further apart than the wider of their spreads
    # (for 10-20 steps from one distribution, 2.4-3.4 standard errors of the difference) and
    # than the tune's noise floor (MIN_GAIN, 3%) are the machine's speed moving between trials.
    # That matters where the verdict hangs on which baseline is taken: slower, not worth it
    # (below MIN_GAIN) or kept. On a quiet machine the corpus's VAE and minGPT adder had
    # baselines 3-5% apart, and fused Adam measured 1.09-1.17x against either.
    allowed = max(MIN_GAIN - 1.0, *own)
    mt = trial.median_step_s
    if m0 and m1 and mt and max(m0, m1) / min(m0, m1) - 1.0 > allowed:
        s0, s1 = m0 / mt, m1 / mt
        if _verdict_class(s0, MIN_GAIN) != _verdict_class(s1, MIN_GAIN):
            reasons.append(
                f"the two baselines' median steps differ {max(m0, m1) / min(m0, m1):.2f}x "
                f"({m0 * 1e3:.0f} ms and {m1 * 1e3:.0f} ms), beyond their spread ({allowed:.0%})"
            )
    # A spread both baselines show is the script's (the corpus's Lightning transformer spends
    # 20x longer on one step in three), a load that came and went widens one run only. 15%:
    # measure.noise's limit on a spread, as the floor and as the margin over the script's own
    # (that transformer's trials spread up to 6% wider than its baselines': 23.2 against 21.9).
    limit = max(MAX_RATIO_REL_IQR, (1.0 + MAX_RATIO_REL_IQR) * min(own, default=0.0))
    for run, s in spreads.items():
        if s is not None and s > limit:
            reasons.append(
                f"the {run}'s steps spread {s:.0%} (IQR/median), over the {limit:.0%} limit"
            )
    return reasons
