"""TP205 on barriers between processes every step (issue 32, the twenty-sixth session): Accelerate's
``wait_for_everyone()`` in lucidrains' diffusion and audio trainers, ``dist.barrier()`` around
the optimizer step of torchtune's GRPO recipe, and a project helper that only waits (detectron2's
and PixArt's ``synchronize()``), reported where the loop calls it. The fixtures have the shape of
that code, shortened and renamed; each test fails on the rules before the change, and the
controls (a barrier before a periodic save, a one-time barrier) hold on both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lint_findings import findings, project_findings

# lucidrains' denoising-diffusion Trainer.train(): a barrier before and after every optimizer step.
ACCELERATE = """
import torch
from accelerate import Accelerator

accelerator = Accelerator()
model = Unet(dim=64).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
model, opt, dl = accelerator.prepare(model, opt, dl)

step = 0
while step < 700000:
    data = next(dl)
    with accelerator.autocast():
        loss = model(data)
    accelerator.backward(loss)
    accelerator.wait_for_everyone()
    opt.step()
    opt.zero_grad()
    accelerator.wait_for_everyone()
    step += 1
    if step % 1000 == 0:
        accelerator.wait_for_everyone()
        accelerator.save_state("ckpt")
"""


def test_a_barrier_every_step_is_reported_and_one_before_a_periodic_save_is_not() -> None:
    assert findings(ACCELERATE, "TP205") == [("TP205", 16), ("TP205", 19)]


# torchtune's GRPO recipe: dist.barrier() on both sides of the optimizer step.
DIST = """
import torch
import torch.distributed as dist

model = Policy().to("cuda")
optimizer = torch.optim.AdamW(model.parameters())
for batch in loader:
    loss = model(batch.to("cuda")).mean()
    loss.backward()
    dist.barrier()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    torch.distributed.barrier()
"""


def test_dist_barrier_every_step_is_reported() -> None:
    assert findings(DIST, "TP205") == [("TP205", 10), ("TP205", 13)]


# Lightning Fabric's barrier; a barrier once, when a resumed run has skipped the batches it had
# already seen (TinyLlama's pretraining loop), runs once and is left alone.
FABRIC = """
import torch
import lightning as L

