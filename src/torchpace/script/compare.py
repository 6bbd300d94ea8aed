"""What ``torchpace compare`` concludes from whole runs: pure functions over what each run
recorded (``script/compare_worker.py``, in its own process). No torch here.

A user lives the whole run, not a step: a plan that is 1.23x faster per step made a 120-iteration
GPT run 0.93x, because evaluation and generation were not sped up (issue 30). So each run is
split into the time inside its training steps and the time outside them, and the two sides are
compared on the wall time of the whole run, the time per training step, and the time to reach the
loss the baseline ends at, each as paired ratios over rounds (each candidate run against the
baseline runs just before and just after it), with their range.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from torchpace.measure.noise import MAX_FOREIGN_CORES
from torchpace.measure.stats import between
from torchpace.runtime.work import batch_work_note
from torchpace.tune.convergence import Band
from torchpace.tune.whole_run import Run, tail_for

SCHEMA = "torchpace.compare/1"
# The slowdown a gate allows before it fails, by default: 5% of the baseline's time.
DEFAULT_MAX_SLOWDOWN = 0.05
# Two runs trained "the same work" when their samples differ by at most 1%.
SAME_WORK = 0.01

Verdict = Literal["faster", "within", "slower", "noisy", "other work"]


@dataclass(frozen=True)
class Ratio:
    """A paired speed-up over rounds: baseline time / candidate time in each round (above 1:
    the candidate is faster), with the median and the range."""

    name: str
    per_round: tuple[float, ...]
    verdict: Verdict
    why: str

    @property
    def median(self) -> float:
        return statistics.median(self.per_round)

    @property
    def lo(self) -> float:
        return min(self.per_round)

    @property
    def hi(self) -> float:
        return max(self.per_round)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "speedup": self.median,
            "lo": self.lo,
            "hi": self.hi,
            "per_round": list(self.per_round),
            "verdict": self.verdict,
            "why": self.why,
        }


def _rel_range(values: Sequence[float]) -> float:
    m = statistics.median(values)
    return (max(values) - min(values)) / m if m > 0 else math.inf


def judge_times(
    name: str,
    base: Sequence[float],
    cand: Sequence[float],
    *,
    max_slowdown: float,
    loaded: bool,
) -> Ratio | None:
    """Paired ratios of one time (wall, step, time to loss) over rounds, and a verdict.
    ``base[i]`` is round i's reference (the geometric mean of the baseline runs around
    ``cand[i]``).

    "slower": every round's candidate took over ``1 + max_slowdown`` times its baseline, and the
    median slowdown exceeds each side's own round-to-round spread (twice it, when other
    processes ran beside the runs); "faster" likewise the other way; "noisy" when the median
    says one thing and the rounds or the spread do not; "within" otherwise. The load alone never
    makes a verdict: a sleep-bound step measures the same beside a busy core, and its verdict
    stands.
    """
    pairs = [(b, c) for b, c in zip(base, cand, strict=True) if b > 0 and c > 0]
    if not pairs:
        return None
    ratios = tuple(b / c for b, c in pairs)
    med = statistics.median(ratios)
    spread = max(_rel_range([b for b, _ in pairs]), _rel_range([c for _, c in pairs]))
    allowed_spread = spread * (2.0 if loaded else 1.0)
    slowdown = 1 / med - 1
    gain = med - 1
    if slowdown > max_slowdown:
        if all(1 / r - 1 > max_slowdown for r in ratios) and slowdown > allowed_spread:
            return Ratio(name, ratios, "slower", f"{slowdown:.1%} slower in every round")
        return Ratio(
            name,
            ratios,
            "noisy",
            f"{slowdown:.1%} slower by the median, but the rounds spread {spread:.1%}"
            + (" beside other processes' work" if loaded else ""),
        )
    if gain > max_slowdown:
        if all(r - 1 > max_slowdown for r in ratios) and gain > allowed_spread:
            return Ratio(name, ratios, "faster", f"{gain:.1%} faster in every round")
        return Ratio(
            name,
            ratios,
            "noisy",
            f"{gain:.1%} faster by the median, but the rounds spread {spread:.1%}"
            + (" beside other processes' work" if loaded else ""),
        )
    return Ratio(name, ratios, "within", f"within {max_slowdown:.0%} of the baseline")


@dataclass(frozen=True)
class LossVerdict:
    ok: bool
    lower: bool
    why: str
    band: tuple[float, float] | None
    candidate: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "trained_lower": self.lower,
            "why": self.why,
            "band": list(self.band) if self.band else None,
            "final_loss": self.candidate,
        }


def judge_loss(base: Sequence[Run], cand: Sequence[Run]) -> LossVerdict:
    """Does the candidate's loss end inside the baseline's seed band? The band is the tune's
    (``tune.convergence.Band``: the baseline rounds' final losses, each round seeded apart,
    widened by 5% of the centre); the candidate's median final loss is judged. Runs that trained
    other numbers of samples are judged at the baseline's samples."""
    if any(not r.losses for r in (*base, *cand)):
        return LossVerdict(True, False, "no loss recorded on one side: not judged", None, None)
    bad = [r for r in cand if any(not math.isfinite(x) for x in r.losses)]
    if bad:
        return LossVerdict(False, False, "the candidate's loss became NaN or Inf", None, None)
    n = min(r.steps for r in base)
    k = tail_for(n)
    band = Band.from_baselines(
        [r.losses[:n] for r in base] if len(base) > 1 else [base[0].losses[:n]] * 2, tail=k
    )
    target = min(x.samples_total for x in base)
    per_step = statistics.median([x.samples_total / x.steps for x in base if x.steps])
    finals = []
    for r in cand:
        if abs(r.samples_total - target) <= SAME_WORK * target or not r.samples:
            finals.append(math.fsum(r.losses[-k:]) / k)
            continue
        window = equal_samples_window(r.samples, target, k * per_step)
        if not window:
            return LossVerdict(
                True, False, f"the candidate trained fewer than {target:,} samples: not judged",
                (band.lo, band.hi), None)  # fmt: skip
        finals.append(math.fsum(r.losses[i] for i in window) / len(window))
    value = statistics.median(finals)
    span = (band.lo, band.hi)
    if band.lo <= value <= band.hi:
        return LossVerdict(True, False, f"final loss {value:.4g} inside {band}", span, value)
    if value < band.lo:
        return LossVerdict(True, True, f"final loss {value:.4g} below {band}: trained lower", span,
                           value)  # fmt: skip
    return LossVerdict(False, False, f"final loss {value:.4g} above the band {band}", span, value)


