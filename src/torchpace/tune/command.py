"""``torchpace tune RECIPE | SCRIPT.py -- ARGS``: search the plan, write ``torchpace-plan.json``
and the results.

    torchpace tune cnn --budget 5m
    torchpace tune recipe.py --run-steps 20000 --memory-budget 8G --out tuned/
    torchpace tune train.py --budget 10m -- --epochs 1 --data ./data

A ``.py`` file is a recipe or a script by its syntax tree (``torchpace.runtime.kind``), never by
running it. A script's trials run it unmodified in fresh processes, the plan applied by
interposition (``torchpace.script``); the doctor's findings for it order the trials.

Results are cached by fingerprint (the recipe's source, the environment, torch): a re-run of an
unchanged recipe reads every trial from the cache; a killed tune re-runs no finished trial.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchpace._args import positive_int
from torchpace.train import lr as lr_rules
from torchpace.tune.trial import TrialSpec

if TYPE_CHECKING:
    from torchpace.tune.convergence import Band
    from torchpace.tune.whole_run import Measured

RESULT_VERSION = 1

_UNITS = {"s": 1, "m": 60, "h": 3600}
_BYTES = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


# --require-quiet waits at most this long for other processes to leave the cores.
QUIET_WAIT_S = 300.0
# The doctor's survey of a script before its tune: at least this long unless --trial-timeout.
SURVEY_TIMEOUT_S = 600.0


def parse_duration(text: str) -> float:
    """'300', '90s', '5m', '1.5h' -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text.lower())
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"a duration like 300, 90s, 5m or 1h; got {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def parse_bytes(text: str) -> int:
    """'8G', '512M', '1.5g', '1000000' -> bytes (powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text.lower())
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"a size like 8G, 512M or 1000000; got {text!r}")
    return int(float(m.group(1)) * _BYTES[m.group(2)])


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tune",
        help="try each technique on a recipe and keep the fastest plan that still converges",
        description="Measure the recipe's baseline, each technique alone and combined, the "
        "batch size and the loader, each trial in a fresh process, and write the fastest plan "
        "that passes the convergence guard.",
    )
    p.add_argument(
        "recipe",
        help="cnn, lm, seqcls, path/to/recipe.py, module:attr, or a training script "
        "train.py with its arguments after --",
    )
    p.add_argument("--budget", type=parse_duration, default=300.0, help="time for the search (5m)")
    p.add_argument(
        "--steps",
        type=positive_int,
        default=TrialSpec.steps,
        help=f"measured steps per trial ({TrialSpec.steps})",
    )
    p.add_argument(
        "--warmup",
        type=positive_int,
        default=TrialSpec.warmup,
        help=f"warm-up steps per trial ({TrialSpec.warmup})",
    )
    p.add_argument(
        "--run-steps",
        type=int,
        default=1000,
        help="the length of the run the plan is for: a compile must pay off over it (1000)",
    )
    p.add_argument(
        "--whole-run",
        choices=("auto", "yes", "no"),
        default="auto",
        help="for a script, after the search: run it whole as written, with the plan, and as "
        "written again, to count the time outside its steps (evaluation, generation) in the "
        "plan's whole-run effect; auto (default) when those runs take at most half of --budget",
    )
    p.add_argument("--memory-budget", type=parse_bytes, help="peak memory a trial may use (CPU)")
    p.add_argument("--lr-scaling", choices=lr_rules.RULES, default=lr_rules.DEFAULT)
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    p.add_argument("--out", type=Path, default=Path("."), help="where the plan and results go")
    p.add_argument("--no-cache", action="store_true", help="run every trial again")
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="run the cached failed trials again, and those measured beside other processes' "
        "work (timeouts, a full disk and kills from outside are always run again); the good "
        "ones stay cached",
    )
    p.add_argument(
        "--require-quiet",
        action="store_true",
        help="before the trials, wait (at most 5m) for other processes to leave the cores; the "
        "tune then runs, and says if the machine stayed busy",
    )
    p.add_argument(
        "--accept-lower",
        action="store_true",
        help="keep a change whose loss ended below the baseline's seed band (it trained lower); "
        "by default it is reported as 'trained lower' and left out",
    )
    p.add_argument(
        "--keep-batch-size",
        action="store_true",
        help="the batch size is part of the experiment: do not search it",
    )
    p.add_argument(
        "--trial-timeout",
        type=parse_duration,
        help="the most a trial may take before it is killed (default: for a script, three "
        "times what the doctor's survey says a trial takes, at least 3m; else 3m)",
    )
    p.add_argument("--html", type=Path, help="also write the HTML report here (torchpace report)")
    p.set_defaults(func=run, script_args=None)


def _entry(spec: str, script_args: list[str] | None) -> str:
    """ "script" or "recipe" for ``spec``, from a .py file's syntax tree; an error naming what to
    change for arguments given to a recipe."""
    from pathlib import Path

    from torchpace.runtime.kind import kind_of

    kind = "recipe"
    if spec.endswith(".py") or Path(spec).is_file():
        if not Path(spec).is_file():
            raise ValueError(f"no such file: {spec}")
        kind = kind_of(spec)
    if kind == "recipe" and script_args:
        raise ValueError(
            f"{spec} is a recipe, which takes no arguments after --: its factories build the "
            f"run (got {' '.join(script_args)})"
        )
    return kind


@contextlib.contextmanager
def _sigterm_ends_trials() -> Iterator[None]:
    """SIGTERM ends the tune as Ctrl-C does: the running trial's process group is killed on the
    way out (runner.run_trial), instead of the trial outliving the tune (issue 17)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(args: argparse.Namespace) -> int:
    import datetime as dt
    import sys

    import torch

    from torchpace._files import atomic_write_text, output_dir
    from torchpace.measure.clock import resolve_device
    from torchpace.measure.env import fingerprint
    from torchpace.recipes import load_recipe
    from torchpace.report.tune_table import render, to_text
    from torchpace.train.plan import NOISE_NOTE, Plan
    from torchpace.tune.candidates import Candidate, NotApplicable, candidates
    from torchpace.tune.convergence import DEFAULT_TAIL
    from torchpace.tune.progress import TuneProgress
    from torchpace.tune.results import ResultsFile, cache_path, tune_fingerprint
    from torchpace.tune.search import (
        DEFAULT_TRIAL_TIMEOUT_S,
        AfterBaseline,
        Settings,
        trial_timeout,
        tune,
    )

    args.out = output_dir(args.out, "--out")  # before the search, not after it (issue 17)
    command = ["torchpace", *sys.argv[1:]]
    created = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    if args.steps < 1 or args.warmup < 1:
        raise ValueError(
            f"--steps and --warmup must be at least 1; got {args.steps}, {args.warmup}"
        )
    if args.steps + args.warmup < DEFAULT_TAIL:
        raise ValueError(
            f"--steps {args.steps} with --warmup {args.warmup} is too few: the convergence guard "
            f"compares the mean loss of the last {DEFAULT_TAIL} steps of a trial, so give "
            f"--steps {DEFAULT_TAIL - args.warmup} or more"
        )
    script_args = args.script_args
    is_script = _entry(args.recipe, script_args) == "script"
    device = resolve_device(args.device)
    cwd = os.getcwd()
    target = os.path.abspath(args.recipe) if is_script else args.recipe
    fp = tune_fingerprint(
        args.recipe,
        device=args.device,
        script_args=list(script_args or []) if is_script else None,
        cwd=cwd if is_script else None,
    )
    path = cache_path(fp)
    if args.no_cache:
        path.unlink(missing_ok=True)
        (path.parent / "doctor.json").unlink(missing_ok=True)
    settings = Settings(
        recipe=target,
        budget_s=args.budget,
        steps=args.steps,
        warmup=args.warmup,
        run_steps=args.run_steps,
        # resolved, as doctor --verify's trials name it: a later tune recalls them (same keys)
        device=str(device),
        memory_budget_bytes=args.memory_budget,
        lr_scaling=args.lr_scaling,
        script_args=tuple(script_args or ()) if is_script else None,
        cwd=cwd if is_script else None,
        retry_failed=args.retry_failed,
        trial_timeout_s=args.trial_timeout or DEFAULT_TRIAL_TIMEOUT_S,
        keep_batch_size=args.keep_batch_size,
        accept_lower=args.accept_lower,
        timeout_option="--trial-timeout",
    )
    survey_note = ""
    baseline: Plan | None = None
    after_baseline: AfterBaseline | None = None
    cands: list[Candidate]
    not_here: list[NotApplicable]
    surveyed = None
    if is_script:
        from torchpace.tune.candidates import for_script
        from torchpace.tune.survey import survey

        # A script's baseline is the script as written: nothing applied, its own zero_grad too.
        baseline = Plan.as_written()
        print(f"torchpace tune: {args.recipe} is a training script; the doctor measures it first")
        surveyed = survey(
            target,
            list(script_args or ()),
            out=path.parent / "doctor.json",
            steps=max(args.steps, 10),
            warmup=args.warmup,
            # The survey runs more steps than a trial, and nothing is known of the script yet:
            # what was asked, else the whole budget, and never under SURVEY_TIMEOUT_S.
            timeout_s=args.trial_timeout or max(args.budget, SURVEY_TIMEOUT_S),
            cwd=cwd,
        )
        findings, survey_note = surveyed.findings, surveyed.note
        print(f"torchpace tune: {survey_note}")
        if surveyed.first_step_s is not None and surveyed.step_s is not None:
            expected = surveyed.first_step_s + (args.warmup + args.steps) * surveyed.step_s
            if args.trial_timeout is None:
                limit = trial_timeout(
                    surveyed.first_step_s, surveyed.step_s, warmup=args.warmup, steps=args.steps
                )
                settings = dataclasses.replace(settings, trial_timeout_s=limit)
            print(
                f"torchpace tune: a trial should take about {expected:.0f} s (first step at "
                f"{surveyed.first_step_s:.1f} s, then {args.warmup + args.steps} steps of "
                f"{surveyed.step_s * 1e3:.0f} ms); each may take {settings.trial_timeout_s:.0f} "
                "s before it is killed (--trial-timeout)"
            )
        cands, not_here = [], []  # decided from the baseline trial: after_baseline
        after_baseline = functools.partial(for_script, device=device, findings=findings)
    else:
        cands, not_here = candidates(load_recipe(args.recipe), device)
    if args.require_quiet:
        _wait_for_quiet(QUIET_WAIT_S)
    with TuneProgress(args.budget) as bar, _sigterm_ends_trials():
        outcome = tune(
            settings,
            cands,
            not_here,
            results=ResultsFile(path),
            workdir=path.parent / "work",
            progress=bar.update,
            baseline=baseline,
            after_baseline=after_baseline,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    plan_path = args.out / "torchpace-plan.json"
    plan_dict = outcome.plan.to_dict()
    if is_script:  # what only fit() applies (its log cadence) is not applied to a script
        from torchpace.techniques import fit_only

        plan_dict["techniques"] = [t for t in plan_dict["techniques"] if t not in fit_only()]
    import json

    from torchpace.measure.noise import MAX_FOREIGN_CORES

    loaded = outcome.loaded_trials
    # a plan built beside noise says so at the top of its file, for whoever applies it later
    noisy = {NOISE_NOTE: {"verdicts_not_drawn": outcome.noisy, "loaded_trials": loaded}}

    def write_plan() -> None:
        plan_file = {**noisy, **plan_dict} if outcome.noisy or loaded else plan_dict
        atomic_write_text(plan_path, json.dumps(plan_file, indent=2) + "\n")

    whole = None
    if is_script and surveyed is not None:
        whole = _whole_run(outcome, surveyed, args.recipe, list(script_args or ()), args.run_steps)
        if whole is not None:
            plan_dict["expected"] = whole
        if whole is not None and args.whole_run != "no":
            # written first with the estimate: a tune stopped during the whole runs keeps its plan
            write_plan()
            whole = _measure_whole(
                whole, outcome, surveyed, plan_dict, args, cwd, str(device), path.parent / "work"
            )
            plan_dict["expected"] = whole
    write_plan()
    confirm = outcome.confirm.get("median")
    caption = (
        f"{outcome.elapsed_s:.0f} s, {len(outcome.trials)} trials ({outcome.cached_trials} from "
        f"the cache); each trial {args.warmup} warm-up + {args.steps} measured steps in a fresh "
        f"process; speed-ups: the baseline's median step time over the trial's [q1–q3]; loss Δ: "
        f"the last {outcome.band.tail if outcome.band else '—'} steps' mean against the "
        f"baseline's seed band {outcome.band}"
        + (
            f"; confirmed {confirm:.2f}× in samples/s, paired"
            if confirm and outcome.confirm.get("confirmed")
            else "; not confirmed: the paired rounds against the baseline read "
            + ", ".join(f"{r:.2f}×" for r in outcome.confirm["ratios"])
            if confirm and not outcome.confirm.get("noise")
            else ""
        )
        + _band_note(outcome.band)
    )
    if loaded:
        # Said above the table even where no verdict was drawn to call noisy (a busy machine
        # can spend the budget on the baselines alone): the table below ran beside other work.
        print(
            f"torchpace tune: the machine was busy: other processes used more than "
            f"{MAX_FOREIGN_CORES:.2f} cores during {len(loaded)} of {len(outcome.trials)} "
            f"trials ({', '.join(dict.fromkeys(loaded))}); no verdict is drawn from such a trial",
            file=sys.stderr,
        )
    if outcome.noisy:
        # Said above the table: the plan below rests on the verdicts that could be drawn.
        print(
            f"torchpace tune: noisy: the machine's load or speed moved during {len(outcome.noisy)} "
            f"trial(s) ({', '.join(outcome.noisy)}); their verdicts were not drawn and the plan "
            "leaves them out. Run the tune again on a quiet machine (--retry-failed runs the "
            "loaded trials again instead of recalling them)",
            file=sys.stderr,
        )
    table = render(outcome.rows, title=f"torchpace tune {args.recipe}", caption=caption)
    print(to_text(table))
    result = {
        "version": RESULT_VERSION,
        "kind": "tune",
        "recipe": args.recipe,
        "entry": "script" if is_script else "recipe",
        "script_args": list(script_args or []) if is_script else None,
        "survey": survey_note or None,
        "fingerprint": fp,
        "created": created,
        "command": command,
        "environment": fingerprint(device, measure_peak=True).to_dict(),
        "torch": torch.__version__,
        "settings": {k: v for k, v in vars(settings).items()},
        "band": None
        if outcome.band is None
        else {
            "lo": outcome.band.lo,
            "hi": outcome.band.hi,
            "centre": outcome.band.centre,
            "tail": outcome.band.tail,
            "tails": list(outcome.band.tails),
            "spread": outcome.band.spread,
        },
        "rows": [vars(r) | {"techniques": list(r.techniques)} for r in outcome.rows],
        "trials": [t.to_dict() for t in outcome.trials],
        "batch_search": outcome.batch_search,
        "loader": outcome.loader,
        "confirm": outcome.confirm,
        "noisy": outcome.noisy,
        "loaded_trials": loaded,
        "skipped_for_budget": outcome.skipped_for_budget,
        "elapsed_s": outcome.elapsed_s,
        "cached_trials": outcome.cached_trials,
        "plan": plan_dict,
    }
    result["whole_run"] = whole
    result_path = args.out / "torchpace-tune.json"
    atomic_write_text(result_path, json.dumps(result, indent=2) + "\n")
    as_written = f"the {'script' if is_script else 'recipe'} as written"
    print(f"wrote {plan_path} ({', '.join(plan_dict['techniques']) or as_written})")
    print(f"wrote {result_path}; trials cached in {path}")
    if whole is not None:
        print(f"torchpace tune: whole run: {whole['text']}")
    if is_script and outcome.plan.batch_size is not None:
        from torchpace.runtime.work import batch_work_note, step_flags

        as_written_batch = next(
            (t.batch_size for t in outcome.trials if t.name == "baseline" and t.batch_size), None
        )
        note = batch_work_note(
            step_flags(args.recipe, list(script_args or ())),
            list(script_args or ()),
            as_written_batch,
            outcome.plan.batch_size,
        )
        if note:
            print(f"torchpace tune: work: {note}")
    if args.html:
        from torchpace.report.command import write_html
        from torchpace.report.tune_doc import build

        write_html(args.html, [build(result)], [str(result_path)])
        print(f"wrote {args.html}")
    return 0


def _whole_run(
    outcome: Any,
    surveyed: Any,
    script: str,
    script_args: list[str],
    run_steps: int,
    measured: Measured | None = None,
) -> dict[str, Any] | None:
    """What the plan's per-step speed-up buys the whole run (issue 30): Amdahl over the time the
    plan does not speed up and the time it does. With ``measured`` whole runs, the as-written
    runs' time inside their training steps and the plan's run's time outside them (start-up,
    evaluation, generation, its compile); without, the survey's start-up and the run's steps
    (the script's step option, else --run-steps), the plan's compile added once. The per-step
    figure is the paired confirmation's; where the budget ran out before one, the plan's
    trials' gain, said to be unconfirmed (a plan written without its whole-run effect left
    io_images' user to guess). None for the script as written, for paired rounds that did not
    confirm the plan, or without a survey to go on."""
    from torchpace.runtime.work import flag_value, step_flags, whole_run_effect

    confirmed = bool(outcome.confirm.get("confirmed"))
    if confirmed:
        per_step = outcome.confirm.get("median")
    elif outcome.confirm.get("ratios"):
        return None  # paired rounds on both sides of 1: no figure to draw
    else:
        per_step = outcome.plan_gain
    base = next((t for t in outcome.trials if t.name == "baseline" and t.median_step_s), None)
    if not per_step or base is None:
        return None
    if surveyed.first_step_s is None or surveyed.step_s is None:
        return None
    startup = max(surveyed.first_step_s - surveyed.step_s, 0.0)
    flags = step_flags(script, script_args)
    steps, basis = run_steps, f"--run-steps {run_steps}"
    if flags:
        flag, default = flags[0]
        given = flag_value(script_args, flag)
        if given or default:
            steps = int(given or default)  # type: ignore[arg-type]
            basis = f"{flag} {steps}"
    compile_s = _compile_seconds(outcome)
    gain = f"{per_step:.2f}× per step" + (
        ""
        if confirmed
        else " (its trials' gain: the budget ran out before the paired confirmation)"
    )
    batch = getattr(outcome.plan, "batch_size", None)
    # The gain is in samples/s: with a larger batch, the same samples in fewer steps.
    samples = (
        f" to train the as-written run's samples (batch {batch}: a run bounded by steps trains "
        "more data in as many steps instead; see the work note)"
        if batch is not None
        else ""
    )
    got: dict[str, Any] = {
        "per_step": per_step,
        "confirmed": confirmed,
        "steps": steps,
        "steps_from": basis,
        "startup_s": startup,
        "compile_s": compile_s,
        "measured": False,
    }
    if batch is not None:
        got["at_equal_samples"] = True
    if measured is not None:
        whole = got | _measured_effect(measured, per_step, gain)
        return whole | {"text": whole["text"] + samples}
    effect = whole_run_effect(
        startup_s=startup,
        step_s=base.median_step_s,
        steps=steps,
        per_step=per_step,
        compile_s=compile_s,
    )
    text = (
        f"{gain}; over {steps} steps ({basis}) after {startup:.1f} s of "
        f"start-up the plan does not speed up"
        + (f", and {compile_s:.0f} s of compile" if compile_s else "")
        + f", about {effect:.2f}× for the whole run{samples}{_slower_whole(effect)}. Evaluation, "
        "generation and other work outside the steps are not counted: `torchpace compare "
        "SCRIPT --plan PLAN -- ARGS` measures the whole run"
    )
    return got | {"whole_run": effect, "slower": effect < 1, "text": text}


def _slower_whole(effect: float) -> str:
    """Said of a plan whose whole run is slower than the script as written, faster steps or not
    (issue 30: no plan may make a whole run slower without saying so)."""
    if effect >= 1:
        return ""
    return (
        ": SLOWER than the script as written over this run (what the plan costs outside the "
        "steps, or its compile, outweighs what it saves in them); keep it only for longer runs"
    )


def _measure_whole(
    whole: dict[str, Any],
    outcome: Any,
    surveyed: Any,
    plan_dict: dict[str, Any],
    args: argparse.Namespace,
    cwd: str,
    device: str,
    workdir: Path,
) -> dict[str, Any]:
    """The whole-run figure from whole runs of the script, when they fit the budget
    (``--whole-run``); else the estimate, saying why it was not measured. The runs' specs,
    results and output go to ``workdir/whole`` beside the trials' (the cache's), not into the
    user's --out."""
    from torchpace.tune.whole_run import measure

    step_s = next(
        t.median_step_s for t in outcome.trials if t.name == "baseline" and t.median_step_s
    )
    steps_s = whole["steps"] * step_s
    measured, why = measure(
        plan_dict,
        script=os.path.abspath(args.recipe),
        args=list(args.script_args or ()),
        cwd=cwd,
        device=device,
        workdir=workdir / "whole",
        expected_s=whole["startup_s"] + steps_s,
        expected_plan_s=whole["startup_s"] + whole["compile_s"] + steps_s / whole["per_step"],
        budget_s=args.budget,
        always=args.whole_run == "yes",
        say=lambda m: print(f"torchpace tune: {m}", flush=True),
    )
    if measured is None:
        return whole | {"not_measured": why, "text": f"{whole['text']} (not measured whole: {why})"}
    got = _whole_run(
        outcome,
        surveyed,
        args.recipe,
        list(args.script_args or ()),
        args.run_steps,
        measured,
    )
    return whole if got is None else got


def _measured_effect(measured: Measured, per_step: float, gain: str) -> dict[str, Any]:
    """The whole-run figure over measured whole runs: Amdahl with the time inside the steps as
    the script as written spends it, made ``per_step`` times faster, and the time outside them
    as the plan's own run spends it (its start-up, evaluation, generation, compile), each
    as-written figure the geometric mean of the runs either side of the plan's."""
    from torchpace.measure.noise import MAX_FOREIGN_CORES
    from torchpace.measure.stats import between
    from torchpace.tune.whole_run import OUTSIDE_SLOWER, OUTSIDE_SLOWER_S

    (b1, b2), p = measured.base, measured.plan
    wall = between(b1.wall_s, b2.wall_s)
    inside = between(b1.in_steps_s, b2.in_steps_s)
    outside = max(wall - inside, 0.0)
    ratio = p.outside_s / outside if outside > 0 else None
    lo, hi = sorted((b1.outside_s, b2.outside_s))
    spread = hi / lo if lo > 0 else float("inf")
    slower = (
        ratio is not None
        and ratio > max(1 + OUTSIDE_SLOWER, spread)
        and p.outside_s - outside > OUTSIDE_SLOWER_S
    )
    after = p.outside_s + inside / per_step
    effect = wall / after if after > 0 else float("inf")
    text = (
        f"{gain}; the script as written ran {wall:.1f} s whole: {inside:.1f} s in its "
        f"{b1.steps} training steps and {outside:.1f} s outside them (start-up, evaluation, "
        f"generation…); with the plan the time outside them was {p.outside_s:.1f} s"
    )
    if slower:
        wide = measured.process_wide
        text += (
            f": SLOWER outside the steps ({ratio:.2f}× as long, beyond the as-written runs' own "
            f"{spread:.2f}×"
            + (f"; {', '.join(wide)} set the whole process" if wide else "")
            + "), which this figure counts"
        )
    text += (
        f"; about {effect:.2f}× for the whole run (one paired run: {wall / p.wall_s:.2f}×)"
        + _slower_whole(effect)
    )
    loaded = measured.loaded(MAX_FOREIGN_CORES)
    if loaded:
        text += f" (measured beside other processes' work: {', '.join(loaded)})"
    return {
        "measured": True,
        "steps": b1.steps,
        "steps_from": "the whole runs",
        "as_written_s": wall,
        "in_steps_s": inside,
        "outside_s": outside,
        "plan_outside_s": p.outside_s,
        "outside_ratio": ratio,
        "outside_slower": slower,
        "process_wide": list(measured.process_wide),
        "one_pair": wall / p.wall_s if p.wall_s > 0 else None,
        "whole_run": effect,
        "slower": effect < 1,
        "text": text,
        "loaded": loaded,
    }


def _compile_seconds(outcome: Any) -> float:
    """The plan's compile time, paid once a run: the confirmation's plan trial's; where none
    ran, the median of the compiled trials' (io_images' plan kept compile with no confirmation,
    and its whole-run estimate left out 5-12 s of compile: 4.66x stated, 2.22x measured)."""
    import statistics

    from torchpace.report.tune_table import confirm_trial

    if outcome.plan.compile == "off":
        return 0.0
    # (it looked for a trial named "plan…", which no trial is: a confirmed compile counted 0 s)
    plan_trial = next((t for t in outcome.trials if t.name == confirm_trial("plan", 1)), None)
    if plan_trial is not None and plan_trial.compile_seconds:
        return float(plan_trial.compile_seconds)
    compiled = [t.compile_seconds for t in outcome.trials if t.compile_seconds]
    return float(statistics.median(compiled)) if compiled else 0.0


def _wait_for_quiet(limit_s: float) -> None:
    """--require-quiet: wait, bounded, for a quiet machine before the first trial."""
    import sys

    from torchpace.measure.noise import MAX_FOREIGN_CORES, wait_for_quiet

    def say(load: float, waited: float) -> None:
        print(
            f"torchpace tune: other processes use {load:.2f} cores (over {MAX_FOREIGN_CORES:.2f});"
            f" waiting for a quiet machine ({waited:.0f} of {limit_s:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    quiet, load = wait_for_quiet(limit_s, say=say)
    if not quiet:
        print(
            f"torchpace tune: the machine stayed busy for {limit_s:.0f} s ({load:.2f} cores of "
            "other work); tuning anyway: verdicts the load spoils will say 'noisy: not judged'",
            file=sys.stderr,
        )


def _band_note(band: Band | None) -> str:
    """What the caption says of a band whose seeds ended alike: the run sets its own seed (or
    draws nothing at random), so the band measures no seed-to-seed spread and is the guard's
    margin alone."""
    from torchpace.tune.convergence import DEFAULT_MARGIN

    if band is None or band.spread > 0:
        return ""
    return (
        f"; the baseline's {len(band.tails)} seeds ended on the same loss (the run sets its own "
        f"seed, or draws nothing at random), so the band is the guard's ±{DEFAULT_MARGIN:.0%} "
        f"margin, not a measured seed-to-seed spread"
    )
