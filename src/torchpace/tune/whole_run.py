"""One whole run of a training script, to its own end, in a fresh process: what ``compare``
judges over rounds and what the tune's whole-run estimate reads (issue 30). The run itself is
``python -m torchpace.script.compare_worker`` (named here, not imported: the worker applies a
plan by the script runtime's interposition, a layer above this one); :class:`Run` is what it
recorded, on the parent's clock. No torch here.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchpace.tune.convergence import DEFAULT_TAIL

WORKER = "torchpace.script.compare_worker"
# A gap between two step ends longer than 3 median steps holds other work (evaluation, a
# checkpoint, generation, a compilation): it counts one median step as training and the rest as
# outside the steps. 3: a step of a varying-length batch is rarely 3x the median one.
GAP_STEPS = 3.0


@dataclass(frozen=True)
class Run:
    """One whole run of one side, as the parent saw it. Times are seconds since the parent
    started the process (``start_s`` of them before the worker entered Python code)."""

    side: str
    round: int
    wall_s: float
    start_s: float
    exit_code: int
    outcome: str
    first_forward_s: float | None
    step_ends_s: tuple[float, ...]
    losses: tuple[float, ...]
    samples: tuple[int, ...]
    foreign_cores: float | None = None
    batch_size: int | None = None
    applied: tuple[str, ...] = ()
    not_applied: dict[str, str] = field(default_factory=dict)
    seed: int | None = None

    @classmethod
    def from_worker(
        cls,
        side: str,
        round_: int,
        out: dict[str, Any],
        *,
        spawned_epoch: float,
        wall_s: float,
        foreign_cores: float | None,
        seed: int | None,
    ) -> Run:
        start = max(float(out["entered"]) - spawned_epoch, 0.0)
        ff = out.get("first_forward_s")
        return cls(
            side=side,
            round=round_,
            wall_s=wall_s,
            start_s=start,
            exit_code=int(out["exit_code"]),
            outcome=str(out["outcome"]),
            first_forward_s=None if ff is None else start + float(ff),
            step_ends_s=tuple(start + float(t) for t in out["step_ends_s"]),
            losses=tuple(float(x) for x in out["losses"]),
            samples=tuple(int(n) for n in out["samples"]),
            foreign_cores=foreign_cores,
            batch_size=out.get("batch_size"),
            applied=tuple(out.get("applied") or ()),
            not_applied=dict(out.get("not_applied") or {}),
            seed=seed,
        )

    @property
    def steps(self) -> int:
        return len(self.step_ends_s)

    @property
    def samples_total(self) -> int:
        return sum(self.samples)

    def gaps(self) -> list[float]:
        """Each step's length: from the previous step's end (the first: from the first training
        forward) to its own end."""
        if not self.step_ends_s:
            return []
        first = self.first_forward_s
        starts = [first if first is not None else self.step_ends_s[0], *self.step_ends_s[:-1]]
        return [max(e - s, 0.0) for s, e in zip(starts, self.step_ends_s, strict=True)]

    @property
    def median_step_s(self) -> float | None:
        gaps = self.gaps()
        # The first step holds one-off work (allocator growth, cuDNN autotuning, compilation).
        steady = gaps[1:] or gaps
        return statistics.median(steady) if steady else None

    @property
    def in_steps_s(self) -> float:
        """Time inside training steps: every step's length, a long gap counted as one median
        step (:data:`GAP_STEPS`)."""
        m = self.median_step_s
        if m is None:
            return 0.0
        return math.fsum(g if g <= GAP_STEPS * m else m for g in self.gaps())

    @property
    def outside_s(self) -> float:
        """Everything else: start-up before the first step, evaluation, generation, checkpoints,
        compilation, and what runs after the last step."""
        return max(self.wall_s - self.in_steps_s, 0.0)

    @property
    def final_loss(self) -> float | None:
        """The mean loss of the last :func:`tail_for` steps."""
        if not self.losses:
            return None
        k = tail_for(len(self.losses))
        return math.fsum(self.losses[-k:]) / k

    def time_to_loss(self, target: float) -> float | None:
        """Seconds from the process's start to the first step end at which the mean loss of the
        last :func:`tail_for` steps (this run's window, as its final loss) is at most ``target``;
        None when the run never gets there."""
        k = tail_for(len(self.losses))
        window = 0.0
        for i, (loss, end) in enumerate(zip(self.losses, self.step_ends_s, strict=False)):
            window += loss
            if i >= k:
                window -= self.losses[i - k]
            if i >= k - 1 and window / k <= target:
                return end
        return None

    def time_to_samples(self, samples: int) -> float | None:
        """Seconds from the process's start to the end of the step that brought the samples
        trained to ``samples``; None when the run trained fewer."""
        seen = 0
        for n, end in zip(self.samples, self.step_ends_s, strict=False):
            seen += n
            if seen >= samples:
                return end
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "side": self.side,
            "round": self.round,
            "seed": self.seed,
            "wall_s": self.wall_s,
            "start_s": self.start_s,
            "in_steps_s": self.in_steps_s,
            "outside_s": self.outside_s,
            "steps": self.steps,
            "median_step_s": self.median_step_s,
            "samples": self.samples_total,
            "batch_size": self.batch_size,
            "final_loss": self.final_loss,
            "foreign_cores": self.foreign_cores,
            "exit_code": self.exit_code,
            "outcome": self.outcome,
            "applied": list(self.applied),
            "not_applied": self.not_applied,
            # The curve: step-end times and losses, for the report's loss-against-time chart.
            "step_ends_s": list(self.step_ends_s),
            "losses": list(self.losses),
        }


def tail_for(steps: int) -> int:
    """The steps a final loss averages: the tune's tail (8), or a quarter of a short run."""
    return max(1, min(DEFAULT_TAIL, steps // 4))


def _last_line(log: Path) -> str:
    """The log's last line, said after a failure ("…: status 1 (FileNotFoundError: data/)")."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return f" ({lines[-1].strip()[:300]})" if lines else ""


class WholeRunError(RuntimeError):
    """A whole run that failed, ran past its time, or trained no step; the message names its
    log."""


def whole_run(
    spec: dict[str, Any],
    *,
    side: str,
    round_: int,
    stem: Path,
    timeout_s: float | None,
    timeout_option: str,
) -> Run:
    """Run the script of ``spec`` (script, args, cwd, plan, seed, device) whole, in a fresh
    process whose group is killed after ``timeout_s`` (the user's ``timeout_option`` sets it).
    Its spec, result and output are the files ``stem``.spec.json, .out.json and .log. Raises
    :class:`WholeRunError` naming the log."""
    from torchpace.measure.noise import LoadProbe
    from torchpace.tune.runner import _env, _kill_group

    spec_path, out_path = stem.with_suffix(".spec.json"), stem.with_suffix(".out.json")
    log = stem.with_suffix(".log")
    spec_path.write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", WORKER, str(spec_path), str(out_path)]
    probe = LoadProbe()
    spawned = time.time()
    t0 = time.perf_counter()
    what = f"{side} round {round_ + 1}"
    with log.open("wb") as f:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=f,
            stderr=subprocess.STDOUT,
            env=_env(),
            cwd=spec.get("cwd") or None,
            start_new_session=os.name == "posix",
        )
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise WholeRunError(
                f"{what}: no end after {timeout_s:g} s ({timeout_option}); its output: {log}"
            ) from None
        except BaseException:
            _kill_group(proc)
            raise
    wall = time.perf_counter() - t0
    load = probe.foreign_cores()
    if code != 0 or not out_path.exists():
        raise WholeRunError(f"{what}: the run failed{_last_line(log)}; its output: {log}")
    out = json.loads(out_path.read_text(encoding="utf-8"))
    if out["exit_code"] != 0:
        raise WholeRunError(f"{what}: {out['outcome']}{_last_line(log)}; its output: {log}")
    if not out["step_ends_s"]:
        raise WholeRunError(
            f"{what}: the script ran to its end without a training step (no optimizer.step() or "
            f"backward()); is this the training script, with arguments that train? Its output: "
            f"{log}"
        )
    seed = spec.get("seed")
    return Run.from_worker(
        side, round_, out, spawned_epoch=spawned, wall_s=wall, foreign_cores=load, seed=seed
    )


# The tune runs a script whole, after its search, when the runs it needs are expected to take at
# most this share of --budget (``--whole-run yes`` runs them whatever they take, ``no`` never).
WHOLE_SHARE = 1 / 2
# A plan whose time outside the steps is this much longer than as written, and longer than the
# two as-written runs differ from each other, is said to slow that time...
OUTSIDE_SLOWER = 0.10
# ... by at least this many seconds: a run with next to nothing outside its steps has ratios that
# mean nothing.
OUTSIDE_SLOWER_S = 0.5


@dataclass(frozen=True)
class Measured:
    """Whole runs the tune took to state a plan's whole-run effect: the plan's run between two
    runs of the script as written. ``process_wide`` names the plan's techniques that set the
    whole process (the catalogue's), the first suspects when its time outside the steps grows."""

    base: tuple[Run, Run]
    plan: Run
    process_wide: tuple[str, ...] = ()

    def loaded(self, limit: float) -> list[str]:
        return [
            f"{r.side} ({r.foreign_cores:.2f} cores of other work)"
            for r in (self.base[0], self.plan, self.base[1])
            if r.foreign_cores is not None and r.foreign_cores > limit
        ]


def process_wide(techniques: Sequence[str]) -> tuple[str, ...]:
    """The plan's techniques that set the whole process (the catalogue's ``process_wide``)."""
    from torchpace.catalog import get

    return tuple(t for t in techniques if get(t).process_wide)


def measure(
    plan: dict[str, Any],
    *,
    script: str,
    args: Sequence[str],
    cwd: str,
    device: str,
    workdir: Path,
    expected_s: float,
    expected_plan_s: float,
    budget_s: float,
    always: bool,
    say: Callable[[str], None],
) -> tuple[Measured | None, str]:
    """The whole runs behind the tune's whole-run figure (issue 30): the script as written, with
    the plan, and as written again. A per-step estimate left out evaluation and generation, and
    what the plan does to them: a loader's workers also feed the evaluation loader (io_images:
    2.08x stated from the as-written time outside the steps, 3.02x measured), and a process-wide
    setting also runs there. Returns the runs, or None and why they did not run (too long for the
    budget, a failure, a timeout)."""
    total = 2 * expected_s + expected_plan_s
    allowed = WHOLE_SHARE * budget_s
    if not always and total > allowed:
        return None, (
            f"three whole runs (as written, with the plan, as written) of about {total:.0f} s "
            "would take more than half of --budget (--whole-run yes runs them)"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    say(
        f"three whole runs, as written, with the plan, and as written again (about {total:.0f} "
        "s), to measure the time outside the training steps (--whole-run no skips them)"
    )
    # each run may take the allowance of all three: evaluation is not in the expected times
    timeout = None if always else max(allowed, 2 * expected_s)
    spec: dict[str, Any] = {
        "script": script,
        "args": list(args),
        "cwd": cwd,
        "plan": None,
        "seed": 0,
        "device": device,
    }
    sides: list[tuple[str, dict[str, Any] | None]] = [
        ("as written", None),
        ("with the plan", plan),
        ("as written", None),
    ]
    done: list[Run] = []
    try:
        for i, (side, p) in enumerate(sides):
            done.append(
                whole_run(
                    {**spec, "plan": p},
                    side=side,
                    round_=i,
                    stem=workdir / f"whole-{i + 1}-{side.replace(' ', '-')}",
                    timeout_s=timeout,
                    timeout_option="--whole-run yes for no limit",
                )
            )
    except WholeRunError as e:
        return None, f"the whole run did not give a figure: {e}"
    wide = process_wide(plan.get("techniques") or ())
    return Measured((done[0], done[2]), done[1], wide), ""
