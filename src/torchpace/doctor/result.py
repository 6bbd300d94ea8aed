"""The doctor's result: one JSON-ready dictionary under a versioned schema
(docs/doctor-result.schema.json; described in docs/doctor.md)."""

from __future__ import annotations

import datetime as _dt
import functools
import os
import sysconfig
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchpace.doctor.evidence import MODERATE
from torchpace.doctor.loader_rate import measure
from torchpace.doctor.merge import lint_files, merge
from torchpace.doctor.noise import judge, withhold
from torchpace.doctor.patterns import PATTERNS, Evidence, RuntimeFinding, diagnose, rank
from torchpace.doctor.precision import estimate
from torchpace.doctor.sites import Site
from torchpace.doctor.summary import summarize_steps, utilisation
from torchpace.findings import Finding, jsonable
from torchpace.measure.env import fingerprint
from torchpace.measure.peaks import known_gpu_peak

if TYPE_CHECKING:
    from torchpace.doctor.session import Session

SCHEMA = "torchpace.doctor/1"
# Set by the test suite and the corpus runs: every result built or written is checked against the
# published schema (needs jsonschema, a development dependency, and the source tree's docs/).
VALIDATE_ENV = "TORCHPACE_VALIDATE_RESULTS"


_SCHEMA_FILE = "doctor-result.schema.json"


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    """The published schema's validator, read and compiled once per process."""
    import json
    from pathlib import Path

    from jsonschema import Draft202012Validator

    schema = json.loads((Path(__file__).resolve().parents[3] / "docs" / _SCHEMA_FILE).read_text())
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def schema_errors(result: dict[str, Any]) -> list[str]:
    """Where ``result``, as its JSON file would hold it, breaks docs/doctor-result.schema.json:
    one line per error, naming the path; empty when it validates."""
    import json

    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<top>'}: {e.message}"
        for e in _validator().iter_errors(json.loads(json.dumps(jsonable(result), default=str)))
    ]


def validate_if_asked(result: dict[str, Any]) -> None:
    """Raise when ``$TORCHPACE_VALIDATE_RESULTS`` is 1 and ``result`` breaks
    docs/doctor-result.schema.json; nothing otherwise."""
    if os.environ.get(VALIDATE_ENV) != "1":
        return
    errors = schema_errors(result)
    if errors:
        raise ValueError(f"the doctor's result breaks {_SCHEMA_FILE}: " + "; ".join(errors))