fabric = L.Fabric(accelerator="cuda")
model = GPT(config)
optimizer = torch.optim.AdamW(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
resume = True
for i, batch in enumerate(loader):
    if resume:
        if i < start:
            continue
        else:
            resume = False
            fabric.barrier()
    loss = model(batch).mean()
    fabric.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    {every_step}
"""


def test_a_barrier_after_a_resumed_runs_skip_runs_once() -> None:
    assert findings(FABRIC.format(every_step="pass"), "TP205") == []


def test_fabrics_barrier_every_step_is_reported() -> None:
    assert findings(FABRIC.format(every_step="fabric.barrier()"), "TP205") == [("TP205", 21)]


# torchtitan: a helper that waits, called on the first step after a resume only.
FIRST_STEP = """
import torch
import torch.distributed as dist

model = Transformer().to("cuda")
optimizer = torch.optim.AdamW(model.parameters())
step = loaded_step
while step < total:
    step += 1
    loss = model(next(batches)).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if step - loaded_step == 1:
        torch.distributed.barrier()
        torch.cuda.synchronize()
"""


def test_a_wait_on_the_first_step_after_a_resume_runs_once() -> None:
    assert findings(FIRST_STEP, "TP205") == []
    every = FIRST_STEP.replace("if step - loaded_step == 1:", "if step - loaded_step >= 1:")
    # the second of two waits in a row adds nothing (below)
    assert findings(every, "TP205") == [("TP205", 15)]


# PixArt's train scripts and detectron2's comm.py: ``synchronize()`` returns on one process and
# is ``dist.barrier()`` otherwise; called in the loop, every step waits for every rank.
COMM = """
import torch.distributed as dist


def get_world_size():
    if not dist.is_available() or not dist.is_initialized():
        return 1
    return dist.get_world_size()


def synchronize():
    \"\"\"Barrier among all processes.\"\"\"
    if not dist.is_available():
        return
    if not dist.is_initialized():
        return
    world_size = dist.get_world_size()
    if world_size == 1:
        return
    dist.barrier()


def save_and_wait(model, path):
    torch.save(model.state_dict(), path)
    dist.barrier()
"""

TRAIN = """
import torch
from utils.comm import synchronize, save_and_wait

model = DiT().cuda()
optimizer = torch.optim.AdamW(model.parameters())
synchronize()
for step, batch in enumerate(loader):
    loss = model(batch.cuda()).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    synchronize()
    if step % 5000 == 0:
        save_and_wait(model, "ckpt.pt")
        synchronize()
"""


def _places(root: Path, found: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(Path(f["path"]).relative_to(root).as_posix(), f["line"]) for f in found]


def test_a_helper_that_only_waits_is_reported_at_the_loops_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {"utils/__init__.py": "", "utils/comm.py": COMM, "train.py": TRAIN}
    found = project_findings(tmp_path, files, "TP205", capsys)
    assert _places(tmp_path, found) == [("train.py", 13)]


def test_a_helper_that_does_more_than_wait_is_not_a_wait_helper(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    every_step = TRAIN.replace(
        "    synchronize()\n    if step", "    save_and_wait(model, 'x')\n    if step"
    )
    files = {"utils/__init__.py": "", "utils/comm.py": COMM, "train.py": every_step}
    found = project_findings(tmp_path, files, "TP205", capsys)
    # the save and its barrier run every step: the barrier is reported where it stands
    assert _places(tmp_path, found) == [("utils/comm.py", 25)]


# lucidrains' audio trainers and PixArt's scripts: a wait after the host has already waited since
# the step's last work (a value read, or another barrier) adds an empty round trip; the first
# wait after backward or the optimizer step is the one that stalls.
AFTER_A_READ = """
import torch
import torch.distributed as dist

model = Policy().to("cuda")
optimizer = torch.optim.AdamW(model.parameters())
for step, batch in enumerate(loader):
    loss = model(batch.to("cuda")).mean()
    logs = {"loss": loss.item()}
    loss.backward()
    dist.barrier()
    optimizer.step()
    optimizer.zero_grad()
    dist.barrier()
    if step % 1000 == 0:
        save(model)
    dist.barrier()
    logs = {"lr": scheduler.get_last_lr()[0], "loss": loss.item()}
    if step % 10 == 0:
        print(logs)
    dist.barrier()
"""


def test_only_the_first_wait_after_the_steps_work_is_reported() -> None:
    # 11: after backward (the read at 9 came before it); 14: after the optimizer step;
    # 17: nothing queued since 14's barrier; 21: after 18's read
    assert findings(AFTER_A_READ, "TP205") == [("TP205", 11), ("TP205", 14)]


def test_a_read_under_a_test_does_not_stand_for_a_wait() -> None:
    gated = AFTER_A_READ.replace(
        '    logs = {"lr": scheduler.get_last_lr()[0], "loss": loss.item()}\n', ""
    ).replace("        save(model)\n", "        save(model)\n        print(loss.item())\n")
    assert findings(gated, "TP205") == [("TP205", 11), ("TP205", 14)]
    reordered = AFTER_A_READ.replace(
        "    optimizer.zero_grad()\n    dist.barrier()\n",
        "    dist.barrier()\n    optimizer.zero_grad()\n",
    )
    # zero_grad() (to None) queues nothing: 17 follows 13's barrier with no work between
    assert findings(reordered, "TP205") == [("TP205", 11), ("TP205", 13)]


GUARDED = """
import torch
import torch.distributed as dist


def barrier():
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def barrier_and_log():
    if dist.is_initialized():
        dist.barrier()
    else:
        print("single process")


model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for batch in loader:
    model(batch.cuda()).mean().backward()
    optimizer.step()
    barrier()
    model(batch.cuda()).mean().backward()
    optimizer.step()
    barrier_and_log()
"""


def test_a_helper_whose_wait_is_under_a_test_only_waits() -> None:
    # 23: the call of the guarded helper; 13: the wait inside the helper that also prints,
    # reported where it stands
    assert findings(GUARDED, "TP205") == [("TP205", 13), ("TP205", 23)]


def test_a_timer_that_waits_is_reported_where_it_waits() -> None:
    # dlrm's ``time_wrap``: synchronise, then return the clock; a timer, not a barrier helper
    timer = GUARDED.replace(
        "def barrier():\n    if dist.is_available() and dist.is_initialized():\n"
        "        dist.barrier()\n",
        "def barrier():\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
        "    return time.time()\n",
    )
    assert findings(timer, "TP205") == [("TP205", 8), ("TP205", 14)]


# Real-Time-Voice-Cloning's encoder: ``sync(device)`` guards ``torch.cuda.synchronize(device)``
# with ``device.type == "cuda"``; handed the loss device, bound only to the CPU, it waits for
# nothing.
PROFILED = """
import torch


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
loss_device = torch.device("cpu")
model = SpeakerEncoder(device, loss_device)
optimizer = torch.optim.Adam(model.parameters())
for step, batch in enumerate(loader):
    embeds = model(batch.to(device))
    sync(device)
    loss = model.loss(embeds.to(loss_device))
    sync(loss_device)
    loss.backward()
    optimizer.step()
"""


def test_a_wait_helper_handed_a_cpu_device_waits_for_nothing() -> None:
    assert findings(PROFILED, "TP205") == [("TP205", 16)]
