"""The doctor's view of a script before its tune: ``torchpace doctor --json`` in a subprocess
(the same runner and instruments as ``torchpace doctor``), whose ranked findings order the tune's
trials. This module does not import torch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from torchpace.findings import DoctorFinding


class Survey(NamedTuple):
    findings: list[DoctorFinding]
    note: str
    first_step_s: float | None = None  # the run's start to its first step's end (set-up)
    step_s: float | None = None  # the median measured step


def survey(
    script: str,
    args: list[str],
    *,
    out: Path,
    steps: int,
    warmup: int,
    timeout_s: float,
    cwd: str | None = None,
) -> Survey:
    """The doctor's findings for ``script``, and its pace (time to the first step, median step
    time), read from ``out`` when an earlier tune wrote it (the cache), else measured now. A
    doctor that fails gives no findings and a note saying why; the tune then orders its trials
    by PRIORITY alone, with the default trial time limit."""
    if not out.exists():
        cmd = [
            sys.executable,
            "-m",
            "torchpace",
            "doctor",
            "--steps",
            str(steps),
            "--warmup",
            str(warmup),
            "--json",
            str(out),
            script,
            "--",
            *args,
        ]
        try:
            done = subprocess.run(
                cmd, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            return Survey(
                [],
                f"the doctor took over {timeout_s:g} s; trials in the default order (a longer "
                "--trial-timeout gives the survey longer too)",
            )
        if not out.exists():
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            why = f"the doctor measured nothing ({tail[0][:200]}); trials in default order"
            return Survey([], why)
    try:
        result = json.loads(out.read_text(encoding="utf-8"))
        findings = [DoctorFinding.of(f) for f in result.get("findings", [])]
        first = (result.get("run") or {}).get("first_step_s")
        step = (result.get("step_seconds") or {}).get("median")
    except (OSError, ValueError, AttributeError) as e:  # FindingError is a ValueError
        return Survey(
            [], f"the doctor's result {out} is unreadable ({e}); trials in the default order"
        )
    ranked = ", ".join(f"{f.technique} {f.gain:.0%}" for f in findings if f.gain is not None)
    note = f"doctor: {ranked}" if ranked else "doctor: no measured gain"
    noise = result.get("noise") if isinstance(result, dict) else None
    if isinstance(noise, dict) and noise.get("noisy"):
        # its gains below the step-time spread were withheld: say so, or "no measured gain"
        # reads as a verdict on a script that was only measured beside other work
        note += f" ({noise.get('reason') or 'noisy'}: gains within the noise were withheld)"
    number = (int, float)
    return Survey(
        findings,
        note,
        float(first) if isinstance(first, number) else None,
        float(step) if isinstance(step, number) else None,
    )
