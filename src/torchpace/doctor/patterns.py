"""Diagnosis: runtime patterns that turn the measurement into ranked findings.

Each pattern (after torch's ``profiler/_pattern_matcher.py``) has a name, the catalogue technique
that removes the problem, a ``skip`` precondition that says why it does not apply, and ``match``,
which returns findings with an *estimated gain*: the share of step time the technique can
recover, computed from this run's measurement. A gain that cannot be computed from the
measurement is None, and such findings rank after the estimated ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torchpace.doctor.sites import Site

# 5%: the PyTorch profiler's TensorBoard plugin flags input loading above 5% of step time
# (torch_tb_profiler RunProfileData.analyze, "dataloader_ratio > 0.05"). The same line is used for
# every estimated gain: below it, a change is within this machine's step-to-step noise.
MODERATE = 0.05
# 20%: "high" for input-bound steps, the mark torchpace's doctor issue set (four times the
# profiler's line: one step in five spent waiting).
HIGH = 0.20
# 3x: fused AdamW against the default on a 2-core AMX Xeon, torch 2.13 (the brief's figure; our
# benchmarks measured 5.6x, benchmarks/README.md). The lower figure keeps the estimate modest.
FUSED_OPTIMIZER_SPEEDUP = 3.0
NEGLIGIBLE = 0.005  # see estimated()
# Optimizers with a fused kernel on both CPU and CUDA in torch 2.13.
FUSABLE = frozenset({"Adam", "AdamW", "SGD", "Adagrad"})


@dataclass(frozen=True)
class Evidence:
    summary: dict[str, Any]
    settings: dict[str, Any]
    loaders: list[dict[str, Any]]  # LoaderInfo.to_dict() plus "key"
    device: str  # "cpu" or "cuda"
    peaks: dict[str, float]  # TFLOP/s by math mode: "fp32", "bf16", "tf32"
    flops_per_step: int | None
    forward_site: Site | None
    memory: dict[str, Any]

    def share(self, phase: str) -> float:
        breakdown = self.summary.get("device_breakdown") or self.summary.get("breakdown") or {}
        return float(breakdown.get(phase, {}).get("share", 0.0))

    def host_share(self, phase: str) -> float:
        return float(self.summary.get("breakdown", {}).get(phase, {}).get("share", 0.0))

    @property
    def step_s(self) -> float:
        return float(self.summary["step_seconds"]["median"])


@dataclass(frozen=True)
class RuntimeFinding:
    pattern: str
    technique: str
    severity: str  # "high", "moderate" or "info"
    message: str  # the problem, with the figure measured
    fix: str  # what to change
    site: Site | None
    gain: float | None  # estimated share of step time recovered
    measured: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Pattern:
    name: str
    technique: str
    description: str  # states the fix
    skip: Callable[[Evidence], str | None]
    match: Callable[[Evidence], list[RuntimeFinding]]


def _site(d: dict[str, Any] | None) -> Site | None:
    return None if d is None else (d["path"], d["line"])


def times(n: float) -> str:
    return "once" if n == 1 else f"{n:g} times"


def _severity(gain: float) -> str:
    return "high" if gain >= HIGH else "moderate"


# -- input ---------------------------------------------------------------------------------------
def _input_skip(ev: Evidence) -> str | None:
    if not any(ld["role"] == "train" for ld in ev.loaders):
        return "no DataLoader feeds the training steps"
    return None


def _input_match(ev: Evidence) -> list[RuntimeFinding]:
    share = ev.share("data")
    if share < MODERATE:
        return []
    loader = next(ld for ld in ev.loaders if ld["role"] == "train")
    breakdown = ev.summary.get("device_breakdown") or ev.summary["breakdown"]
    wait_ms = breakdown["data"]["seconds"]["median"] * 1e3
    if loader["num_workers"] == 0:
        technique = "loader-workers"
        fix = (
            "load batches in worker processes: DataLoader(..., num_workers=N, "
            "persistent_workers=True); measure N, starting from the free cores"
        )
    else:
        technique = "fast-input-format"
        fix = (
            f"the {loader['num_workers']} workers cannot keep up: make each sample cheaper "
            "(decode once, store preprocessed tensors, a faster format) or add workers"
        )
    return [
        RuntimeFinding(
            pattern="input-bound",
            technique=technique,
            severity=_severity(share),
            message=(
                f"the step waits {share:.0%} of its time for the next batch "
                f"({wait_ms:.1f} ms per step, {loader['num_workers']} loader workers)"
            ),
            fix=fix,
            site=_site(loader["site"]),
            gain=share,
            measured={"data_share": share, "data_ms_per_step": wait_ms},
        )
    ]


# -- syncs ---------------------------------------------------------------------------------------
def _sync_match(ev: Evidence) -> list[RuntimeFinding]:
    out = []
    cuda = ev.device == "cuda"
    for row in ev.summary.get("syncs", []):
        if not row["every_step"]:
            continue
        blocked = row["blocked_s_per_step"]
        gain = min(blocked / ev.step_s, 1.0) if (cuda and blocked is not None) else None
        if cuda:
            cost = f", blocked {blocked * 1e3:.2f} ms per step" if blocked is not None else ""
            what = f"{row['call']} syncs with the GPU {times(row['per_step'])} per step{cost}"
        else:
            what = (
                f"{row['call']} reads a value to the host {times(row['per_step'])} per step; "
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
                site=(row["path"], row["line"]),
                gain=gain,
                measured={
                    "per_step": row["per_step"],
                    "blocked_s_per_step": blocked,
                    "call": row["call"],
                },
            )
        )
    return out


# -- host-to-device copies ----------------------------------------------------------------------
def _copy_skip(ev: Evidence) -> str | None:
    return None if ev.device == "cuda" else "no host-to-device copies on a CPU run"


def _copy_match(ev: Evidence) -> list[RuntimeFinding]:
    share = ev.share("copy")
    train = [ld for ld in ev.loaders if ld["role"] == "train"]
    if share < MODERATE or (train and train[0]["pin_memory"]):
        return []
    return [
        RuntimeFinding(
            pattern="blocking-copies",
            technique="pinned-memory",
            severity=_severity(share),
            message=f"host-to-device copies take {share:.0%} of the step from pageable memory",
            fix="DataLoader(..., pin_memory=True) and .to(device, non_blocking=True)",
            site=_site(train[0]["site"]) if train else None,
            gain=share,
            measured={"copy_share": share},
        )
    ]


# -- precision -----------------------------------------------------------------------------------
def _amp_skip(ev: Evidence) -> str | None:
    if ev.settings.get("autocast"):
        return "autocast is already on"
    if not ev.flops_per_step:
        return "no FLOP count for the step"
    if "bf16" not in ev.peaks or "fp32" not in ev.peaks:
        return "this device has no fast bfloat16 matmul"
    return None


def _amp_match(ev: Evidence) -> list[RuntimeFinding]:
    flops = float(ev.flops_per_step or 0)
    # The matmul/conv FLOPs of one step at the measured peak rates: their time in float32 minus
    # their time in bfloat16, capped by the forward and backward time actually measured.
    saved = flops / 1e12 * (1 / ev.peaks["fp32"] - 1 / ev.peaks["bf16"])
    compute = ev.share("forward") + ev.share("backward")
    gain = min(saved / ev.step_s, compute)
    if gain < MODERATE:
        return []
    ratio = ev.peaks["bf16"] / ev.peaks["fp32"]
    return [
        RuntimeFinding(
            pattern="float32-compute",
            technique="amp-bf16",
            severity=_severity(gain),
            message=(
                f"forward and backward run in float32 ({compute:.0%} of the step, "
                f"{flops / 1e9:.1f} GFLOP per step); bfloat16 matmuls run {ratio:.1f}x faster "
                "on this device"
            ),
            fix=(f"wrap forward and loss in torch.autocast('{ev.device}', dtype=torch.bfloat16)"),
            site=ev.forward_site,
            gain=gain,
            measured={"compute_share": compute, "peak_ratio": ratio},
        )
    ]


# -- optimizer -----------------------------------------------------------------------------------
def _fused_skip(ev: Evidence) -> str | None:
    opts = ev.settings.get("optimizers", [])
    if not opts:
        return "no optimizer seen"
    if opts[0]["fused"]:
        return "the optimizer is already fused"
    if opts[0]["class"] not in FUSABLE:
        return f"{opts[0]['class']} has no fused kernel"
    return None


def _fused_match(ev: Evidence) -> list[RuntimeFinding]:
    share = ev.share("optimizer")
    gain = share * (1 - 1 / FUSED_OPTIMIZER_SPEEDUP)
    if gain < MODERATE:
        return []
    opt = ev.settings["optimizers"][0]
    return [
        RuntimeFinding(
            pattern="unfused-optimizer",
            technique="fused-optimizer",
            severity=_severity(gain),
            message=f"{opt['class']}.step() takes {share:.0%} of the step, one kernel per tensor",
            fix=f"torch.optim.{opt['class']}(params, ..., fused=True)",
            site=_site(opt["site"]),
            gain=gain,
            measured={"optimizer_share": share},
        )
    ]


# -- compilation ---------------------------------------------------------------------------------
def _recompile_match(ev: Evidence) -> list[RuntimeFinding]:
    compiled = ev.summary["steps"]["excluded"].get("compiled", 0)
    if not compiled:
        return []
    measured = ev.summary["steps"]["measured"]
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


# -- settings ------------------------------------------------------------------------------------
def _setting(
    pattern: str, technique: str, message: str, fix: str, site: Site | None
) -> list[RuntimeFinding]:
    return [RuntimeFinding(pattern, technique, "moderate", message, fix, site, None)]


def _channels_last_match(ev: Evidence) -> list[RuntimeFinding]:
    s = ev.settings
    fast_conv = bool(s.get("autocast")) or ev.device == "cuda"
    # Only when a 4-D input was seen and it was channels-first (None: no 4-D input seen).
    if not (s.get("conv_model") and fast_conv) or s.get("channels_last_input") is not False:
        return []
    return _setting(
        "channels-first-convs",
        "channels-last",
        "convolutions run on NCHW (channels-first) inputs",
        "model.to(memory_format=torch.channels_last) and the same for each input batch",
        ev.forward_site,
    )


def _cudnn_match(ev: Evidence) -> list[RuntimeFinding]:
    s = ev.settings
    if ev.device != "cuda" or not s.get("conv_model") or s.get("cudnn_benchmark"):
        return []
    return _setting(
        "cudnn-autotuner-off",
        "cudnn-benchmark",
        "torch.backends.cudnn.benchmark is off in a convolutional model",
        "torch.backends.cudnn.benchmark = True (when input shapes do not change)",
        ev.forward_site,
    )


def _anomaly_match(ev: Evidence) -> list[RuntimeFinding]:
    if not ev.settings.get("anomaly_detection"):
        return []
    return _setting(
        "anomaly-detection-on",
        "disable-debug-apis",
        "autograd anomaly detection is on: every backward op is checked and its stack kept",
        "remove torch.autograd.set_detect_anomaly(True) outside debugging",
        None,
    )


def _dp_match(ev: Evidence) -> list[RuntimeFinding]:
    if not ev.settings.get("data_parallel"):
        return []
    return _setting(
        "data-parallel",
        "ddp-not-dp",
        "nn.DataParallel runs one process and copies the model to every GPU each step",
        "DistributedDataParallel under torchrun, one process per GPU",
        ev.forward_site,
    )


def _alloc_match(ev: Evidence) -> list[RuntimeFinding]:
    retries = ev.memory.get("alloc_retries", 0)
    if not retries:
        return []
    return _setting(
        "allocator-retries",
        "fixed-shapes",
        f"the CUDA allocator freed its cache and retried {retries} times: memory is fragmented",
        "keep shapes fixed (or preallocate at the worst case), or lower the batch size",
        ev.forward_site,
    )


def _never(ev: Evidence) -> str | None:
    return None


PATTERNS: tuple[Pattern, ...] = (
    Pattern("input-bound", "loader-workers", "Load batches in workers.", _input_skip, _input_match),
    Pattern(
        "sync-every-step",
        "avoid-syncs",
        "Read values only at the log cadence.",
        _never,
        _sync_match,
    ),
    Pattern(
        "blocking-copies", "pinned-memory", "Pin and copy non-blocking.", _copy_skip, _copy_match
    ),
    Pattern("float32-compute", "amp-bf16", "Use bf16 autocast.", _amp_skip, _amp_match),
    Pattern("unfused-optimizer", "fused-optimizer", "Pass fused=True.", _fused_skip, _fused_match),
    Pattern("recompiling", "fixed-shapes", "Keep shapes fixed.", _never, _recompile_match),
    Pattern(
        "channels-first-convs",
        "channels-last",
        "Use channels_last.",
        _never,
        _channels_last_match,
    ),
    Pattern(
        "cudnn-autotuner-off", "cudnn-benchmark", "Turn on cudnn.benchmark.", _never, _cudnn_match
    ),
    Pattern(
        "anomaly-detection-on",
        "disable-debug-apis",
        "Turn anomaly detection off.",
        _never,
        _anomaly_match,
    ),
    Pattern("data-parallel", "ddp-not-dp", "Use DDP.", _never, _dp_match),
    Pattern("allocator-retries", "fixed-shapes", "Keep shapes fixed.", _never, _alloc_match),
)


def estimated(gain: float | None) -> bool:
    """A gain worth ranking by: half a percent is finer than step timing resolves on a shared
    machine, so a smaller estimate ranks with the findings that have none."""
    return gain is not None and gain >= NEGLIGIBLE


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
