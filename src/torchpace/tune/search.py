"""The tune search: baseline twice, each technique alone, a greedy combination, the batch size,
the loader, and a paired confirmation, in that order, inside a time budget.

Every timed trial is followed by the script as written again (``_Baselines``), so that each is
compared with the baselines run just before and just after it (ABAB, as ``torchpace bench``
does): a machine whose speed drifts between trials moves both sides, and two neighbours that
disagree make the comparison noisy instead of a verdict (issue 29). A trial runs again until
its pooled speed-up stands clear of the script's own process-to-process noise, measured from
those baselines (``tune.noise.settles``), or says it could not.

Every trial is a ``TrialSpec`` run in a fresh process (``runner.run_trial``) unless the results
file already holds its key: a killed tune restarted, or an unchanged re-run, runs no finished
trial again. Every verdict goes through the convergence guard.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchpace._lock import exclusive
from torchpace.measure.cores import usable_cores
from torchpace.measure.noise import LoadProbe
from torchpace.measure.stats import between
from torchpace.report.tune_table import (
    Row,
    confirm_trial,
    not_applicable,
    not_worth_it,
    rejected,
    trained_lower,
)
from torchpace.train import lr
from torchpace.train.plan import Plan
from torchpace.tune.batch import search_batch
from torchpace.tune.candidates import Candidate, NotApplicable
from torchpace.tune.convergence import (
    Band,
    Verdict,
    changes_numerics,
    changes_random_stream,
    check,
)
from torchpace.tune.noise import (
    NOISY,
    load_noise,
    not_judged,
    process_sigma,
    settles,
    trials_noise,
    unsettled,
)
from torchpace.tune.results import ResultsFile
from torchpace.tune.runner import run_trial
from torchpace.tune.trial import TrialResult, TrialSpec

# 3%: below this a gain is inside the step-time spread of this 2-core machine (the doctor
# overhead A/A control moved medians by up to 1.8%, single rounds by up to 10%).
MIN_GAIN = 1.03
# A technique that converged but gained less than MIN_GAIN alone still goes into the greedy
# combination when it lost less than 3% (the same noise floor): some gains only show together
# (compile fuses more of a bf16, channels_last step than of a float32 one).
GREEDY_FLOOR = 0.97
TECHNIQUE_BATCH = ("max-batch-size",)
KEPT_AS_WRITTEN = "not searched: the batch size is kept as written (--keep-batch-size)"
OUT_OF_BUDGET = "not run: out of budget"
CONFIRM_PAIRS = 2  # runs of the best plan, each between two of the baseline (A B A B A)
# A timed trial runs at most this many times (each with a baseline after it) before its verdict
# is settled against the script's process noise or said to be noisy.
MAX_ATTEMPTS = 3


# The shortest trial whose load is read: a real trial takes seconds (a process, torch's import).
LOAD_WINDOW_S = 0.5
# A trial's time limit where nothing is known of the script; from a survey, trial_timeout().
DEFAULT_TRIAL_TIMEOUT_S = 180.0


def trial_timeout(
    first_step_s: float | None, step_s: float | None, *, warmup: int, steps: int
) -> float:
    """A trial's time limit from the doctor's survey: three times what the trial should take
    (its set-up to the first step, then warm-up and measured steps at the surveyed pace), and
    never below DEFAULT_TRIAL_TIMEOUT_S (a compile trial pays its compile on top). Issue 29: on
    nanoGPT's shakespeare config (5.5 s a step, minutes of evaluation before the first) a fixed
    180 s ended the tune at its baseline."""
    if first_step_s is None or step_s is None:
        return DEFAULT_TRIAL_TIMEOUT_S
    expected = first_step_s + (warmup + steps) * step_s
    return max(DEFAULT_TRIAL_TIMEOUT_S, 3 * expected)


@dataclass(frozen=True)
class Settings:
    recipe: str
    budget_s: float = 300.0
    steps: int = TrialSpec.steps  # measured steps per trial
    warmup: int = TrialSpec.warmup
    run_steps: int = 1000  # the planned run length, over which a compile must pay off
    seeds: tuple[int, int] = (0, 1)
    device: str = "auto"
    memory_budget_bytes: int | None = None
    lr_scaling: str = lr.DEFAULT
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S
    # The option that changes ``trial_timeout_s``, named in a timeout's reason (None: no option).
    timeout_option: str | None = None
    # A script tune: ``recipe`` is the script, run with these arguments in ``cwd`` (TrialSpec).
    script_args: tuple[str, ...] | None = None
    cwd: str | None = None
    retry_failed: bool = False  # run cached failures again, not only the transient ones
    # Only the baseline and each candidate alone (``torchpace doctor --verify``): no greedy
    # combination, batch-size search, loader stage or confirmation.
    alone_only: bool = False
    # The batch size is the experiment's (``--keep-batch-size``): no batch-size search.
    keep_batch_size: bool = False
    # A trial whose loss ended below the baseline's band (it trained lower) may be kept.
    accept_lower: bool = False


# Failures that say nothing about the trial's plan: the machine ran out of time, disk or
# patience (a timeout, ENOSPC, a kill from outside). Cached with their cause, run again on the
# next tune instead of being replayed from the cache forever (issue 17).
_TRANSIENT = re.compile(
    r"No space left on device|Errno 28|killed by SIG(KILL|TERM|INT|HUP)|Disk quota exceeded"
)


def transient(result: TrialResult) -> bool:
    """Whether a failed trial's cause is the machine's, not the plan's."""
    return result.status == "timeout" or bool(_TRANSIENT.search(result.reason or ""))


