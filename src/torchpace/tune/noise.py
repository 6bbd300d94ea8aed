"""Can a trial be judged against the script as written? One judgement for the tune's verdicts and
``torchpace doctor --verify``'s (issue 29): the machine's load during each trial, the two
baselines' agreement, and the step-time spread of the two runs compared.

Beside another process on a 2-core machine the tune printed "confirmed 176.60x", technique rows
at 0.04x, and rejected a bf16 change measuring 1.26x by hand as "not worth it (0.85x)"; nothing
said the machine was busy. Each trial now carries the cores other processes used while it ran
(``foreign_cores``, measured around the trial's process by ``measure.noise.LoadProbe``); a
verdict drawn from a loaded trial, from baselines that disagree, or from steps that spread wider
than the script's own is "noisy: not judged" instead. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence

from torchpace.measure.noise import MAX_FOREIGN_CORES, MAX_RATIO_REL_IQR
from torchpace.tune.trial import TrialResult

NOISY = "noisy: not judged"


def foreign_cores(trial: TrialResult) -> float | None:
    """Other processes' cores while ``trial`` ran (None: not measured, or no /proc)."""
    value = trial.extra.get("foreign_cores")
    return float(value) if isinstance(value, (int, float)) else None


def load_noise(trials: Sequence[tuple[str, TrialResult]]) -> list[str]:
    """A reason for each named trial that ran beside other processes' work."""
    reasons = []
    for role, t in trials:
        cores = foreign_cores(t)
        if cores is not None and cores > MAX_FOREIGN_CORES:
            reasons.append(
                f"other processes used {cores:.2f} cores during the {role}, over the "
                f"{MAX_FOREIGN_CORES:.2f} limit"
            )
    return reasons


def _verdict_class(speedup: float, min_gain: float) -> int:
    """Which verdict a speed-up gives: slower (0), not worth it (1), kept (2)."""
    return 0 if speedup <= 1.0 else (1 if speedup < min_gain else 2)


def trials_noise(
    base: TrialResult, other: TrialResult, trial: TrialResult, *, min_gain: float
) -> list[str]:
    """Why a change's ``trial`` cannot be judged against the script as written, or [] when it
    can: the baseline it is compared with (``base``) or the trial ran beside other processes'
    work; the two baselines (``base`` and ``other``, its second seed) disagree so that the
    verdict depends on which is taken; or the steps of ``base`` or ``trial``, the two runs
    compared, spread wider than the script's own. (``other`` vouches for ``base`` by its
    median, which a load in a few of its steps does not move: a planted script's second
    baseline went from 81 to 104 ms in its last 6 steps, spread 28%, median 81 ms as the
    first's.) ``min_gain``: the speed-up below which a change is not worth it."""
    reasons = load_noise([("first baseline", base), ("change's trial", trial)])
    spreads = {"first baseline": base.rel_iqr, "change's trial": trial.rel_iqr}
    own = [s for s in (spreads["first baseline"], other.rel_iqr) if s is not None]
    m0, m1 = base.median_step_s, other.median_step_s
    # The baselines run the same script: medians further apart than the wider of their spreads
    # (for 10-20 steps from one distribution, 2.4-3.4 standard errors of the difference) and
    # than the tune's noise floor (min_gain) are the machine's speed moving between trials.
    # That matters where the verdict hangs on which baseline is taken: slower, not worth it
    # (below min_gain) or kept. On a quiet machine the corpus's VAE and minGPT adder had
    # baselines 3-5% apart, and fused Adam measured 1.09-1.17x against either.
    allowed = max(min_gain - 1.0, *own)
    mt = trial.median_step_s
    if m0 and m1 and mt and max(m0, m1) / min(m0, m1) - 1.0 > allowed:
        s0, s1 = m0 / mt, m1 / mt
        if _verdict_class(s0, min_gain) != _verdict_class(s1, min_gain):
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


def not_judged(reasons: Sequence[str]) -> str:
    """The verdict of a trial the machine's noise kept from being judged."""
    return f"{NOISY}: {'; '.join(reasons)}"
