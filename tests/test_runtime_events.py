"""The training events patched once for every runtime (runtime.events)."""

from __future__ import annotations

import torch

from torchpace.runtime.events import on_scaler_update
from torchpace.runtime.patching import Patches


def test_every_scaler_update_is_seen_the_skipped_step_included_and_undone_after() -> None:
    original = torch.amp.GradScaler.update
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    seen: list[float] = []
    patches = Patches()
    on_scaler_update(patches, lambda: seen.append(scaler.get_scale()))
    try:
        for value in (1.0, float("inf"), 1.0):  # the second step overflows: skipped
            opt.zero_grad()
            loss = model(torch.ones(1, 2)).sum() * value
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    finally:
        patches.undo()
    # three updates seen, each after the scale was set: the overflow halved it
    assert seen == [2.0**16, 2.0**15, 2.0**15]
    assert torch.amp.GradScaler.update is original


def test_the_scaler_update_is_patched_in_one_place() -> None:
    """The tune's worker, the script trial and compare's worker each patched GradScaler.update by
    hand (issue 31); they all subscribe through runtime.events now, and no other module patches
    it."""
    import re
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "torchpace"
    patched = re.compile(r"GradScaler,\s*\"update\"")
    where = [
        str(p.relative_to(src)) for p in src.rglob("*.py") if patched.search(p.read_text("utf-8"))
    ]
    assert where == ["runtime/events.py"], where
