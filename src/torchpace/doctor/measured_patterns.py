"""Patterns whose gain is computed from the run's time breakdown, FLOPs and syncs."""

from __future__ import annotations

import os
import re
from typing import Any

from torchpace.catalog import fused_on
from torchpace.doctor.evidence import (
    FUSED_OPTIMIZER_SPEEDUP,
    MODERATE,
    NOT_PAYING,
    Evidence,
    RuntimeFinding,
    severity,
    times,
)
from torchpace.doctor.loader_rate import step_with_workers
from torchpace.doctor.run_facts import HotSpot, Replay
from torchpace.measure.cores import usable_cores

# -- input ---------------------------------------------------------------------------------------
# What a script's own batch-making function is called, in the public scripts that make their own
# batches: nanoGPT's and pytorch/examples' word language model's get_batch, llm.c's
# DataLoaderLite.next_batch, x-transformers' cycle over a loader, load_data/prepare_batch/
# sample_batch/read_chunk elsewhere. Matched against the function's own name only.
_INPUT_NAME = re.compile(
    r"batch|data|load|sample|fetch|read|next|collate|prepare|input|augment", re.I
)


def _input_spots(ev: Evidence) -> list[HotSpot]:
    """The script's own input functions, run outside any DataLoader, holding 5% of the step."""
    return [
        s
        for s in ev.summary.hot_spots
        if s.phase == "other"
        and s.share >= MODERATE
        and _INPUT_NAME.search(s.function.rsplit(".", 1)[-1])
    ]


def input_skip(ev: Evidence) -> str | None:
    if not any(ld.role == "train" for ld in ev.loaders) and not _input_spots(ev):
        return (
            "no DataLoader feeds the training steps, and no input function of the script's own "
            f"holds {MODERATE:.0%} of the step"
        )
    return None


def _custom_input(ev: Evidence) -> list[RuntimeFinding]:
    out = []
    for spot in _input_spots(ev):
        share, name = spot.share, spot.function
        where = f"{os.path.basename(spot.path)}:{spot.line}"
        out.append(
            RuntimeFinding(
                pattern="input-bound",
                technique="loader-workers",
                severity=severity(share),
                message=(
                    f"the step spends {share:.0%} of its time in {name} ({where}), the script's "
                    "own input code, on the training thread and outside any DataLoader"
                ),
                fix=(
                    f"make the next batch while the step runs: {name}'s work in a Dataset's "
                    "__getitem__ under DataLoader(..., num_workers=N, persistent_workers=True), "
                    "or in a background thread"
                ),
                site=(spot.path, spot.line),
                gain=share,
                measured={"input_share": share, "function": name, "sampled": spot.samples},
            )
        )
    return out


def _with_workers(ev: Evidence, wait: float, cpu: float, cores: int) -> tuple[float, str, int]:
    """The share loader workers recover, the words for its basis, and the worker count: from
    the training dataset's measured pace by worker count (doctor/loader_rate.py) where there is
    one, else with one worker a core and no limit from the dataset's pace."""
    rest = ev.step_s * (1 - wait)
    wait_s = ev.step_s * wait
    free = max(0.0, cores - (ev.threads or cores))  # the cores torch's threads leave
    rates = ev.worker_paces
    batches = ev.summary.data_batches_per_step
    # A worker's time for a batch is its CPU time when the dataset computes; it carries the
    # transfer to this process that loading in-process does not.
    per_batch = rates.get(1, wait_s / batches)
    load_cpu = max(wait_s, batches * per_batch) * cpu
    if 0 in rates and len(rates) > 1:
        steps = {
            k: max(step_with_workers(rest, load_cpu, cores, free, k), batches * pace)
            for k, pace in rates.items()
            if k != 0
        }
        best = min(steps, key=lambda k: steps[k])  # the fewest workers for the best step
        paces = ", ".join(f"{v * 1e3:.1f} ms with {k}" for k, v in rates.items() if k != 0)
        basis = (
            f"the dataset alone makes a batch in {rates[0] * 1e3:.1f} ms in this process, "
            f"{paces} workers (measured after the run)"
        )
    else:
        best = cores
        steps = {best: step_with_workers(rest, load_cpu, cores, free, best)}
        basis = f"{cpu:.0%} of the wait is this process's CPU"
    words = (
        f"{basis}; with {best} the step would take {steps[best] * 1e3:.1f} ms: "
        f"{load_cpu * 1e3:.1f} ms of loading CPU a step beside {rest * 1e3:.1f} ms of the rest of "
        f"the step, whose {ev.threads or cores} torch threads leave {free:g} of {cores} cores "
        "free"
    )
    # the wait less what the workers add back (exact where they add nothing)
    return max(0.0, wait - (steps[best] - rest) / ev.step_s), words, best


