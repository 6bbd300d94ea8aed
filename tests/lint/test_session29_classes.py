"""Classes of false findings and misses from the recorded verdicts (issue 32), session 29: each
cut from the code it was seen in, and checked the other way round."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lint_findings import findings, notebook_findings, write_project

from torchpace.cli import main

# PyTorch Step-by-Step, chapter 8: two cells define the same in-memory dataset class (its
# __getitem__ only indexes a list of tensors) and bind train_var_data to it; a small-batch loader
# over it has nothing for a worker to do (judged false twice at change-39).
DATASET = """
import torch
from torch.utils.data import DataLoader, Dataset

class CustomDataset(Dataset):
    def __init__(self, x, y):
        self.x = [torch.as_tensor(s).float() for s in x]
        self.y = torch.as_tensor(y).float().view(-1, 1)

    def __getitem__(self, index):
        {item}

    def __len__(self):
        return len(self.x)

train_var_data = CustomDataset(var_points, var_directions)
"""
LOADER = "train_var_loader = DataLoader(train_var_data, batch_size=16, shuffle=True)"
TRAIN = """
model = Net().to("cuda")
optimizer = torch.optim.Adam(model.parameters())
for x, y in train_var_loader:
    loss = loss_fn(model(x.to("cuda")), y.to("cuda"))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


def test_a_dataset_bound_again_in_a_later_cell_is_read_at_every_binding() -> None:
    indexes = "return (self.x[index], self.y[index])"
    reads = "return (torch.load(self.x[index]), self.y[index])"
    cells = [DATASET.format(item=indexes), LOADER, DATASET.format(item=indexes), LOADER, TRAIN]
    assert notebook_findings(cells, "TP101") == []
    # one binding's items read files: workers would take that off the step
    cells[2] = DATASET.format(item=reads)
    assert notebook_findings(cells, "TP101") == [("TP101", 2, 1), ("TP101", 4, 1)]


# The UvA deep-learning notebooks (change-42): a Lightning Trainer put on the GPU where there is
# one, `accelerator="gpu" if str(device).startswith("cuda") else "cpu"`, fitted on a loader the
# notebook builds: every epoch restarts its workers, and the fit runs in float32 (judges listed
# both, in eight notebooks).
LIGHTNING = """
import torch
import torch.utils.data as data
import pytorch_lightning as pl

device = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
train_loader = data.DataLoader(train_set, batch_size=128, shuffle=True, num_workers=4)

class ViT(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(12)])

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

def train_model(**kwargs):
    trainer = pl.Trainer(accelerator={accelerator}, devices=1, max_epochs={epochs})
    model = ViT(**kwargs)
    trainer.fit(model, train_loader, val_loader)
    return model
"""


def test_a_lightning_trainer_on_the_gpu_where_there_is_one_fits_its_loader_every_epoch() -> None:
    def found(accelerator: str, epochs: int = 180) -> list[tuple[str, int]]:
        source = LIGHTNING.format(accelerator=accelerator, epochs=epochs)
        return [f for f in findings(source) if f[0] in ("TP104", "TP302")]

    where = '"gpu" if str(device).startswith("cuda") else "cpu"'
    assert found(where) == [("TP104", 7), ("TP302", 19)]
    assert found('"gpu" if torch.cuda.is_available() else "cpu"') == [("TP104", 7), ("TP302", 19)]
    assert found('"gpu"') == [("TP104", 7), ("TP302", 19)]
    # an option a run may leave off puts nothing on the GPU; the loader is still re-iterated
    assert found('"gpu" if args.use_gpu else "cpu"') == [("TP104", 7)]
    # one epoch: the workers start once
    assert found(where, epochs=1) == [("TP302", 19)]


# RepVGG's and Swin's main.py: an accumulating branch and an `else:` that steps after every
# backward (ACCUMULATION_STEPS defaults to 0). Only the accumulating branch's all-reduces are
# wasted; the other branch's backward was reported too (judged false twice at change-42).
DDP_ACCUMULATION = """
import torch
from torch.nn.parallel import DistributedDataParallel

model = DistributedDataParallel(Net().cuda(), device_ids=[rank])
for idx, (x, y) in enumerate(loader):
    loss = criterion(model(x.cuda()), y.cuda())
    if ACCUMULATION_STEPS > 1:
        loss = loss / ACCUMULATION_STEPS
        loss.backward()
        if (idx + 1) % ACCUMULATION_STEPS == 0:
            optimizer.step()
            optimizer.zero_grad()
    else:
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_ddp_accumulation_reports_only_the_branch_that_accumulates() -> None:
    assert findings(DDP_ACCUMULATION, "TP502") == [("TP502", 10)]
    every_pass = DDP_ACCUMULATION.replace(
        "        loss.backward()\n        optimizer.step()\n", "        loss.backward()\n"
    )
    assert findings(every_pass, "TP502") == [("TP502", 10), ("TP502", 16)]


# The UvA notebooks' tutorial 2a: train_exact and train_vae each build their own `batcher`; the
# only call of train_exact passes num_epochs=1, so its workers start once a run (judged false at
# change-42), while train_vae's epochs restart theirs (judged true). Each loop iterates its own
# function's loader, not every loader of that name.
TWO_TRAINERS = """
import torch
from torch.utils.data import DataLoader