@dataclass
class Outcome:
    plan: Plan
    rows: list[Row]
    band: Band | None
    trials: list[TrialResult]
    batch_search: list[dict[str, Any]] = field(default_factory=list)
    loader: dict[str, Any] = field(default_factory=dict)
    confirm: dict[str, Any] = field(default_factory=dict)
    skipped_for_budget: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    cached_trials: int = 0
    # The two baseline trials (seeds 0 and 1): rows compare against the first, trials run from
    # its seed; the second gives the loss band, and ``doctor --verify`` its check of the speed.
    baselines: tuple[TrialResult, ...] = ()
    # The rows whose verdict the machine's noise kept from being drawn (tune.noise).
    noisy: list[str] = field(default_factory=list)
    # Each timed row's baselines, before and after its trial, by the row's name.
    pairs: dict[str, Pair] = field(default_factory=dict)
    # The trials that ran beside other processes' work (tune.noise.load_noise), by name.
    loaded_trials: list[str] = field(default_factory=list)
    # The plan's gain in samples/s from its trials, each against the baselines next to it (None
    # for the script as written): the per-step figure where no paired confirmation ran.
    plan_gain: float | None = None


Progress = Callable[[str, float], None]  # (what runs now, share of the budget used)
# What to try, decided from the baseline trial (a script's models are known only once it ran).
AfterBaseline = Callable[[TrialResult], tuple[list[Candidate], list[NotApplicable]]]