def _cheaper_samples(dataset: str, workers: int, cores: int) -> str:
    """What makes each sample cheaper for this loader: a dataset that already holds tensors is
    read a batch at a time instead of a sample at a time; workers are added only where cores
    are left for them, and fewer are suggested where they outnumber the cores (issue 29: "keep
    the results as tensors (a TensorDataset...)" to a TensorDataset, "add workers if cores are
    free" to 4 workers on 2 cores)."""
    if dataset == "TensorDataset":
        fix = (
            "the dataset already holds tensors (a TensorDataset): the time goes to indexing it "
            "one sample at a time and collating; index a whole batch at once: DataLoader(ds, "
            "sampler=BatchSampler(RandomSampler(ds), batch_size=B, drop_last=False), "
            "batch_size=None), or slice the tensors by a shuffled index each step"
        )
    else:
        fix = (
            "make each sample cheaper to load: decode and transform once and keep the "
            "results as tensors (a TensorDataset, or a preprocessed file read by index)"
        )
    if workers == 0:
        return fix
    if workers >= cores:
        return (
            f"{fix}; {workers} loader workers already share {cores} cores with the training "
            "step: more would not help, fewer may"
        )
    return f"{fix}, or add loader workers: {workers} use {workers} of {cores} cores"


def input_match(ev: Evidence) -> list[RuntimeFinding]:
    if not any(ld.role == "train" for ld in ev.loaders):
        return _custom_input(ev)
    wait = ev.share("data")
    if wait < MODERATE:
        return []
    cpu = ev.summary.data_cpu_fraction
    cores = usable_cores()
    loader = next(ld for ld in ev.loaders if ld.role == "train")
    wait_ms = ev.summary.timed["data"].seconds * 1e3
    measured: dict[str, Any] = {
        "data_share": wait,
        "data_ms_per_step": wait_ms,
        "data_cpu_fraction": cpu,
        "cores": cores,
    }
    workers = loader.num_workers
    waits = f"the step waits {wait:.0%} of its time for the next batch ({wait_ms:.1f} ms per step"
    share = 0.0  # what more workers recover: only asked of a loader that has none
    if workers == 0:
        share, basis, best = _with_workers(ev, wait, cpu, cores)
        paced = bool(ev.worker_paces)
        measured["basis"] = "measured worker pace" if paced else "wait and cores"
        measured["workers"] = best  # the tune's loader trial starts from it where measured
    else:
        measured["basis"] = "the wait"
    if share >= MODERATE:
        technique, gain = "loader-workers", share
        message = f"{waits}, 0 loader workers); {basis}"
        fix = (
            "load batches in worker processes: DataLoader(..., num_workers=N, "
            "persistent_workers=True); "
            + (f"N={best} was fastest here" if paced else "measure N, starting from the cores")
        )
    else:
        # Workers that cannot help (or cannot keep up): what is left is the cost of each
        # sample. A sample made once, ahead of the loop (decoded, transformed, stored as
        # tensors), takes the wait to about nothing, so the estimate is the whole wait. Checked
        # by hand A/B on the corpus (estimate_ab.py, cached-samples variants of minGPT's adder
        # and the MNIST VAE).
        technique, gain = "fast-input-format", wait
        why = (
            f"), and loader workers would not shorten it here: {basis}"
            if workers == 0
            else f", {workers} loader workers): they cannot keep up"
        )
        message = f"{waits}{why}; samples made once, ahead of the loop, remove up to the wait"
        fix = _cheaper_samples(loader.dataset, workers, cores)
    return [
        RuntimeFinding(
            pattern="input-bound",
            technique=technique,
            severity=severity(gain),
            message=message,
            fix=fix,
            site=loader.site,
            gain=gain,
            measured=measured,
        )
    ]


