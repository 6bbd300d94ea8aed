"""One whole run of a user's script for ``torchpace compare``, in this (fresh) process:
``python -m torchpace.script.compare_worker SPEC.json OUT.json``.

The script runs to its own end, as ``python script.py args`` would, with the spec's plan applied
by interposition (none for the script as written). Nothing stops it early: evaluation,
generation, checkpoints and plots run as they do for the user. Recorded for each training step
(optimizer steps, or ``backward()`` ends where the script builds no optimizer; the tune's
:class:`~torchpace.script.trial.ScriptSteps`): its end on the process's clock, its loss (the
tensor passed to ``backward()``, kept on the device and read once at the end, so the recording
adds no sync) and the samples its training forwards saw.

The result file holds times in seconds since this process entered Python code
(``entered`` is that moment on the wall clock, so the parent can add the interpreter's start).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

_ENTERED = time.time()
_ENTERED_PERF = time.perf_counter()

# Losses are kept on the device; every this many steps they are stacked into one tensor (no
# sync), so a run of a million steps keeps a few hundred tensors, not a million.
_CHUNK = 4096


def _since(perf: float) -> float:
    return perf - _ENTERED_PERF


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    from torchpace.measure.clock import resolve_device
    from torchpace.script.interpose import Interposer
    from torchpace.script.main import run_as_main
    from torchpace.script.trial import ScriptSteps, seed_everything
    from torchpace.train.plan import Plan

    if spec.get("cwd"):
        os.chdir(spec["cwd"])
    dev = resolve_device(spec.get("device", "auto"))
    plan = Plan.from_dict(spec["plan"], source="the plan") if spec.get("plan") else None
    plan = plan or Plan.as_written()
    if spec.get("seed") is not None:
        seed_everything(int(spec["seed"]))
    ip = Interposer(plan, device=dev)
    steps = ScriptSteps(sys.maxsize, dev, ip)
    chunks: list[torch.Tensor] = []

    def on_backward(loss: torch.Tensor) -> None:
        steps.on_backward(loss.detach())
        if len(steps.losses) >= _CHUNK:
            chunks.append(torch.stack(steps.losses).float())
            steps.losses.clear()

    first_forward: list[float] = []
    ip.on_first_forward = lambda: first_forward.append(_since(time.perf_counter()))
    steps.install(on_backward)
    try:
        ended = run_as_main(spec["script"], list(spec.get("args") or ()))
    finally:
        ip.uninstall()
    finished = _since(time.perf_counter())
    ends = [_since(t) for t in steps.clock.times]
    if steps.losses:
        chunks.append(torch.stack(steps.losses).float())
    losses = [float(x) for x in torch.cat(chunks).cpu().tolist()] if chunks else []
    train_loaders = [x for x in ip.loaders if x["shuffled"] and x["batch_size"]]
    return {
        "entered": _ENTERED,
        "exit_code": ended.exit_code,
        "outcome": ended.outcome,
        "first_forward_s": first_forward[0] if first_forward else None,
        "step_ends_s": ends,
        "losses": losses[: len(ends)],
        "samples": steps.samples[: len(ends)],
        "finished_s": finished,
        "device": str(dev),
        "batch_size": train_loaders[0]["batch_size"] if train_loaders else None,
        "applied": sorted({a.technique for a in ip.applied if a.changed}),
        "not_applied": ip.not_applied(),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        usage = "usage: python -m torchpace.script.compare_worker SPEC.json OUT.json"
        print(usage, file=sys.stderr)
        return 2
    from torchpace._files import atomic_write_text

    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    result = run(spec)
    atomic_write_text(Path(argv[1]), json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    # The script's own exit status is in the result; this process exits 0 when it wrote one.
    sys.exit(main(sys.argv[1:]))