def equal_samples_window(samples: Sequence[int], target: int, width: float) -> list[int]:
    """The steps (indices) of a run whose samples fall in the baseline's final window: the
    samples from ``target - width`` to ``target``, up to the first step that reaches ``target``
    (as ``tune.convergence.check_at_equal_samples`` judges a trial with another batch size).
    Empty when the run never reaches ``target``."""
    out: list[int] = []
    before = 0
    for i, n in enumerate(samples):
        after = before + n
        if after > target - width:
            out.append(i)
        if after >= target:
            return out
        before = after
    return []


@dataclass(frozen=True)
class Comparison:
    base: tuple[Run, ...]
    cand: tuple[Run, ...]
    base_name: str
    cand_name: str
    max_slowdown: float
    ratios: dict[str, Ratio]
    loss: LossVerdict
    loaded: list[str]
    work: list[str]
    target_loss: float | None

    @property
    def regressed(self) -> list[str]:
        """Why the candidate fails the gate: slower beyond the noise, or a loss above the band."""
        out = [f"{r.name}: {r.why}" for r in self.ratios.values() if r.verdict == "slower"]
        if not self.loss.ok:
            out.append(f"loss: {self.loss.why}")
        return out

    @property
    def noisy(self) -> list[str]:
        return [f"{r.name}: {r.why}" for r in self.ratios.values() if r.verdict == "noisy"]

    def to_json(
        self, *, script: str, args: Sequence[str], plan: str | None, against: str | None
    ) -> dict[str, Any]:
        """The result file ``compare --json`` writes and ``torchpace report`` reads."""
        return {
            "schema": SCHEMA,
            "script": script,
            "args": list(args),
            "plan": plan,
            "against": against,
            "rounds": len(self.cand),
            **self.to_dict(),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.base_name,
            "candidate": self.cand_name,
            "max_slowdown": self.max_slowdown,
            "ratios": {k: r.to_dict() for k, r in self.ratios.items()},
            "loss": self.loss.to_dict(),
            "target_loss": self.target_loss,
            "load": self.loaded,
            "work": self.work,
            "regressed": self.regressed,
            "noisy": self.noisy,
            "runs": [r.to_dict() for r in (*self.base, *self.cand)],
        }