def padding_skip(ev: Evidence) -> str | None:
    if ev.summary.padding is None:
        return "no training batch of token ids (a 2-D integer tensor first in the batch)"
    return None


def padding_match(ev: Evidence) -> list[RuntimeFinding]:
    padding = ev.summary.padding
    assert padding is not None  # padding_skip
    share = padding.share
    # The compute spent on padding: forward and backward run over every position, padded or
    # not, so about the padding share of their time (more for attention, whose cost grows with
    # the square of the length: this is the lower figure).
    compute = ev.share("forward") + ev.share("backward")
    gain = share * compute
    if gain < MODERATE:
        return []
    loader = next((ld for ld in ev.loaders if ld.role == "train"), None)
    message = (
        f"{share:.0%} of the tokens in the training batches are padding "
        f"({padding.padded_per_step:,.0f} of {padding.tokens_per_step:,.0f} per "
        f"step), and forward and backward ({compute:.0%} of the step) run over them too"
    )
    bucket = (
        "batch sequences of similar length: DataLoader(..., batch_sampler="
        "LengthBucketBatchSampler(lengths, batch_size)) or a TokenBudgetBatchSampler "
        "(torchpace.speedups), padding each batch only to its own longest sequence"
    )
    measured: dict[str, Any] = {"padding_share": share, "compute_share": compute}
    past = padding.past_longest_share
    if past >= PADDED_TO_FIXED * share or padding.padded_in_dataset:
        # Issue 29: a dataset padding every sample to a fixed length in __getitem__ was
        # promised 1.71x by bucketing, which alone changed nothing (every batch stays as wide);
        # trimming in the collate, then bucketing, measured 1.24x.
        message += (
            "; the dataset's samples come padded to a fixed length"
            if padding.padded_in_dataset
            else f"; {past / share:.0%} of that padding is past each batch's longest sequence: "
            "the samples come padded to a fixed length"
        ) + ", so reordering them alone removes nothing"
        bucket = (
            "pad in the collate instead, each batch to its own longest sequence (return the "
            "samples unpadded from __getitem__, or trim the fixed padding in collate_fn), then "
            + bucket.removesuffix(", padding each batch only to its own longest sequence")
        )
        measured["past_longest_share"] = past
    return [
        RuntimeFinding(
            pattern="padding-waste",
            technique="length-bucketing",
            severity=severity(gain),
            message=message,
            fix=bucket,
            site=loader.site if loader else None,
            gain=gain,
            measured=measured,
            plan_applies="past_longest_share" not in measured,
        )
    ]


# Padding past each batch's longest row at least this share of all the padding: the samples
# come padded to a fixed length, and a plan's bucketing (which reorders them) cannot apply it.
PADDED_TO_FIXED = 0.5


# -- syncs ---------------------------------------------------------------------------------------
def sync_skip(ev: Evidence) -> str | None:
    if ev.device != "cuda" and ev.uses_accelerator is False:
        return (
            "a CPU run of a script that never uses an accelerator: reading a value to the host "
            "blocks nothing here"
        )
    return None


