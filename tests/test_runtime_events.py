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


def test_one_definition_of_a_step() -> None:
    from torchpace.runtime.steps import BACKWARD, OPTIMIZER, StepMarker

    gan = StepMarker()  # two optimizers: the first to step ends the step
    gan.optimizer_built()
    gan.optimizer_built()
    d, g = object(), object()
    assert not gan.backward()
    assert [gan.optimizer_step(d), gan.optimizer_step(g)] == [True, False]
    assert gan.by == OPTIMIZER and gan.primary == id(d)

    manual = StepMarker()  # no optimizer by the first backward(): each backward() ends a step
    assert manual.backward() and manual.backward()
    manual.optimizer_built()  # built after hand-made updates began: its steps are inside one
    assert not manual.optimizer_step(object()) and manual.by == BACKWARD

    fp16 = StepMarker()
    fp16.optimizer_built()
    opt = object()
    assert not fp16.backward()
    assert fp16.optimizer_step(opt) and not fp16.scaler_update() and not fp16.skipped
    assert not fp16.backward()
    assert fp16.scaler_update() and fp16.skipped  # no step(): the scaler skipped it


def test_the_doctor_counts_a_step_the_scaler_skipped() -> None:
    # The doctor counted steps at optimizer.step() alone, so an fp16 step whose GradScaler
    # skipped it merged into the next step; the script trial counted it. One StepMarker now.
    from pathlib import Path

    from torchpace.doctor import script

    path = Path(__file__).parent / "doctor" / "scripts" / "scaler_skips.py"
    ran = script.run(str(path), [], steps=0, warmup=1, lint=False)
    assert ran.exit_code == 0, ran.outcome
    assert ran.result is not None
    steps = ran.result["steps"]
    assert steps["warmup"] + steps["probe"] + steps["measured"] == 12, steps  # each iteration
    assert ran.result["run"]["steps_marked_by"] == "optimizer.step()"


def test_each_training_event_is_patched_in_one_place() -> None:
    """The doctor and the plan interposer each wrapped backward(), patched Optimizer.__init__
    and hooked every module's forward to find the model (issue 31); they subscribe through
    runtime.events and runtime.models now."""
    import re
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "torchpace"
    patterns = {
        "backward": r"torch\.Tensor,\s*\"backward\"",
        "Optimizer.__init__": r"Optimizer,\s*\"__init__\"",
        # the depth of module calls, which finds the roots, needs a global hook at each call's end
        # (the doctor's probe step only notes recurrent layers with a global pre-hook)
        "a root's call": r"register_module_forward_hook\(",
    }
    for event, pattern in patterns.items():
        where = [
            str(p.relative_to(src))
            for p in src.rglob("*.py")
            if re.search(pattern, p.read_text("utf-8"))
        ]
        assert len(where) == 1 and where[0].startswith("runtime/"), (event, where)


class _Transform(torch.nn.Module):
    """A dataset's transform with a parameter, run inside the DataLoader's fetch."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


class _Student(torch.nn.Linear):
    pass


class _Teacher(torch.nn.Linear):
    pass


def _distillation() -> tuple[torch.nn.Module, ...]:
    """A loop whose roots are a student (trained), a teacher in eval() called with grad on, a
    loss module, and a parameterised transform inside each fetch."""
    from torch.utils.data import DataLoader

    transform = _Transform()
    loader = DataLoader([torch.randn(4) for _ in range(8)], batch_size=4, collate_fn=None)

    student, teacher, loss_fn = _Student(4, 2), _Teacher(4, 2).eval(), torch.nn.MSELoss()
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    loader.collate_fn = lambda xs: transform(torch.stack(xs))  # called inside the fetch
    for x in loader:
        target = teacher(x).detach()
        loss = loss_fn(student(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return student, teacher, loss_fn, transform


def test_the_doctor_and_the_interposer_find_the_same_model() -> None:
    # The interposer's model was a training-mode call with parameters; the doctor's any call
    # with grad on and parameters, so it counted a teacher in eval() as trained, and neither
    # left out a transform run inside a DataLoader's fetch. One definition now.
    from torchpace.doctor.hooks import ModuleHooks
    from torchpace.doctor.recorder import Recorder
    from torchpace.script.interpose import Interposer
    from torchpace.train.plan import Plan

    ip = Interposer(Plan.as_written(), device=torch.device("cpu"))
    ip.install()
    try:
        kept = _distillation()
    finally:
        ip.uninstall()
    assert [type(r()) for r in ip.roots] == [_Student]

    patches = Patches()
    hooks = ModuleHooks(Recorder(steps=0, warmup=1, stop=False), patches)
    try:
        kept = _distillation()
    finally:
        patches.undo()
    found = {type(m): id(m) in hooks._trained for m in hooks.modules()}
    assert found == {_Student: True, _Teacher: False, torch.nn.MSELoss: False}
    assert all(m is not None for m in kept)
