"""Contestant "naive": the example script itself, ``examples/naive_WORKLOAD.py``, unchanged.

It runs through ``runpy`` in the harness's process, so the harness's hooks time it as they time
the others. Its own evaluation is off (``--eval-every`` past the run); the harness evaluates.
The trained model is a local of the script's ``main()``: it is found at the first optimizer step
(inside the warm-up, untimed) as the largest nn.Module holding the optimizer's parameters, and
kept for the harness's evaluation.
"""

from __future__ import annotations

import gc
import runpy
import shlex
import sys
from pathlib import Path
from typing import Any

from _peers_job import Job, Trained
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from torchpace.recipes import load_recipe

ROOT = Path(__file__).resolve().parents[1]
NO_EVAL = 10**9  # --eval-every past any run: the script never evaluates


def script(workload: str) -> Path:
    return ROOT / "examples" / f"naive_{workload}.py"


def argv(job: Job, lr: float) -> list[str]:
    out = [str(script(job.workload)), "--steps", str(job.steps), "--seed", str(job.seed)]
    out += ["--eval-every", str(NO_EVAL), "--lr", str(lr)]
    return out + (["--preset", job.lm_size] if job.workload == "lm" else [])


def owner(optimizer: Any) -> nn.Module:
    """The largest module that holds the optimizer's first parameter: the model."""
    first = optimizer.param_groups[0]["params"][0]
    held = [
        o
        for o in gc.get_objects()
        if isinstance(o, nn.Module) and any(p is first for p in o.parameters())
    ]
    return max(held, key=lambda m: sum(1 for _ in m.parameters()))


def train(job: Job) -> Trained:
    args = argv(job, load_recipe(job.recipe).lr)
    found: dict[str, nn.Module] = {}

    def capture(opt: Any, a: object, kw: object) -> None:
        if "model" not in found:
            found["model"] = owner(opt)  # once, in step 1: a scan of every live object

    handle = register_optimizer_step_post_hook(capture)
    saved = list(sys.argv), sys.path[0]
    sys.argv, sys.path[0] = args, str(script(job.workload).parent)
    try:
        runpy.run_path(args[0], run_name="__main__")
    finally:
        handle.remove()
        sys.argv, sys.path[0] = saved
    command = shlex.join(["python", str(Path(args[0]).relative_to(ROOT)), *args[1:]])
    return Trained(model=found["model"], amp="off", techniques=(), settings={"command": command})