def sync_match(ev: Evidence) -> list[RuntimeFinding]:
    out = []
    cuda = ev.device == "cuda"
    for row in ev.summary.syncs:
        if not row.every_step:
            continue
        blocked = row.blocked_s_per_step
        gain = min(blocked / ev.step_s, 1.0) if (cuda and blocked is not None) else None
        if cuda:
            cost = f", blocked {blocked * 1e3:.2f} ms per step" if blocked is not None else ""
            what = f"{row.call} syncs with the GPU {times(row.per_step)} per step{cost}"
        else:
            what = (
                f"{row.call} reads a value to the host {times(row.per_step)} per step; "
                "on a GPU each would wait for all queued work (on this CPU nothing blocks)"
            )
        out.append(
            RuntimeFinding(
                pattern="sync-every-step",
                technique="avoid-syncs",
                severity="moderate" if cuda else "info",
                message=what,
                fix=(
                    "keep the value on the device (accumulate losses in a tensor) and read it "
                    "only at the logging cadence, e.g. every 50 steps"
                ),
                site=(row.path, row.line),
                gain=gain,
                measured={
                    "per_step": row.per_step,
                    "blocked_s_per_step": blocked,
                    "call": row.call,
                },
            )
        )
    return out


# -- host-to-device copies ----------------------------------------------------------------------
def copy_skip(ev: Evidence) -> str | None:
    return None if ev.device == "cuda" else "no host-to-device copies on a CPU run"


def copy_match(ev: Evidence) -> list[RuntimeFinding]:
    share = ev.share("copy")
    train = [ld for ld in ev.loaders if ld.role == "train"]
    if share < MODERATE or (train and train[0].pin_memory):
        return []
    return [
        RuntimeFinding(
            pattern="blocking-copies",
            technique="pinned-memory",
            severity=severity(share),
            message=f"host-to-device copies take {share:.0%} of the step from pageable memory",
            fix="DataLoader(..., pin_memory=True) and .to(device, non_blocking=True)",
            site=train[0].site if train else None,
            gain=share,
            measured={"copy_share": share},
        )
    ]


# -- precision -----------------------------------------------------------------------------------
def float64_skip(ev: Evidence) -> str | None:
    if "float64" not in ev.settings.param_dtypes:
        return "no model computes in float64"
    return None


# 2x: a SIMD register holds half as many float64 lanes as float32 ones (AVX2: 4 against 8), so
# a CPU's float64 matmul peak is half its float32 one at best (a 1024x1024 matmul: 2.2x on the
# 2-core AMD EPYC, catalogue entry float32-not-float64); a float64 script of the issue-20 trial
# measured 1.77x. GPUs differ too much (1/2 to 1/64) to estimate here.
CPU_FLOAT64_SLOWDOWN = 2.0


def float64_match(ev: Evidence) -> list[RuntimeFinding]:
    compute = ev.share("forward") + ev.share("backward")
    timed = _timed(ev, to="float32")
    if timed is not None and timed.from_timed_s > 0:
        # The model's own calls, timed in float64 and float32: their ratio applies to all of
        # forward, backward and the optimizer, which convert with the parameters. Their seconds
        # saved alone fall short: the replay leaves out what goes around the ops (allocating
        # outputs, autograd), which shrinks with the precision too. benchmarks/float64_estimate.py
        # on the 2-core EPYC: a tanh MLP, a CNN, a wide MLP and an LSTM measured 1.96x, 2.38x,
        # 1.79x and 4.49x in float32; the ratio estimated 2.08x, 2.34x, 1.78x and 4.32x, the
        # seconds saved 1.89x, 2.13x, 1.71x and 5.11x. The corpus's LSTMCell loop measured
        # 1.41x; the ratio gave 1.35x, the seconds saved 1.29x.
        converted = compute + ev.share("optimizer")
        ratio = timed.to_timed_s / timed.from_timed_s
        gain: float | None = converted * (1.0 - ratio)
    else:
        gain = compute * (1 - 1 / CPU_FLOAT64_SLOWDOWN) if ev.device == "cpu" else None
    if gain is not None and gain < MODERATE:
        return []
    if timed is not None:
        rate = (
            f"its own calls ({_shapes(timed)}), timed in both precisions after the run, take "
            f"{timed.speedup or 0:.2f}x less time in float32"
        )
    elif gain is not None:
        rate = f"float32 math runs at up to {CPU_FLOAT64_SLOWDOWN:g}x the float64 rate on a CPU"
    else:
        rate = "float32 math runs 2-64x the float64 rate on GPUs"
    return [
        RuntimeFinding(
            pattern="float64-compute",
            technique="float32-not-float64",
            severity=severity(gain) if gain is not None else "high",
            message=(
                f"the model's parameters are float64, so forward and backward ({compute:.0%} of "
                f"the step) compute in double precision; {rate}"
            ),
            fix=(
                "train in float32: model.float() and float32 inputs (a numpy float64 array "
                "stays float64 through torch.from_numpy: add .float())"
            ),
            site=ev.forward_site,
            gain=gain,
            measured={
                "compute_share": compute,
                # the list itself is the result's settings.param_dtypes
                "param_dtypes": ", ".join(ev.settings.param_dtypes),
                "basis": "timed on the model's calls" if timed else "float64 SIMD width",
            },
        )
    ]