class _Runner:
    """Runs or recalls trials, and keeps the clock of the budget."""

    def __init__(self, s: Settings, results: ResultsFile, workdir: Path, progress: Progress):
        self.s, self.results, self.workdir, self.progress = s, results, workdir, progress
        self.known = results.load()
        if results.skipped:
            print(
                f"torchpace tune: {results.skipped} unreadable line(s) in {results.path} were "
                "skipped; their trials run again",
                file=sys.stderr,
            )
        self.t0 = time.perf_counter()
        self.stage = "the search"  # the search's stage, for the progress bar
        self.trials: list[TrialResult] = []
        self.cached = 0
        self.costs: list[float] = []
        # The budget is charged each trial's recorded cost, cached or not, so that a re-run of
        # an unchanged recipe makes the same decisions and reads every trial from the cache.
        self.spent = 0.0

    def left(self) -> float:
        return self.s.budget_s - self.spent

    def affordable(self, compile_trial: bool = False, paired: bool = False) -> bool:
        """Whether another trial fits: the median cost so far (×2.5 for a compile) is left, and
        one more for the baseline after it when it is ``paired``."""
        typical = statistics.median(self.costs) if self.costs else 10.0
        return self.left() > typical * ((2.5 if compile_trial else 1.0) + (1.0 if paired else 0.0))

    def run(
        self,
        name: str,
        plan: Plan,
        techniques: tuple[str, ...] = (),
        **kw: Any,
    ) -> TrialResult:
        """Run the trial, or recall it from the cache; ``attempt=2`` is its run again after
        the machine's noise spoiled the first (a trial of its own)."""
        spec = TrialSpec(
            name=name,
            recipe=self.s.recipe,
            plan=plan.to_dict(),
            seed=kw.get("seed", self.s.seeds[0]),
            warmup=self.s.warmup,
            steps=kw.get("steps", self.s.steps),
            techniques=techniques,
            device=self.s.device,
            memory_budget_bytes=self.s.memory_budget_bytes,
            loader_only=kw.get("loader_only", False),
            args=self.s.script_args,
            cwd=self.s.cwd,
            attempt=kw.get("attempt", 1),
            follows=kw.get("follows"),
        )
        used = 1 - max(self.left(), 0) / self.s.budget_s
        self.progress(f"{self.stage}: {name} (trial {len(self.trials) + 1})", used)
        cached = self.known.get(spec.key())
        if (
            cached is not None
            and cached.status != "ok"
            and (self.s.retry_failed or transient(cached))
        ):
            cached = None  # a failure worth another try: the machine's, or asked for
        if cached is not None and self.s.retry_failed and load_noise([("", cached)]):
            cached = None  # measured beside other processes' work: run again when asked
        if cached is not None:
            self.cached += 1
            result = dataclasses.replace(cached, name=name)  # the same run, in another role
        else:
            t = time.perf_counter()
            probe = LoadProbe()  # the trial's process is ours: only other processes count
            result = run_trial(spec, timeout_s=self.s.trial_timeout_s, workdir=self.workdir)
            # /proc/stat counts in 10 ms ticks: a window under LOAD_WINDOW_S reads nothing sure
            long_enough = time.perf_counter() - t >= LOAD_WINDOW_S
            load = probe.foreign_cores() if long_enough else None
            result = dataclasses.replace(
                result,
                extra={**result.extra, "foreign_cores": None if load is None else round(load, 2)},
            )
            if result.status == "timeout" and self.s.timeout_option:
                more = f"; give trials more time with {self.s.timeout_option} SECONDS"
                result = dataclasses.replace(result, reason=(result.reason or "") + more)
            if not result.wall_seconds:
                result = dataclasses.replace(result, wall_seconds=time.perf_counter() - t)
            self.results.append(result)
            self.known[spec.key()] = result
        self.costs.append(result.wall_seconds)
        self.spent += result.wall_seconds
        self.trials.append(result)
        return result


@dataclass(frozen=True)
class Pair:
    """The two baselines a timed trial is compared with (``before`` and ``after`` it in time)
    and why that comparison cannot be judged ([] when it can)."""

    before: TrialResult
    after: TrialResult
    noise: list[str]

    @property
    def reference(self) -> TrialResult:
        """The baseline the trial's speed-up is against: ``before`` with the geometric mean of
        the two median steps, so a machine that drifted between them moves both sides."""
        m0, m1 = self.before.median_step_s, self.after.median_step_s
        if not (m0 and m1) or self.after is self.before:
            return self.before
        return _at_median(self.before, between(m0, m1))


def _at_median(t: TrialResult, median_step_s: float) -> TrialResult:
    """``t`` as a baseline whose median step is ``median_step_s``, its samples/s to match (a
    batch size's gain reads the one, a technique's the other)."""
    n = t.samples_per_step
    return dataclasses.replace(
        t,
        median_step_s=median_step_s,
        samples_per_s=n / median_step_s if n and median_step_s else t.samples_per_s,
    )


class _Baselines:
    """The script as written, run again after each timed trial (seed 0, keyed by the trial it
    follows: a tune or ``doctor --verify`` that recalls the trial recalls the baseline measured
    next to it): the newest is the next trial's baseline before it. Where a recalled pair comes
    from other times than its neighbours, they disagree and the trial is noise, run again."""

    def __init__(self, runner: _Runner, plan: Plan, runs: list[TrialResult], last: TrialResult):
        self.runner, self.plan, self.last = runner, plan, last
        # every run of the script as written so far, in the order they ran: its process noise
        self.medians = [r.median_step_s for r in runs if r.median_step_s]

    def sigma(self) -> float:
        """The script's own process-to-process noise so far (tune.noise.process_sigma)."""
        return process_sigma(self.medians)

    def pair(self, r: TrialResult) -> Pair:
        """Run the baseline after ``r`` and judge ``r`` between it and the one before."""
        before = self.last
        after = self.runner.run(f"baseline, after {r.name}", self.plan, follows=r.key)
        if after.status == "ok" and after.median_step_s:
            self.last = after
            self.medians.append(after.median_step_s)
        else:  # a baseline that failed now says nothing of the machine: the one before stands
            after = before
        return Pair(before, after, trials_noise(before, after, r, min_gain=MIN_GAIN))