def train_exact(model, optimiser, training_data, num_epochs=10, num_workers=2):
    batcher = DataLoader(training_data, 64, shuffle=True, num_workers=num_workers)
    for epoch in range(num_epochs):
        for x, y in batcher:
            loss = model(x.to("cuda")).mean()
            loss.backward()
            optimiser.step()

def train_vae(model, optimiser, training_data, num_epochs=10, num_workers=2):
    batcher = DataLoader(training_data, 64, shuffle=True, num_workers=num_workers)
    for epoch in range(num_epochs):
        for x, y in batcher:
            loss = model(x.to("cuda")).mean()
            loss.backward()
            optimiser.step()

log = train_exact(model=mixture, optimiser=opt, training_data=train_ds, num_epochs={epochs})
log = train_vae(model=vae, optimiser=opt2, training_data=train_ds, num_epochs=5)
"""


def test_a_loop_iterates_its_own_functions_loader_run_once_when_every_call_says_so() -> None:
    def tp104(epochs: str, star: str = "") -> list[tuple[str, int | None, int]]:
        source = TWO_TRAINERS.format(epochs=epochs)
        defs, calls = source.split("\nlog = ", 1)
        calls = calls.replace(")\n", star + ")\n", 1)
        return notebook_findings([defs, "log = " + calls], "TP104")

    assert tp104("1") == [("TP104", 1, 14)]
    assert tp104("3") == [("TP104", 1, 6), ("TP104", 1, 14)]
    # a call whose **config may pass another count, or a script another file may import
    assert tp104("1", ", **config") == [("TP104", 1, 6), ("TP104", 1, 14)]
    assert findings(TWO_TRAINERS.format(epochs=1), "TP104") == [("TP104", 6), ("TP104", 14)]


# The UvA steerable-CNN notebooks (change-42): a loop that checks equivariance, asserting that
# the output of each rotated input matches the rotated output, is a test of the model, not an
# evaluation pass (TP403, 6 judged false); and a conventional model built straight into eval
# mode to compare against is never trained (TP401, 4 judged false).
CHECK = """
import torch

model = Net().to("cuda")
model.eval()
x = torch.randn(1, 1, 17, 17, device="cuda")
y = model(x)
for g in group_elements:
    y_rotated = model(rotate(x, g))
    {check}
"""
CONVENTIONAL = """
import torch

conventional_model = torch.nn.Sequential(
    torch.nn.Conv2d(1, 24, kernel_size=7),
    torch.nn.BatchNorm2d(24),
    torch.nn.ELU(),
){mode}
"""


def test_an_equivariance_check_is_no_evaluation_and_an_eval_built_model_no_training() -> None:
    assert findings(CHECK.format(check="errors.append((y_rotated - y).abs().max())"), "TP403") == [
        ("TP403", 8)
    ]
    assert (
        findings(CHECK.format(check="assert torch.allclose(y_rotated, rotate(y, g))"), "TP403")
        == []
    )
    assert findings(CHECK.format(check="torch.testing.assert_close(y_rotated, y)"), "TP403") == []
    assert findings(CONVENTIONAL.format(mode=".eval()"), "TP401") == []
    assert findings(CONVENTIONAL.format(mode=""), "TP401") == [("TP401", 5)]


# VoiceFilter (change-42): the script builds its training loader with a factory of another file
# and hands it to train() of a third, whose `while True: for ... in trainloader:` starts the
# workers again on every pass; the factory's file is where persistent_workers goes (judged true,
# a listed miss). A function that iterates it once, and the evaluation loader with no workers,
# stay silent.
VF_FACTORY = """
from torch.utils.data import DataLoader

def create_dataloader(hp, args, train):
    if train:
        return DataLoader(dataset=VFDataset(hp, args, True), batch_size=hp.train.batch_size,
                          shuffle=True, num_workers=hp.train.num_workers, pin_memory=True)
    else:
        return DataLoader(dataset=VFDataset(hp, args, False), batch_size=1, num_workers=0)