# A replay of the model's calls this many times the forward and backward time measured in the
# run contradicts it: the estimate built on it is withheld (amp_match).
REPLAY_OVER_MEASURED = 1.5


def _timed(ev: Evidence, to: str = "bfloat16") -> Replay | None:
    """The estimate timed on this model's own calls (doctor/precision.py) in precision ``to``,
    if there is one."""
    p = ev.precision
    return p if p is not None and p.saved_s is not None and p.to == to else None


def _shapes(timed: Replay) -> str:
    n, share = timed.timed, timed.flops_share_timed
    return f"{n} shape{'' if n == 1 else 's'}, {share:.0%} of their {timed.share_of}"


def amp_skip(ev: Evidence) -> str | None:
    if "float64" in ev.settings.param_dtypes:
        return "the model computes in float64: float32 first (float64-compute)"
    if ev.settings.autocast:
        return "autocast is already on"
    timed = _timed(ev)
    if timed is not None:
        if timed.saved_s is not None and timed.saved_s <= 0:
            return (
                f"bfloat16 {NOT_PAYING} on this model: its own matmul, convolution and attention "
                f"calls ({_shapes(timed)}) take {timed.from_timed_s * 1e3:.1f} ms a step "
                "in float32 and "
                f"{(timed.to_timed_s + timed.cast_timed_s) * 1e3:.1f} ms in bfloat16 "
                "with autocast's casts (timed on this device after the run)"
            )
        return None
    if not ev.flops_per_step:
        return "no FLOP count for the step"
    if "bf16" not in ev.peaks or "fp32" not in ev.peaks:
        return "this device has no fast bfloat16 matmul"
    return None