def _throughput(base: TrialResult, r: TrialResult) -> float | None:
    """Samples/s of ``r`` over ``base``'s (a batch size's gain), None where either is unknown."""
    if not (r.samples_per_s and base.samples_per_s):
        return None
    return r.samples_per_s / base.samples_per_s


def _speedup(base: TrialResult, r: TrialResult) -> tuple[float, float, float]:
    """Baseline median step time over the trial's, with the spread from the quartiles."""
    assert base.median_step_s and r.median_step_s
    lo = base.median_step_s / (r.q3_step_s or r.median_step_s)
    hi = base.median_step_s / (r.q1_step_s or r.median_step_s)
    return base.median_step_s / r.median_step_s, lo, hi


def _effective(base: TrialResult, r: TrialResult, run_steps: int) -> float:
    """Speed-up of ``r`` over ``base`` across a run of ``run_steps`` steps, each side's compile
    time spread over them: once the plan compiles, a trial that also compiles is judged against
    a best that paid its compile too, not against a free one."""
    assert base.median_step_s and r.median_step_s
    before = base.median_step_s + (base.compile_seconds or 0.0) / run_steps
    return before / (r.median_step_s + (r.compile_seconds or 0.0) / run_steps)


def _changed_nothing(r: TrialResult, techniques: tuple[str, ...]) -> str:
    """Why none of ``techniques`` changed anything in trial ``r`` (a model torch.fx cannot
    trace, an optimizer with no fused kernel...), or "" when one of them did."""
    not_applied = r.extra.get("not_applied") or {}
    if any(t in r.applied for t in techniques) or not all(t in not_applied for t in techniques):
        return ""
    return "; ".join(dict.fromkeys(str(not_applied[t]) for t in techniques))


def _judge(
    r: TrialResult,
    base: TrialResult,
    band: Band,
    techniques: tuple[str, ...],
    accept_lower: bool = False,
) -> Verdict:
    """The guard's verdict on ``r``; with ``accept_lower`` a loss that ended below the band (it
    trained lower) passes, its reason kept."""
    v = _guard(r, base, band, techniques)
    if accept_lower and v.lower:
        return dataclasses.replace(v, ok=True)
    return v


def _guard(r: TrialResult, base: TrialResult, band: Band, techniques: tuple[str, ...]) -> Verdict:
    return check(
        r.losses,
        baseline_losses=base.losses,
        band=band,
        changes_numerics=changes_numerics(techniques),
        changes_random_stream=changes_random_stream(techniques),
        scaler_skip_rate=r.scaler_skip_rate,
        # a CUDA baseline (its memory read from the allocator) is not bitwise reproducible
        reproducible=base.memory_kind != "cuda-allocator",
    )


def tune(
    s: Settings,
    cands: list[Candidate],
    not_here: list[NotApplicable],
    *,
    results: ResultsFile,
    workdir: Path,
    progress: Progress = lambda name, used: None,
    baseline: Plan | None = None,
    after_baseline: AfterBaseline | None = None,
) -> Outcome:
    """Search the plan. ``baseline`` is the plan of the run as written (default ``Plan()``: what
    fit() always does); ``after_baseline``, if given, replaces ``cands`` and ``not_here`` from
    the baseline trial's result. One run at a time per cache directory (:mod:`torchpace._lock`):
    a second one raises :class:`torchpace._lock.Locked` before any trial."""
    with exclusive(
        workdir.parent / "lock",
        f"the tune cache {workdir.parent}",
        "wait for that tune to finish, or give this one its own cache with "
        "TORCHPACE_CACHE_DIR=<dir>",
    ):
        return _search(s, cands, not_here, results, workdir, progress, baseline, after_baseline)