"""
VF_TRAIN = """
import torch

def train(args, trainloader, testloader, hp):
    model = VoiceFilter(hp).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    {loop}
        for mels, target in trainloader:
            loss = criterion(model(mels.cuda()), target.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""
VF_SCRIPT = """
from datasets.dataloader import create_dataloader
from utils.train import train

trainloader = create_dataloader(hp, args, train=True)
testloader = create_dataloader(hp, args, train=False)
train(args, trainloader, testloader, hp)
"""


@pytest.mark.parametrize(("loop", "reported"), [("while True:", True), ("if True:", False)])
def test_a_factorys_loader_handed_to_another_files_loop_that_repeats_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loop: str, reported: bool
) -> None:
    write_project(
        tmp_path,
        {
            "datasets/__init__.py": "",
            "datasets/dataloader.py": VF_FACTORY,
            "utils/__init__.py": "",
            "utils/train.py": VF_TRAIN.format(loop=loop),
            "trainer.py": VF_SCRIPT,
        },
    )
    main(["lint", str(tmp_path), "--format", "json"])
    found = json.loads(capsys.readouterr().out)
    tp104 = [(Path(f["path"]).name, f["line"]) for f in found if f["code"] == "TP104"]
    assert tp104 == ([("dataloader.py", 6)] if reported else [])


# EDM2's training loop (change-42): the snapshot under `cur_nimg % snapshot_nimg == 0` asks
# `hasattr(optimizer, "get_ema")`; asking about the optimizer steps nothing, so the gated body
# is a cadence's, not training (its module copy's .cpu() was judged false).
SNAPSHOT = """
import copy
import torch

net = Net().cuda()
optimizer = torch.optim.Adam(net.parameters())
while True:
    if snapshot_nimg is not None and cur_nimg % snapshot_nimg == 0:
        ema_net = {owner}
        data = copy.deepcopy(ema_net).cpu().eval()
        save(data)
    images, labels = next(dataset_iterator)
    loss = loss_fn(net(images.cuda()), labels.cuda())
    loss.backward()
    optimizer.step()
    cur_nimg += batch_size
"""


def test_asking_about_the_optimizer_in_a_gated_snapshot_is_no_training() -> None:
    assert (
        findings(SNAPSHOT.format(owner='net if hasattr(optimizer, "get_ema") else ema'), "TP201")
        == []
    )
    # a call handed the optimizer may step it: the gated body then trains (accumulation)
    assert findings(SNAPSHOT.format(owner="take_ema(net, optimizer)"), "TP201") == [("TP201", 10)]


# The UvA notebooks' activation-function tutorial (change-42): visualize_gradients runs one
# backward per network, reads each weight's .grad to plot it, then zeroes it; no optimizer
# steps. The loop over activation functions that calls it is no training loop (its TP302 and the
# .cpu() feeding the plot were judged false). A helper whose backward its caller steps is.
GRADIENTS = """
import torch
import torch.nn.functional as F

device = torch.device("cuda")

def visualize_gradients(net):
    net.zero_grad()
    loss = F.cross_entropy(net(imgs), labels)
    loss.backward()
    grads = {{n: p.grad.data.view(-1).cpu().numpy() for n, p in net.named_parameters()}}
    {after}
    plot(grads)

for act_fn_name in act_fn_by_name:
    net = BaseNetwork(act_fn=act_fn_by_name[act_fn_name]()).to(device)
    visualize_gradients(net)
"""


def test_gradients_read_and_thrown_away_are_no_training_step() -> None:
    def found(after: str) -> list[tuple[str, int]]:
        return [f for f in findings(GRADIENTS.format(after=after)) if f[0] in ("TP201", "TP302")]

    assert found("net.zero_grad()") == []
    assert found("optimizer.step()") == [("TP201", 11), ("TP302", 15)]


# The same notebook (cells cut from it, fixtures/session29_dead_neurons.json): `train_loader`
# (no workers) is only run through the net under no_grad to count dead neurons, layer by layer;
# train_model builds its own loader (TP101 judged false; train_model's own loader, judged true,
# stays reported).
def test_a_loader_only_read_under_no_grad_feeds_no_training() -> None:
    cells = json.loads(
        (Path(__file__).parent / "fixtures" / "session29_dead_neurons.json").read_text()
    )
    assert notebook_findings(cells, "TP101") == [("TP101", 6, 23)]
    # the same pass with autograd on may train through what it runs: reported as before
    with_grad = [c.replace("with torch.no_grad():", "if True:") for c in cells]
    assert ("TP101", 4, 19) in notebook_findings(with_grad, "TP101")
