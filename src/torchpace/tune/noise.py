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

import itertools
import math
import statistics
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
    can: one of the two baselines it is compared with (the tune's: run just before and just
    after it; ``doctor --verify`` on stored trials: the two seeds) or the trial ran beside other
    processes' work; the two baselines (``base`` and ``other``) disagree so that the verdict
    depends on which is taken; or the steps of ``base`` or ``trial`` spread wider than the
    script's own. (``other`` vouches for ``base`` by its median, which a load in a few of its
    steps does not move: a planted script's second baseline went from 81 to 104 ms in its last
    6 steps, spread 28%, median 81 ms as the first's.) ``min_gain``: the speed-up below which a
    change is not worth it."""
    roles = [("first baseline", base), ("change's trial", trial)]
    if other is not base:
        roles.insert(1, ("second baseline", other))
    reasons = load_noise(roles)
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
    # a trial of another batch size is judged by samples/s: its step does that much more work
    work = (
        trial.samples_per_step / base.samples_per_step
        if trial.samples_per_step and base.samples_per_step
        else 1.0
    )
    if m0 and m1 and mt and max(m0, m1) / min(m0, m1) - 1.0 > allowed:
        s0, s1 = m0 * work / mt, m1 * work / mt
        if _verdict_class(s0, min_gain) != _verdict_class(s1, min_gain):
            reasons.append(
                f"the two baselines' median steps differ {max(m0, m1) / min(m0, m1):.2f}x "
                f"({m0 * 1e3:.0f} ms and {m1 * 1e3:.0f} ms), beyond their spread ({allowed:.0%})"
            )
    # A spread the baselines show is the script's (the corpus's Lightning transformer spends
    # 20x longer on one step in three; naive_cnn's steps spread 18-25% on a quiet machine); a
    # load that came and went widens one run only. A run is compared with the spread of the
    # baselines other than itself, allowing for what the IQR of a few steps varies by between
    # two runs of one script (spread_margin), and never under measure.noise's 15% floor.
    checks = (("first baseline", base, [other]), ("change's trial", trial, [base, other]))
    for run, t, refs in checks:
        s = spreads[run]
        ref = max((r.rel_iqr or 0.0 for r in refs), default=0.0)
        n = min((len(x.step_seconds) for x in (t, *refs) if x.step_seconds), default=0)
        limit = max(MAX_RATIO_REL_IQR, ref * spread_margin(n))
        if s is not None and s > limit:
            reasons.append(
                f"the {run}'s steps spread {s:.0%} (IQR/median), over the {limit:.0%} limit"
            )
    return reasons


def spread_margin(steps: int) -> float:
    """How many times wider one run's spread (IQR/median) may be than another run's of the same
    script, over ``steps`` steps each, before it says the machine: the 99th percentile of that
    ratio. The log of a sample IQR of n steps varies by about 1.2-1.35/sqrt(n) (simulated:
    normal and log-normal steps, n 10-24; the larger at 10), so the log of a ratio of two by
    sqrt(2) times that; 2.33 is the one-sided 99% normal quantile. 10 steps: 4.1x; 20: 2.7x.
    The margin of 15% it replaces called 40-70% of A/A trials noisy on a script whose steps
    spread 15-30% (tests/tune/test_noise_spread.py). Fewer than 4 steps (or unknown) count
    as 10."""
    n = steps if steps >= 4 else 10
    return math.exp(2.33 * math.sqrt(2.0) * 1.35 / math.sqrt(n))


def not_judged(reasons: Sequence[str]) -> str:
    """The verdict of a trial the machine's noise kept from being judged."""
    return f"{NOISY}: {'; '.join(reasons)}"


# How many standard errors a trial's mean speed-up must stand from a verdict's line.
PROCESS_Z = 2.0


def process_sigma(medians: Sequence[float]) -> float:
    """The script's own noise from one process to the next: the standard deviation of the log
    of its median step, from the runs of the script as written in the order they ran. Issue 29:
    on a quiet machine (0.01 cores of other work) a small GPT's baselines ran 43-66 ms a step from
    one process to the next, 20 steps each, each run steady; fused AdamW, worth about 6%, read
    1.25x between two of them and 0.79x and 1.11x in the paired rounds. The estimate is the
    median of the consecutive runs' differences (a machine that changed speed once, between
    two of them, moves one difference, not the median), over 0.6745 (the median of a half-
    normal) and sqrt(2) (a difference of two). 0 with fewer than two runs."""
    logs = [math.log(m) for m in medians if m > 0]
    diffs = [abs(b - a) for a, b in itertools.pairwise(logs)]
    if not diffs:
        return 0.0
    return statistics.median(diffs) / (0.6745 * math.sqrt(2.0))


def settles(log_gains: Sequence[float], sigma: float, *, line: float, floor: float = 1.0) -> bool:
    """Whether ``log_gains`` (the log speed-ups of k runs of one trial, each against the two
    baselines next to it) settle its verdict against ``line`` (the speed-up it must reach to
    be kept) beside the script's process noise ``sigma``: kept when their mean reaches the line
    and stands PROCESS_Z standard errors above ``floor`` (faster than what it is compared
    with); not kept when it stands PROCESS_Z standard errors below the line. A trial's run
    against the geometric mean of two baselines varies by sigma * sqrt(1 + 1/2)."""
    if not log_gains:
        return False
    m = statistics.fmean(log_gains)
    se = sigma * math.sqrt(1.5 / len(log_gains))
    kept = m >= math.log(line) and m - PROCESS_Z * se > math.log(floor)
    return kept or m + PROCESS_Z * se < math.log(line)


def unsettled(log_gains: Sequence[float], sigma: float, baselines: int, line: float) -> str:
    """Why ``log_gains`` do not settle a verdict (settles), as the table says it."""
    m = statistics.fmean(log_gains)
    se = sigma * math.sqrt(1.5 / len(log_gains))
    lo, hi = math.exp(m - PROCESS_Z * se), math.exp(m + PROCESS_Z * se)
    runs = len(log_gains)
    return (
        f"the script as written varies {math.exp(sigma) - 1:.0%} from one process to the next "
        f"({baselines} runs of it), so {runs} run{'s' if runs > 1 else ''} of this trial "
        f"({math.exp(m):.2f}×, {lo:.2f}–{hi:.2f}×) do not settle whether it reaches {line:.2f}×"
    )