def _search(
    s: Settings,
    cands: list[Candidate],
    not_here: list[NotApplicable],
    results: ResultsFile,
    workdir: Path,
    progress: Progress,
    baseline: Plan | None,
    after_baseline: AfterBaseline | None,
) -> Outcome:
    runner = _Runner(s, results, workdir, progress)
    none = Plan() if baseline is None else baseline
    # 1. The baseline, from two seeds: its speed, and the seed-to-seed band of its loss.
    runner.stage = "1/6 the baseline, two seeds"
    base = runner.run("baseline", none)
    other = runner.run(f"baseline, seed {s.seeds[1]}", none, seed=s.seeds[1])
    for b in (base, other):
        if b.status != "ok":
            raise RuntimeError(f"the baseline trial {b.status}: {b.reason}")
    band = Band.from_baselines([base.losses, other.losses])
    if after_baseline is not None:
        cands, not_here = after_baseline(base)
    rows = [
        Row(
            "baseline",
            (),
            1.0,
            None,
            None,
            1.0,
            base.peak_memory_bytes,
            band.delta(statistics.fmean(base.losses[-band.tail :])),
            "kept",
        )
    ]
    out = Outcome(none, rows, band, runner.trials, baselines=(base, other))

    # seed 0's baseline is the first trial's baseline before it: the trials run seed 0's data
    baselines = _Baselines(runner, none, [base, other], last=base)

    def paired(
        name: str,
        plan: Plan,
        techniques: tuple[str, ...],
        r: TrialResult,
        timed: bool,
        line: float = MIN_GAIN,
        floor: float = 1.0,
    ) -> tuple[TrialResult, TrialResult, list[str]]:
        """``r``, the baseline its speed-up is against, and why its timing cannot be judged
        ([] when it can). A ``timed`` trial (the guard passed: its verdict rests on its timing)
        is judged between the baselines before and after it. It runs again, each time with a
        baseline after it, while the budget allows and its verdict is not settled: a run the
        machine's noise spoiled (tune.noise.trials_noise) is set aside, at most twice, and the
        runs that count are pooled until their mean speed-up stands clear of the script's
        own process-to-process noise (tune.noise.settles) against ``line`` (the speed-up over
        the script as written that keeps it) and ``floor`` (what it must beat: 1, or the
        best combination's), at most MAX_ATTEMPTS runs. The baseline returned carries the
        pooled speed-up. An untimed one is shown against the newest baseline."""
        if not timed:
            return r, baselines.last, []
        runs: list[tuple[TrialResult, Pair]] = []
        while True:
            pair = baselines.pair(r)
            runs.append((r, pair))
            counted = [(t, p) for t, p in runs if not p.noise and t.median_step_s]
            gains = [
                math.log((p.reference.median_step_s or 0.0) / (t.median_step_s or 1.0))
                for t, p in counted
            ]
            settled = settles(gains, baselines.sigma(), line=line, floor=floor)
            spoiled = len(runs) - len(counted)
            if (
                settled
                or spoiled >= 2
                or len(runs) >= MAX_ATTEMPTS
                or not runner.affordable(paired=True)
            ):
                break
            again = runner.run(name, plan, techniques, attempt=len(runs) + 1)
            if again.status != "ok" or not again.median_step_s:
                break
            r = again
        if not counted:  # every run spoiled: the last one's reasons
            out.pairs[name] = pair
            return r, pair.reference, pair.noise
        t, p = counted[-1]
        g = math.exp(statistics.fmean(gains))
        noise = (
            [] if settled else [unsettled(gains, baselines.sigma(), len(baselines.medians), line)]
        )
        out.pairs[name] = dataclasses.replace(p, noise=noise)
        # the pooled speed-up, as a baseline whose median is the last counted run's times it
        ref = _at_median(p.reference, (t.median_step_s or 0.0) * g)
        return t, ref, noise

    # 2. Each technique alone.
    runner.stage = "2/6 each technique alone"
    # converged, may join greedy: (candidate, trial, effective speed-up, its baseline)
    alone: dict[str, tuple[Candidate, TrialResult, float, TrialResult]] = {}
    for c in cands:
        if not runner.affordable(compile_trial="compile" in c.changes, paired=True):
            out.skipped_for_budget.append(c.name)
            rows.append(Row(c.name, c.techniques, verdict=OUT_OF_BUDGET))
            continue
        r = runner.run(c.name, none.replace(**c.changes), c.techniques)
        if r.status != "ok":
            rows.append(Row(c.name, c.techniques, verdict=rejected(f"{r.status}: {r.reason}")))
            continue
        why_not = _changed_nothing(r, c.techniques)
        if why_not:  # the run was the baseline again: its speed-up would be noise
            rows.append(Row(c.name, c.techniques, verdict=not_applicable(why_not)))
            continue
        v = _judge(r, base, band, c.techniques, s.accept_lower)
        r, ref, noise = paired(c.name, none.replace(**c.changes), c.techniques, r, v.ok)
        gain, lo, hi = _speedup(ref, r)
        effective = _effective(ref, r, s.run_steps)
        if not v.ok:
            verdict = trained_lower(v.reason, False) if v.lower else rejected(v.reason)
        elif noise:
            verdict = not_judged(noise)
            out.noisy.append(c.name)
        elif effective < MIN_GAIN:
            verdict = not_worth_it(effective)
            if r.compile_seconds:
                verdict += f", with {r.compile_seconds:.0f} s of compile over {s.run_steps} steps"
            if effective >= GREEDY_FLOOR or r.compile_seconds:
                alone[c.name] = (c, r, effective, ref)  # tried again in combination below
        else:
            verdict = (
                trained_lower(v.reason, True)
                if v.lower
                else f"kept alone ({v.reason})"
                if v.reason
                else "kept alone"
            )
            alone[c.name] = (c, r, effective, ref)
        rows.append(
            Row(
                c.name, c.techniques, gain, lo, hi, None, r.peak_memory_bytes, v.loss_delta, verdict
            )
        )
    for n in not_here:
        rows.append(Row(n.name, n.techniques, verdict=not_applicable(n.reason)))
    if s.alone_only:
        _budget_spent_on_load(out)
        out.elapsed_s = time.perf_counter() - runner.t0
        out.cached_trials = runner.cached
        return out

    # 3. Greedy: add the winners, best first, keeping each only if the whole still gains.
    runner.stage = "3/6 combining the winners"
    # the best so far, and the baseline it was measured against: a combination's gain over the
    # best is the ratio of the two speed-ups, each against the baselines next to it in time
    best_plan, best, best_ref = none, base, base
    for c, measured, _, measured_ref in sorted(alone.values(), key=lambda t: -t[2]):
        trial_plan = best_plan.replace(**c.changes)
        if trial_plan == best_plan:
            continue
        techniques = trial_plan.techniques()
        if best_plan == none:
            # The first addition is the technique alone, measured in step 2: no trial to repeat,
            # so a budget spent by step 2 still keeps the best single technique.
            r, ref = measured, measured_ref
        elif not runner.affordable(compile_trial="compile" in c.changes, paired=True):
            out.skipped_for_budget.append(f"+ {c.name}")
            continue
        else:
            r = runner.run(f"+ {c.name}", trial_plan, techniques)
        if r.status != "ok":
            rows.append(
                Row(f"+ {c.name}", c.techniques, verdict=rejected(f"{r.status}: {r.reason}"))
            )
            continue
        v = _judge(r, base, band, techniques, s.accept_lower)
        if r is not measured:
            # it must beat the best so far, not the script as written
            over = _effective(best_ref, best, s.run_steps)
            r, ref, noise = paired(
                f"+ {c.name}", trial_plan, techniques, r, v.ok, over * MIN_GAIN, over
            )
        else:  # the technique alone, judged in step 2
            noise = []
        gain_vs_best = _effective(ref, r, s.run_steps) / _effective(best_ref, best, s.run_steps)
        cumulative, lo, hi = _speedup(ref, r)
        keep = v.ok and not noise and gain_vs_best >= MIN_GAIN
        verdict = (
            "kept"
            if keep
            else (
                (trained_lower(v.reason, False) if v.lower else rejected(v.reason))
                if not v.ok
                else not_judged(noise)
                if noise
                else not_worth_it(gain_vs_best)
            )
        )
        if noise:
            out.noisy.append(f"+ {c.name}")
        rows.append(
            Row(
                f"+ {c.name}",
                c.techniques,
                None,
                lo,
                hi,
                cumulative,
                r.peak_memory_bytes,
                v.loss_delta,
                verdict,
            )
        )
        if keep:
            best_plan, best, best_ref = trial_plan, r, ref

    def pair_gain(r: TrialResult, line: float, floor: float) -> tuple[float | None, list[str]]:
        """``r``'s samples/s over the baselines' just before and after it (run now), and why
        it cannot be judged: its noise between them, or a gain that does not stand clear of
        the script's process noise against ``line`` (the gain that keeps it) and ``floor``
        (the best's gain, which it must beat), both over the baselines next to them."""
        pair = baselines.pair(r)
        g = _throughput(pair.reference, r)
        noise = list(pair.noise)
        sigma = baselines.sigma()
        if not noise and g and not settles([math.log(g)], sigma, line=line, floor=floor):
            noise.append(unsettled([math.log(g)], sigma, len(baselines.medians), line))
        out.pairs[r.name] = dataclasses.replace(pair, noise=noise)
        return g, noise

    # from here on a trial's gain is in samples/s (its batch may differ): the best's over the
    # baselines next to it, and each trial's over its own, so a drifting machine moves neither
    best_gain = _throughput(best_ref, best) or 1.0
    runner.stage = "4/6 the batch size"
    # 4. The batch size: doubling while it pays and converges, bisecting after an OOM; unless
    # the batch size is part of the experiment (--keep-batch-size).
    if s.keep_batch_size:
        rows.append(Row("batch size", TECHNIQUE_BATCH, verdict=KEPT_AS_WRITTEN))
    else:
        found = search_batch(
            lambda name, plan, steps: runner.run(name, plan, TECHNIQUE_BATCH, steps=steps),
            lambda: runner.affordable(paired=True),
            plan=best_plan,
            best=best,
            base=base,
            band=band,
            # As many samples as the baseline saw at twice its batch: half the steps (and tail).
            steps=max(s.steps // 2, band.tail),
            lr_scaling=s.lr_scaling,
            memory_budget=s.memory_budget_bytes,
            judge=pair_gain,
            best_gain=best_gain,
        )
        best_plan, best, best_gain = found.plan, found.best, found.best_gain
        rows.extend(found.rows)
        if not found.tried and best.batch_size and not runner.affordable(paired=True):
            # said, not left out: a busy machine's slow trials can spend the budget before it
            out.skipped_for_budget.append("batch size")
            rows.append(Row("batch size", TECHNIQUE_BATCH, verdict=OUT_OF_BUDGET))
        out.batch_search = found.tried
        out.noisy += [row.name for row in found.rows if row.verdict.startswith(NOISY)]

    runner.stage = "5/6 the loader"
    # 5. The loader: can the input pipeline alone outrun the step? If not, more workers. (A
    # script's loader cannot run alone: its loader settings are a candidate of step 2 instead.)
    if s.script_args is None and runner.affordable():
        lo_r = runner.run("loader alone", best_plan, ("loader-workers",), loader_only=True)
        if lo_r.status == "ok" and lo_r.samples_per_s and best.samples_per_s:
            ceiling = lo_r.samples_per_s / best.samples_per_s
            out.loader = {
                "loader_samples_per_s": lo_r.samples_per_s,
                "step_samples_per_s": best.samples_per_s,
                "headroom": ceiling,
            }
            verdict = (
                f"the input pipeline alone gives {lo_r.samples_per_s:,.0f} samples/s, "
                f"{ceiling:.1f}× the training step's: "
            )
            bound = ceiling < 1.5
            verdict += (
                "it caps the speed (more workers, faster formats)" if bound else "not the limit"
            )
            rows.append(Row("loader alone", ("fast-input-format",), verdict=verdict))
            # 1.5x: a loader less than half again as fast as the step shows up as data wait.
            # Then workers, doubling up to the cores left beside the main process, with the
            # device's pinning, persistence and prefetch (loader_settings); stop at no gain.
            workers = 1
            while (
                ceiling < 1.5
                and workers < max(2, usable_cores())
                and runner.affordable(paired=True)
            ):
                more = best_plan.replace(loader="auto", loader_workers=workers)
                name = f"loader, {workers} worker{'s' if workers > 1 else ''}"
                r = runner.run(name, more, ("loader-workers",))
                if r.status != "ok" or not (r.median_step_s and best.median_step_s):
                    rows.append(Row(name, ("loader-workers",), verdict=rejected(r.reason)))
                    break
                g_base, noise = pair_gain(r, best_gain * MIN_GAIN, best_gain)
                g = (g_base or 0.0) / best_gain
                keep = g >= MIN_GAIN and not noise
                verdict = "kept" if keep else not_judged(noise) if noise else not_worth_it(g)
                if noise:
                    out.noisy.append(name)
                rows.append(
                    Row(
                        name,
                        ("loader-workers",),
                        g,
                        None,
                        None,
                        None,
                        r.peak_memory_bytes,
                        None,
                        verdict,
                    )
                )
                if not keep:
                    break
                best_plan, best, best_gain, workers = more, r, g_base or best_gain, workers * 2

    # 6. Confirm: baseline and best, interleaved, against each other.
    runner.stage = "6/6 the paired confirmation"
    ratios, confirm_noise = [], []
    if best_plan != none and runner.affordable(paired=True):
        # A B A B A: each run of the plan between two of the baseline, against their geometric
        # mean, so a machine that speeds up or slows down over the rounds does not confirm (or
        # withdraw) a plan; A B A B put every plan run later than its baseline.
        a = runner.run(confirm_trial("baseline", 1), none, seed=100)
        confirm_runs = [a]
        for i in range(CONFIRM_PAIRS):
            if not runner.affordable(paired=True):
                break
            b = runner.run(
                confirm_trial("plan", i + 1), best_plan, best_plan.techniques(), seed=100 + i
            )
            after = runner.run(confirm_trial("baseline", i + 2), none, seed=101 + i)
            around = [x.samples_per_s for x in (a, after) if x.status == "ok" and x.samples_per_s]
            if b.status == "ok" and b.samples_per_s and around:
                ratios.append(b.samples_per_s / between(around[0], around[-1]))
            confirm_runs += [b, after]
            a = after
        if ratios:
            confirm_noise = load_noise([(x.name, x) for x in confirm_runs])
    out.confirm = {
        "ratios": ratios,
        "median": statistics.median(ratios) if ratios else None,
        # A paired round beside other processes' work confirms nothing, either way.
        "noise": confirm_noise,
        # Faster in every paired round, none of them loaded: only then is the median a
        # confirmed figure. Rounds on both sides of 1 (a small GPT's fused AdamW: 0.79x and
        # 1.11x on a quiet machine, whose runs vary 20% from one process to the next) leave the
        # plan on its trials' verdicts, unconfirmed.
        "confirmed": bool(ratios) and min(ratios) >= 1.0 and not confirm_noise,
    }
    if confirm_noise:
        out.noisy.append("confirmation")
        rows.append(Row("confirmation", best_plan.techniques(), verdict=not_judged(confirm_noise)))
    elif ratios and max(ratios) < 1.0:
        # Slower than the baseline in every paired round: the single trials' gain did not hold
        # (seen on nanoGPT: compile ran 10x in its own trial, 0.78x paired). Keep nothing.
        rows.append(
            Row(
                "confirmation",
                best_plan.techniques(),
                verdict=f"plan withdrawn: {', '.join(f'{r:.2f}×' for r in ratios)} against the "
                "baseline in paired rounds; its single trials' gain did not hold",
            )
        )
        out.confirm["withdrawn"] = best_plan.to_dict()
        best_plan = none
    out.plan = best_plan
    out.plan_gain = best_gain if best_plan != none else None
    _budget_spent_on_load(out)
    out.elapsed_s = time.perf_counter() - runner.t0
    out.cached_trials = runner.cached
    return out


def _budget_spent_on_load(out: Outcome) -> None:
    """Rows the budget never reached, on a search whose trials ran beside other processes'
    work, are noise, not a plain "not run": the load made the trials slow (beside two CPU-bound
    processes a small GPT's steps took 4x as long, and its 3 minutes went to its two
    baselines), so a quiet run would have judged them. Sets ``out.loaded_trials``."""
    out.loaded_trials = [t.name for t in out.trials if load_noise([("", t)])]
    if not out.loaded_trials:
        return
    n = len(out.loaded_trials)
    why = not_judged([f"not run: the budget went to {n} trial(s) beside other processes' work"])
    for i, row in enumerate(out.rows):
        if row.verdict == OUT_OF_BUDGET:
            out.rows[i] = dataclasses.replace(row, verdict=why)
            out.noisy.append(row.name)
