"""The doctor's view of a script before its tune: ``torchpace doctor --json`` in a subprocess
(the same runner and instruments as ``torchpace doctor``), whose ranked findings order the tune's
trials. This module does not import torch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def survey(
    script: str,
    args: list[str],
    *,
    out: Path,
    steps: int,
    warmup: int,
    timeout_s: float,
    cwd: str | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """(findings, note): the doctor's findings for ``script``, read from ``out`` when an earlier
    tune wrote it (the cache), else measured now. A doctor that fails gives no findings and a
    note saying why; the tune then orders its trials by PRIORITY alone."""
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
            return [], f"the doctor took over {timeout_s:g} s; trials in the default order"
        if not out.exists():
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            return [], f"the doctor measured nothing ({tail[0][:200]}); trials in default order"
    try:
        result = json.loads(out.read_text(encoding="utf-8"))
        findings = [f for f in result.get("findings", []) if isinstance(f, dict)]
    except (OSError, ValueError, AttributeError) as e:
        return [], f"the doctor's result {out} is unreadable ({e}); trials in the default order"
    ranked = ", ".join(
        f"{f['technique']} {f['gain']:.0%}"
        for f in findings
        if isinstance(f.get("gain"), (int, float)) and f.get("technique")
    )
    return findings, f"doctor: {ranked}" if ranked else "doctor: no measured gain"