def amp_match(ev: Evidence) -> list[RuntimeFinding]:
    compute = ev.share("forward") + ev.share("backward")
    timed = _timed(ev)
    if timed is not None:
        saved = timed.saved_s or 0.0
        basis = (
            "this model's own matmul, convolution and attention calls "
            f"({_shapes(timed)}), timed in both precisions, run {timed.speedup or 0:.2f}x faster "
            "in bfloat16 with autocast's casts"
        )
        # the estimate's figures; its list of recurrent layers timed is the result's
        # precision.recurrent_twins, counted here
        figures: dict[str, Any] = {"basis": "timed on the model's calls", **timed.figures()}
    else:
        # No timing: the step's matmul/conv FLOPs at the measured peak rates, their time in
        # float32 minus their time in bfloat16.
        flops = float(ev.flops_per_step or 0)
        saved = flops / 1e12 * (1 / ev.peaks["fp32"] - 1 / ev.peaks["bf16"])
        ratio = ev.peaks["bf16"] / ev.peaks["fp32"]
        basis = (
            f"{flops / 1e9:.1f} GFLOP per step at this device's peak rates, {ratio:.1f}x faster "
            "in bfloat16 (an upper bound: small shapes do not reach the peak)"
        )
        figures = {"basis": "device peaks", "peak_ratio": ratio}
    withheld: dict[str, Any] = {}
    if timed is not None and timed.speedup and timed.flops_share_timed:
        # Bounded by measurement (issue 29): the float32 time the estimate assumes for all of
        # forward and backward's heavy calls is their replayed time over the share timed. Past
        # the forward and backward time measured in the run, only that measured time speeds
        # up, at the replayed ratio; a replay more than REPLAY_OVER_MEASURED times the measured
        # compute contradicts the run (a machine busy during the replay: 0.394 s replayed
        # against 0.153 s measured made 79% of a step, "bf16 removes all of forward and
        # backward") and the estimate is withheld.
        replayed = timed.from_timed_s / timed.flops_share_timed
        measured_s = compute * ev.step_s
        if replayed > measured_s > 0:
            saved = measured_s * (1 - 1 / timed.speedup)
            figures["bounded_by_measured_s"] = measured_s
        if measured_s > 0 and replayed > REPLAY_OVER_MEASURED * measured_s:
            withheld = {
                "withheld_gain": min(saved / ev.step_s, compute),
                "withheld_because": (
                    f"the float32 calls replayed after the run took {replayed * 1e3:.0f} ms a "
                    f"step, {replayed / measured_s:.1f}x the {measured_s * 1e3:.0f} ms of forward "
                    "and backward measured in it: the replay was disturbed, its ratio not "
                    "trusted"
                ),
            }
    # capped by the forward and backward time actually measured
    gain = min(saved / ev.step_s, compute)
    if gain < MODERATE:
        return []
    return [
        RuntimeFinding(
            pattern="float32-compute",
            technique="amp-bf16",
            severity=severity(gain),
            message=f"forward and backward run in float32 ({compute:.0%} of the step); {basis}",
            fix=(f"wrap forward and loss in torch.autocast('{ev.device}', dtype=torch.bfloat16)"),
            site=ev.forward_site,
            gain=None if withheld else gain,
            measured={"compute_share": compute, **figures, **withheld},
        )
    ]


# -- optimizer -----------------------------------------------------------------------------------
def fused_skip(ev: Evidence) -> str | None:
    opts = ev.settings.optimizers
    if not opts:
        return "no optimizer seen"
    if opts[0].fused:
        return "the optimizer is already fused"
    if not fused_on(opts[0].name, ev.device):
        return f"{opts[0].name} has no fused kernel on {ev.device}"
    return None


def fused_match(ev: Evidence) -> list[RuntimeFinding]:
    share = ev.share("optimizer")
    gain = share * (1 - 1 / FUSED_OPTIMIZER_SPEEDUP)
    if gain < MODERATE:
        return []
    opt = ev.settings.optimizers[0]
    return [
        RuntimeFinding(
            pattern="unfused-optimizer",
            technique="fused-optimizer",
            severity=severity(gain),
            message=f"{opt.name}.step() takes {share:.0%} of the step, one kernel per tensor",
            fix=f"torch.optim.{opt.name}(params, ..., fused=True)",
            site=opt.site,
            gain=gain,
            measured={"optimizer_share": share},
        )
    ]


# -- compilation ---------------------------------------------------------------------------------
def recompile_match(ev: Evidence) -> list[RuntimeFinding]:
    compiled = ev.summary.compiled_steps
    if not compiled:
        return []
    measured = ev.summary.measured_steps
    return [
        RuntimeFinding(
            pattern="recompiling",
            technique="fixed-shapes",
            severity="high",
            message=(
                f"torch.compile compiled again in {compiled} of {measured} measured steps: "
                "shapes or guards keep changing"
            ),
            fix="pad or bucket inputs to a few fixed shapes, or compile with dynamic=True",
            site=ev.forward_site,
            gain=None,
            measured={"compiled_steps": compiled},
        )
    ]