def compare_runs(
    base: Sequence[Run],
    cand: Sequence[Run],
    *,
    base_name: str,
    cand_name: str,
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN,
    flags: Sequence[tuple[str, int | None]] = (),
    args: Sequence[str] = (),
) -> Comparison:
    """Everything ``compare`` reports, from the runs in the order they ran: cand[i] between
    base[i] and base[i + 1] (one baseline run more than rounds). Each time of cand[i] is judged
    against the geometric mean of its two neighbours' (``measure.stats.between``). ``flags``
    are the script's step-count options (:func:`torchpace.runtime.work.step_flags`)."""
    if not cand or len(base) != len(cand) + 1:
        raise ValueError(
            "need each candidate run between two baseline runs (one baseline run more than "
            f"rounds); got {len(base)} baseline and {len(cand)} candidate runs"
        )
    loaded = [
        f"other processes used {r.foreign_cores:.2f} cores during {r.side} round {r.round + 1}"
        for r in (*base, *cand)
        if r.foreign_cores is not None and r.foreign_cores > MAX_FOREIGN_CORES
    ]
    ratios: dict[str, Ratio] = {}

    def add(name: str, of: Callable[[Run], float | None]) -> None:
        b, c = [of(r) for r in base], [of(r) for r in cand]
        if any(x is None for x in (*b, *c)):
            return
        ref = [between(x, y) for x, y in itertools.pairwise(b)]  # type: ignore[arg-type]
        got = judge_times(name, ref, c, max_slowdown=max_slowdown, loaded=bool(loaded))  # type: ignore[arg-type]
        if got is not None:
            ratios[name] = got

    work = work_notes(base, cand, flags, args)
    add("whole run", lambda r: r.wall_s)
    if not work:
        add("training steps", lambda r: r.in_steps_s)
        add("time per step", lambda r: r.median_step_s)
    else:
        # Steps of another size are not compared step for step: per sample, and to the
        # baseline's samples, instead. The whole run trains other work: shown, not judged.
        add("time per sample", _per_sample)
        target_samples = min(r.samples_total for r in base)
        add("time to the baseline's samples", lambda r: r.time_to_samples(target_samples))
        whole = ratios.get("whole run")
        if whole is not None and whole.verdict != "noisy":
            ratios["whole run"] = dataclasses.replace(
                whole, verdict="other work", why="the sides train other numbers of samples"
            )
    finals = [r.final_loss for r in base]
    target = max(finals) if finals and all(f is not None for f in finals) else None  # type: ignore[type-var]
    if target is not None:
        add("time to the baseline's loss", lambda r: r.time_to_loss(target))
    return Comparison(
        tuple(base),
        tuple(cand),
        base_name,
        cand_name,
        max_slowdown,
        ratios,
        judge_loss(base, cand),
        loaded,
        work,
        target,
    )


def _per_sample(r: Run) -> float | None:
    if r.median_step_s is None or not r.samples_total or not r.steps:
        return None
    return r.median_step_s / (r.samples_total / r.steps)


def work_notes(
    base: Sequence[Run],
    cand: Sequence[Run],
    flags: Sequence[tuple[str, int | None]],
    args: Sequence[str] = (),
) -> list[str]:
    """What the user must know when the two sides trained different amounts: a plan that changes
    the batch of a step-bounded script changes the work, and the flag that puts it back. Each
    candidate run is held against the baseline run of its own round, which drew the same seed:
    a script that stops on its loss trains as much as its seed makes it (pytorch/examples'
    regression: 287 to 830 steps), and medians over the baseline's extra run said "the work
    changes" of two identical sides."""
    paired = base[: len(cand)]
    if all(
        abs(c.samples_total - b.samples_total) <= SAME_WORK * b.samples_total
        for b, c in zip(paired, cand, strict=True)
    ):
        return []
    b = statistics.median([r.samples_total for r in paired])
    c = statistics.median([r.samples_total for r in cand])
    if b <= 0:
        return []
    bs_b, bs_c = base[0].batch_size, cand[0].batch_size
    steps_b = statistics.median([r.steps for r in paired])
    steps_c = statistics.median([r.steps for r in cand])
    notes = [
        f"the work changes: as written the run trains {b:,.0f} samples in {steps_b:,.0f} steps, "
        f"with the plan {c:,.0f} in {steps_c:,.0f}"
        + (f" (batch {bs_b} → {bs_c})" if bs_b and bs_c and bs_b != bs_c else "")
        + "; compared at equal samples and at equal loss below"
    ]
    if steps_b == steps_c and bs_b and bs_c:
        note = batch_work_note(flags, args, bs_b, bs_c) if flags else None
        if note:
            notes.append(note)
    return notes