_LIBRARY_DIRS = tuple(
    {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def _peaks(env: dict[str, Any]) -> dict[str, float]:
    """TFLOP/s by math mode: the vendor's figures for a known GPU, else the measured rates."""
    peaks: dict[str, float] = {}
    if env["device"].startswith("cuda"):
        for mode in ("fp32", "tf32", "bf16", "fp16"):
            value = known_gpu_peak(env["device_name"], mode)
            if value is not None:
                peaks[mode] = value
    if "fp32" not in peaks and env.get("peak_tflops_fp32"):
        peaks["fp32"] = env["peak_tflops_fp32"]
    if "bf16" not in peaks and env.get("peak_tflops_bf16"):
        peaks["bf16"] = env["peak_tflops_bf16"]
    return peaks


def _math_mode(settings: dict[str, Any], cuda: bool) -> str:
    autocast = " ".join(settings.get("autocast", []))
    if "bfloat16" in autocast:
        return "bf16"
    if "float16" in autocast:
        return "fp16"
    if cuda and settings.get("float32_matmul_precision") in ("high", "medium"):
        return "tf32"
    if cuda and settings.get("conv_model") and settings.get("tf32_cudnn"):
        return "tf32"  # cuDNN runs float32 convolutions in TF32 by default (allow_tf32=True)
    return "fp32"


def _user_file(path: str) -> bool:
    return os.path.isfile(path) and not path.startswith(_LIBRARY_DIRS) and path.endswith(".py")


def _files_to_lint(session: Session, script: str | None) -> set[str]:
    r = session.rec.records
    sites: set[Site] = set(r.forward_sites) | r.train_forward_sites | r.backward_sites
    sites |= r.step_sites
    sites |= {ld.site for ld in r.loaders.values() if ld.site is not None}
    sites |= {(p, ln) for s in r.steps for ((p, ln), _k) in s.syncs}
    files = {p for p, _ in sites if _user_file(p)}
    if script is not None:
        files.add(os.path.abspath(script))
    return files


def _uses_accelerator(files: set[str]) -> bool:
    """Whether any of the run's own files moves or creates tensors or modules on a CUDA device
    (lint's static reading, lint/device.py): a CPU run of such a script stands in for a GPU one,
    where its host reads block. Unreadable files count as using one (nothing is dropped)."""
    from torchpace.lint.device import uses_cuda
    from torchpace.lint.engine import parse
    from torchpace.lint.results import LintError

    for path in sorted(files):
        try:
            ctx = parse(path, Path(path).read_bytes())
        except OSError:
            return True
        if isinstance(ctx, LintError) or uses_cuda(ctx):
            return True
    return False


def _forward_site(session: Session, script: str | None) -> Site | None:
    """Where a training finding points: the model's call with autograd on (the first line of
    the script among them), not an evaluation call of the same model."""
    records = session.rec.records
    sites = sorted(records.train_forward_sites or records.forward_sites)
    if not sites:
        return None
    main = os.path.abspath(script) if script else None
    return min(sites, key=lambda s: (s[0] != main, s[1]))


def _checked(util: dict[str, Any]) -> dict[str, Any]:
    """An MFU over 100% is a wrong FLOP count, never a result: it is flagged and said (a
    MobileNetV3 run printed 113-134% without comment)."""
    mfu = util.get("mfu")
    util["mfu_impossible"] = bool(mfu is not None and mfu > 1.0)
    if util["mfu_impossible"]:
        said = (
            f"MFU {mfu:.0%} is impossible: the FLOP count (an op counted more than it "
            "computes) or the device's measured peak (taken on a busy machine) is wrong, so MFU "
            "and the gains estimated from FLOPs are not to be trusted"
        )
        util["note"] = f"{util['note']}; {said}" if util.get("note") else said
    return util


def _loader_rates(
    session: Session, summary: dict[str, Any], loaders: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The training dataset's own pace by worker count (doctor/loader_rate.py), measured only
    where the input estimate needs it: a training loader without workers that waited 5% of the
    step. The global RNG is put back, so a ``watch()`` block's process goes on as it would."""
    train = [ld for ld in loaders if ld["role"] == "train" and ld["num_workers"] == 0]
    data = (summary.get("breakdown") or {}).get("data", {}).get("share", 0.0)
    if not train or data < MODERATE:
        return None
    import torch

    source = session.rec.records.loader_sources.get(train[0]["key"])
    with torch.random.fork_rng(devices=[]):
        return measure(source)


def build(
    session: Session,
    *,
    target: dict[str, Any],
    outcome: str,
    lint: bool = True,
    script: str | None = None,
) -> dict[str, Any]:
    records = session.rec.records
    cuda = session.device.type == "cuda"
    summary = summarize_steps(records, cuda=cuda)
    # The script's peak first: measuring the peak FLOP/s (a cold cache) runs large matmuls here.
    memory = session.memory()
    env = fingerprint(session.device, measure_peak=records.flops_per_step is not None).to_dict()
    peaks = _peaks(env)
    settings = dict(records.settings)
    mode = _math_mode(settings, cuda)
    step_s = summary["step_seconds"]["median"] if "step_seconds" in summary else None
    loaders = [{**info.to_dict(), "key": key} for key, info in records.loaders.items()]
    precision = None if step_s is None else estimate(records.compute_calls, session.device, step_s)
    loader_rates = _loader_rates(session, summary, loaders)
    if precision is not None:  # the replay's float32 side against the step's own compute time
        breakdown = summary.get("device_breakdown") or summary.get("breakdown") or {}
        precision["compute_measured_s"] = sum(
            breakdown.get(phase, {}).get("seconds", {}).get("median", 0.0)
            for phase in ("forward", "backward")
        )
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "target": target,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "outcome": outcome,
        "env": env,
        "run": {
            "warmup": session.rec.warmup,
            "steps_requested": session.rec.steps,
            "optimizer_steps_seen": session.rec.boundaries,  # steps, whatever marks them
            "steps_marked_by": session.rec.steps_by.by,
            "child_processes": [c.to_dict() for c in records.children],
            "first_step_s": records.first_step_s,
        },
        **summary,
        "utilisation": _checked(
            {
                **utilisation(records.flops_per_step, step_s, peaks.get(mode)),
                "math_mode": mode,
                "note": records.flops_note,
                "uncounted_ops": records.flops_uncounted,
            }
        ),
        "memory": memory,
        "precision": precision,
        "loader_rates": loader_rates,
        "noise": judge(summary, session.other_cores, (loader_rates or {}).get("other_cores")),
        "settings": settings,
        "loaders": loaders,
        "findings": [],
        "skipped_patterns": {},
        "lint_errors": [],
        "instrument_errors": list(records.instrument_errors),
    }
    runtime: list[RuntimeFinding] = []
    if step_s is not None:
        evidence = Evidence.of(
            summary=summary,
            settings=settings,
            loaders=loaders,
            device="cuda" if cuda else "cpu",
            peaks=peaks,
            flops_per_step=records.flops_per_step,
            forward_site=_forward_site(session, script),
            memory=memory,
            precision=precision,
            loader_rates=loader_rates,
            threads=env.get("torch_threads"),
            uses_accelerator=cuda or _uses_accelerator(_files_to_lint(session, script)),
        )
        runtime, skipped = diagnose(evidence)
        runtime = rank(withhold(runtime, result["noise"]))
        result["skipped_patterns"] = skipped
    lint_found: list[Finding] = []
    if lint:
        lint_found, result["lint_errors"] = lint_files(_files_to_lint(session, script))
    lines = {(os.path.abspath(p), ln) for p, ln in records.lines_run}
    lines |= set(records.forward_sites) | records.backward_sites | records.step_sites
    lines |= {ld.site for ld in records.loaders.values() if ld.site is not None}
    lines |= {o.site for o in records.optimizers.values() if o.site is not None}
    technique_of = {p.name: p.technique for p in PATTERNS}
    checked = {
        technique_of[name]: why
        for name, why in result["skipped_patterns"].items()
        if name in technique_of
    }
    result["findings"] = merge(
        runtime,
        lint_found,
        lines_seen=lines,
        syncs=summary.get("syncs_all_steps", []),
        checked=checked,
    )
    validate_if_asked(result)
    return result
