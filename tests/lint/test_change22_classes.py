"""Classes the twentieth session found in the change-20 repositories (issue 32), fixed in
general. Each fixture has the shape of the code a judge read, shortened and renamed; each test
fails on the rules before the change (the controls hold on both)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from lint_findings import findings, write_project

from torchpace.cli import main

# YOLOv7's set-up: train.py calls a seeding helper of utils/general.py, which calls one of
# utils/torch_utils.py that sets cuDNN up with one tuple assignment for each case.
SEEDS = """
import torch.backends.cudnn as cudnn
import torch


def init_torch_seeds(seed=0):
    torch.manual_seed(seed)
    if seed == 0:
        cudnn.benchmark, cudnn.deterministic = False, True
    else:
        cudnn.benchmark, cudnn.deterministic = True, False
"""
GENERAL = """
import random

from utils.torch_utils import init_torch_seeds


def init_seeds(seed=0):
    random.seed(seed)
    init_torch_seeds(seed)
"""
YOLO_TRAIN = """
import torch
import torch.nn as nn

from utils.general import init_seeds


def train(rank, epochs, loader):
    CALL
    model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.Conv2d(64, 255, 1))
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(epochs):
        for imgs, targets in loader:
            loss = model(imgs.cuda()).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


@pytest.mark.parametrize(
    ("call", "reported"),
    [
        ("init_seeds(2 + rank)", False),  # two calls deep, across two files: the tuner is on
        ("if rank == 7:\n        init_seeds(rank)", True),  # a choice for one case only
        ("pass", True),  # control: nothing sets cuDNN up
    ],
)
def test_cudnn_set_up_by_a_helper_two_files_away_is_set_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], call: str, reported: bool
) -> None:
    write_project(
        tmp_path,
        {
            "utils/__init__.py": "",
            "utils/torch_utils.py": SEEDS,
            "utils/general.py": GENERAL,
            "train.py": YOLO_TRAIN.replace("CALL", call),
        },
    )
    main(["lint", str(tmp_path / "train.py"), "--select", "TP303", "--format", "json"])
    found = json.loads(capsys.readouterr().out)
    assert bool(found) is reported


def test_cudnn_set_by_a_tuple_assignment_is_set() -> None:
    source = YOLO_TRAIN.replace("from utils.general import init_seeds", "").replace(
        "CALL", "torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = True, False"
    )
    assert findings(source, "TP303") == []
    assert findings(YOLO_TRAIN.replace("CALL", "pass"), "TP303")  # control


# A model library whose one function imports thop's ``profile`` locally: that is not the file's
# own ``profile`` (a benchmark that runs forward and backward), so the function hands the model
# to no training function of the file.
TORCH_UTILS = """
import time

import torch


def profile(x, ops, n=10):
    for m in ops:
        for _ in range(n):
            y = m(x)
            y.sum().backward()


def model_info(model, img_size=640):
    IMPORT
    img = torch.zeros((1, 3, 32, 32))
    flops = profile(model, inputs=(img,))
"""
YOLO_MODEL = """
import torch
import torch.nn as nn

from utils.torch_utils import model_info


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 64, 3)

    def info(self):
        model_info(self, 640)


if __name__ == "__main__":
    model = Model().to(torch.device("cuda"))
"""


@pytest.mark.parametrize(
    ("imported", "reported"), [("from thop import profile", False), ("pass", True)]
)
def test_a_name_a_function_imports_itself_is_not_the_files_function(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], imported: str, reported: bool
) -> None:
    write_project(
        tmp_path,
        {
            "utils/__init__.py": "",
            "utils/torch_utils.py": TORCH_UTILS.replace("IMPORT", imported),
            "models/yolo.py": YOLO_MODEL,
        },
    )
    main(["lint", str(tmp_path / "models" / "yolo.py"), "--select", "TP303", "--format", "json"])
    assert bool(json.loads(capsys.readouterr().out)) is reported


# pretrain-gnns' GIN layer: the self-loop features are made on the host, filled, then moved to
# the edges' device and cast to their dtype, in every forward.
SELF_LOOPS = """
import torch
import torch.nn as nn


class GINConv(nn.Module):
    def __init__(self, emb_dim):
        super().__init__()
        self.mlp = nn.Linear(emb_dim, emb_dim)

    def forward(self, x, edge_index, edge_attr):
        self_loop_attr = torch.zeros(x.size(0), 2)
        self_loop_attr[:, 0] = 4
        self_loop_attr = MOVE
        edge_attr = torch.cat((edge_attr, self_loop_attr), dim=0)
        return self.mlp(x) + edge_attr.sum()
"""


@pytest.mark.parametrize(
    "move",
    [
        "self_loop_attr.to(edge_attr.device).to(edge_attr.dtype)",
        "self_loop_attr.to(edge_attr.device).float()",
        "self_loop_attr.to(edge_attr.device)",  # control: found before too
    ],
)
def test_a_host_tensor_moved_then_cast_in_a_chain_is_found(move: str) -> None:
    assert [c for c, _ in findings(SELF_LOOPS.replace("MOVE", move), "TP207")] == ["TP207"]


# DDIM's runner: train() trains the DataParallel model; sample() loads a checkpoint into another
# one and puts it in evaluation mode to generate images.
RUNNER = """
import torch
import torch.nn as nn


class Diffusion:
    def __init__(self, device):
        self.device = device

    def train(self, loader, epochs):
        model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.Conv2d(64, 3, 3)).to(self.device)
        model = torch.nn.DataParallel(model)
        opt = torch.optim.Adam(model.parameters())
        for epoch in range(epochs):
            for x in loader:
                loss = model(x.to(self.device)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()

    def sample(self, path):
        model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.Conv2d(64, 3, 3)).to(self.device)
        model = torch.nn.DataParallel(model)
        model.load_state_dict(torch.load(path))
        MODE
        with torch.no_grad():
            return_value = model(torch.randn(4, 3, 32, 32, device=self.device))
        RETURN
"""


@pytest.mark.parametrize(
    ("mode", "returned", "lines"),
    [
        ("model.eval()", "pass", [12]),  # sampling only: the training one is reported
        ("pass", "pass", [12, 23]),  # control: not put in evaluation mode
        ("model.eval()", "return model", [12, 23]),  # handed back: the caller may train it
    ],
)
def test_data_parallel_in_a_function_that_only_evaluates_is_left_alone(
    mode: str, returned: str, lines: list[int]
) -> None:
    source = RUNNER.replace("MODE", mode).replace("RETURN", returned)
    assert [line for _, line in findings(source, "TP501")] == lines


# sweetice's DDPG and SAC: the agent's select_action runs the actor and returns a NumPy array
# (through ``.flatten()`` of the host copy, or a name bound to one); SAC updates only when the
# episode ends, on the way out of the acting loop. A test mode that renders every frame is
# bound by drawing.
AGENT = """
import gym
import numpy as np
import torch
import torch.nn as nn

device = "cuda" if torch.cuda.is_available() else "cpu"


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(3, 400)

    def forward(self, x):
        return torch.tanh(self.l1(x))


class Agent:
    def __init__(self):
        self.actor = Actor().to(device)
        self.opt = torch.optim.Adam(self.actor.parameters())

    def select_action(self, state):
        state = torch.FloatTensor(state.reshape(1, -1)).to(device)
        SELECT

    def update(self, batch):
        loss = self.actor(batch).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


env = gym.make("Pendulum-v1")
agent = Agent()
for i in range(100):
    state = env.reset()
    for t in range(200):
        action = agent.select_action(state)
        next_state, reward, done, info = env.step(action)
        RENDER
        agent.buffer.append((state, action, reward))
        state = next_state
        if done:
            agent.update(agent.buffer)
            break
"""
FLATTEN = "return self.actor(state).cpu().data.numpy().flatten()"
NAMED = "action = self.actor(state).detach().cpu().numpy()\n        return action"
KEPT = "return self.actor(state)"


@pytest.mark.parametrize(
    ("select", "render", "reported"),
    [
        (FLATTEN, "pass", True),
        (NAMED, "pass", True),
        (FLATTEN, "env.render()", False),  # drawing every frame bounds the loop
        (FLATTEN, "if i > 90: env.render()", True),
        (KEPT, "pass", False),  # control: the output is kept for training
    ],
)
def test_an_acting_loop_through_the_agents_method_is_found(
    select: str, render: str, reported: bool
) -> None:
    source = AGENT.replace("SELECT", select).replace("RENDER", render)
    assert bool(findings(source, "TP403")) is reported


def test_an_acting_loop_that_updates_every_step_is_not_one() -> None:
    source = AGENT.replace("SELECT", FLATTEN).replace("RENDER", "agent.update(agent.buffer)")
    assert findings(source, "TP403") == []


# StarGANv2-VC's losses.py: the trainer's step calls compute_d_loss with the batch; the
# adversarial classifier loss selects the rows whose labels differ, a boolean mask.
LOSSES = """
import torch.nn.functional as F


def compute_d_loss(nets, x_real, y_org, y_trg):
    out_de = nets.discriminator.classifier(x_real)
    loss = F.cross_entropy(out_de[y_org != y_trg], y_org[y_org != y_trg])
    return loss
"""
TRAINER = """
import torch

from losses import compute_d_loss


def train(nets, loader, opt):
    for x_real, y_org, y_trg in loader:
        x_real, y_org, y_trg = x_real.cuda(), y_org.cuda(), y_trg.cuda()
        loss = CALL
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


@pytest.mark.parametrize(
    ("call", "reported"),
    [
        ("compute_d_loss(nets, x_real, y_org, y_trg)", True),
        ("x_real.sum()", False),  # control: nothing calls the loss, which runs at no step
    ],
)
def test_a_mask_of_what_the_step_hands_a_function_in_another_file_is_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], call: str, reported: bool
) -> None:
    write_project(tmp_path, {"losses.py": LOSSES, "trainer.py": TRAINER.replace("CALL", call)})
    main(["lint", str(tmp_path), "--select", "TP203", "--format", "json"])
    found = {(Path(f["path"]).name, f["line"]) for f in json.loads(capsys.readouterr().out)}
    assert found == ({("losses.py", 7)} if reported else set())


# FastSpeech 2's loss module: it selects the frames of what its forward is handed with
# masked_select, a method only tensors have.
MASKED = """
import torch
import torch.nn as nn
from acoustic import FastSpeech2


class Loss(nn.Module):
    def forward(self, inputs, predictions):
        mel_targets = inputs[0]
        mel_predictions, mel_masks = predictions
        mel_masks = ~mel_masks
        mel_predictions = mel_predictions.SELECT(mel_masks.unsqueeze(-1))
        return (mel_predictions - mel_targets).abs().mean()


loss_fn = Loss()
model = FastSpeech2().cuda()
opt = torch.optim.Adam(model.parameters())
for batch in loader:
    loss = loss_fn(batch, model(batch[1].cuda()))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(("method", "reported"), [("masked_select", True), ("nonzero", False)])
def test_masked_select_of_an_unknown_value_is_a_tensors(method: str, reported: bool) -> None:
    # nonzero: a NumPy array has it too, so an unknown value's stays unreported
    assert bool(findings(MASKED.replace("SELECT", method), "TP203")) is reported


# YOLOv7's utils/loss.py keeps loss classes no script builds (RankSort, used only by aLRPLoss,
# which nothing names): their findings are left out of a directory's lint, with a note.
LOSS = """
import torch
import torch.nn as nn


class RankSort(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits):
        return logits + torch.zeros(logits.shape[0]).cuda()


class aLRPLoss(nn.Module):
    def forward(self, logits):
        ranks = RankSort.apply(logits)
        return (ranks + torch.ones(logits.shape[0]).cuda()).sum()


class ComputeLoss(nn.Module):
    def forward(self, p):
        return (p + torch.ones(p.shape[0]).cuda()).sum()
"""
LOSS_TRAIN = """
import torch

from loss import ComputeLoss


def train(model, loader, opt):
    compute_loss = ComputeLoss()
    for imgs in loader:
        loss = compute_loss(model(imgs.cuda()))
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def _loss_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> list[int]:
    main(["lint", *args, "--select", "TP207", "--format", "json"])
    found = json.loads(capsys.readouterr().out)
    return sorted(f["line"] for f in found if Path(f["path"]).name == "loss.py")


@pytest.mark.parametrize(
    ("extra", "lines"),
    [
        ({}, [20]),  # RankSort and aLRPLoss are named by nothing that runs
        ({"setup.py": "from setuptools import setup\nsetup(name='det')\n"}, [9, 15, 20]),
        ({"cfg/loss.yaml": "loss: aLRPLoss\n"}, [9, 15, 20]),  # a config builds it
        ({"README.md": "Use `aLRPLoss` for ranking.\n"}, [9, 15, 20]),
    ],
)
def test_findings_in_definitions_nothing_names_are_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: dict[str, str], lines: list[int]
) -> None:
    write_project(tmp_path, {"loss.py": LOSS, "train.py": LOSS_TRAIN, **extra})
    assert _loss_lines(tmp_path, capsys, str(tmp_path)) == lines


def test_unreferenced_definitions_are_read_of_a_directory_only_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_project(tmp_path, {"loss.py": LOSS, "train.py": LOSS_TRAIN})
    # a file named alone shows too little of its project to say what nothing names
    assert _loss_lines(tmp_path, capsys, str(tmp_path / "loss.py")) == [9, 15, 20]
    assert _loss_lines(tmp_path, capsys, str(tmp_path), "--include-unreferenced") == [9, 15, 20]
    main(["lint", str(tmp_path), "--select", "TP207"])
    err = capsys.readouterr().err
    assert "2 findings left out in definitions that nothing in the project names" in err
    assert "RankSort" in err and "aLRPLoss" in err and "--include-unreferenced" in err


def test_a_decorated_definition_is_never_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registered = LOSS.replace("class aLRPLoss", "@register\nclass aLRPLoss")
    write_project(tmp_path, {"loss.py": registered, "train.py": LOSS_TRAIN})
    assert _loss_lines(tmp_path, capsys, str(tmp_path)) == [9, 16, 21]


# change-21: score-SDE's AttnBlockpp (DDPM's attention over a feature map): the scores are an
# einsum over the channel axis that keeps both maps' two spatial axes, reshaped around softmax.
SPATIAL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class AttnBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.q = nn.Conv2d(channels, channels, 1)
        self.k = nn.Conv2d(channels, channels, 1)
        self.v = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        B, C, H, W = x.shape
        q, k, v = self.q(x), self.k(x), self.v(x)
        w = torch.einsum(SCORES, q, k) * (int(C) ** (-0.5))
        w = torch.reshape(w, (B, H, W, H * W))
        w = F.softmax(w, dim=-1)
        w = torch.reshape(w, (B, H, W, H, W))
        h = torch.einsum("bhwij,bcij->bchw", w, v)
        return x + h
"""


@pytest.mark.parametrize(
    ("scores", "reported"),
    [
        ('"bchw,bcij->bhwij"', True),
        ('"...chw,...cij->...hwij"', True),
        ('"bchw,bchw->bhw"', False),  # control: an elementwise product summed, not scores
    ],
)
def test_attention_over_a_feature_maps_two_axes_is_found(scores: str, reported: bool) -> None:
    assert bool(findings(SPATIAL.replace("SCORES", scores), "TP307")) is reported


# change-21: EfficientDet's create_loader pins only when asked (pin_mem=False), and train.py's
# --pin-mem is a store_true option: its four workers' batches are staged by default.
CREATE_LOADER = """
import torch


def create_loader(dataset, batch_size, num_workers=4, pin_mem=PIN):
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers, pin_memory=pin_mem
    )
    return loader


def train(model, dataset, opt):
    loader = create_loader(dataset, 32)
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


@pytest.mark.parametrize(("pin", "reported"), [("False", True), ("True", False)])
def test_pin_memory_from_a_parameter_that_defaults_to_false_is_not_pinned(
    pin: str, reported: bool
) -> None:
    assert bool(findings(CREATE_LOADER.replace("PIN", pin), "TP102")) is reported


# change-21: Real-Time-Voice-Cloning's Tacotron reads its reduction factor through a property
# whose getter reads a CUDA buffer to the host; the forward reads it at every decoder step.
PROPERTY = """
import torch
import torch.nn as nn


class Tacotron(nn.Module):
    def __init__(self):
        super().__init__()
        self.decoder = nn.GRUCell(80, 80)
        self.register_buffer("r_buffer", torch.tensor(2))

    DECORATOR
    def r(self):
        return self.r_buffer.item()

    def forward(self, x, steps):
        outputs = []
        for t in range(0, steps, 2):
            outputs.extend([self.decoder(x)] * self.r)
        return torch.stack(outputs)


model = Tacotron().cuda()
opt = torch.optim.Adam(model.parameters())
for x in loader:
    loss = model(x.cuda(), 400).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(("decorator", "reported"), [("@property", True), ("@staticmethod", False)])
def test_a_property_read_in_the_step_runs_its_getter(decorator: str, reported: bool) -> None:
    source = PROPERTY.replace("DECORATOR", decorator)
    assert bool(findings(source, "TP201")) is reported


# change-20: a textbook chapter fine-tunes DistilBERT in a loop of its own, then again with the
# Transformers Trainer, whose TrainingArguments ask for no 16-bit training: both run in float32.
BERT = """
import torch
from transformers import DistilBertForSequenceClassification, Trainer, TrainingArguments

device = torch.device("cuda")
model = DistilBertForSequenceClassification.from_pretrained("distilbert-base-uncased")
model.to(device)
optim = torch.optim.Adam(model.parameters(), lr=5e-5)
for epoch in range(3):
    for batch in train_loader:
        outputs = model(batch["input_ids"].to(device), labels=batch["labels"].to(device))
        optim.zero_grad()
        outputs["loss"].backward()
        optim.step()

training_args = TrainingArguments(output_dir="./results", num_train_epochs=3ARGS)
trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)
trainer.train()
"""


@pytest.mark.parametrize(
    ("args", "reported"),
    [
        ("", True),  # float32 everywhere
        (", fp16=False", True),
        (", bf16=True", False),  # the trainer runs in bf16: the file manages precision
        (", **extra", False),  # cannot tell
    ],
)
def test_a_float32_loop_beside_a_float32_trainer_is_reported(args: str, reported: bool) -> None:
    assert bool(findings(BERT.replace("ARGS", args), "TP302")) is reported


def _unreferenced_project(root: Path, extra: dict[str, str] | None = None) -> None:
    write_project(root, {"utils/loss.py": LOSS, "train.py": LOSS_TRAIN, **(extra or {})})


def _loss_findings(capsys: pytest.CaptureFixture[str], *args: str) -> list[int]:
    main(["lint", *args, "--select", "TP207", "--format", "json"])
    return sorted(f["line"] for f in json.loads(capsys.readouterr().out))


def test_a_subfolder_of_a_repository_is_read_with_the_files_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _unreferenced_project(tmp_path)
    (tmp_path / ".git").mkdir()
    # ComputeLoss is named by train.py, above the linted folder: kept; the others are not named
    assert _loss_findings(capsys, str(tmp_path / "utils")) == [20]
    # nested paths give the same answer in either order (the outermost project counts)
    assert _loss_findings(capsys, str(tmp_path / "utils"), str(tmp_path)) == [20]
    assert _loss_findings(capsys, str(tmp_path), str(tmp_path / "utils")) == [20]


@pytest.mark.parametrize(
    "extra",
    [
        {"Makefile": "check:\n\tpython -c 'from utils.loss import aLRPLoss'\n"},
        {".tools/run.py": "from utils.loss import aLRPLoss\n"},  # a hidden folder lint walks
        # a notebook over the text limit, for its outputs, still names what it runs
        {
            "run.ipynb": json.dumps(
                {
                    "cells": [
                        {
                            "cell_type": "code",
                            "source": "aLRPLoss()",
                            "outputs": [{"png": "A" * (1 << 21)}],
                        }
                    ]
                }
            )
        },
    ],
)
def test_uses_in_launchers_hidden_folders_and_large_notebooks_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: dict[str, str]
) -> None:
    _unreferenced_project(tmp_path, extra)
    assert _loss_findings(capsys, str(tmp_path)) == [9, 15, 20]


def test_special_files_in_the_project_are_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _unreferenced_project(tmp_path)
    os.mkfifo(tmp_path / "notes.txt")  # reading it would block forever
    (tmp_path / "zero.txt").symlink_to("/dev/zero")  # and this would never end
    assert _loss_findings(capsys, str(tmp_path)) == [20]


def test_a_git_ignored_file_does_not_name_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _unreferenced_project(tmp_path, {".gitignore": "data/\n", "data/labels.txt": "aLRPLoss\n"})
    assert _loss_findings(capsys, str(tmp_path)) == [20]


def test_a_test_case_is_never_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = LOSS.replace(
        "class RankSort(torch.autograd.Function)", "class Checks(unittest.TestCase)"
    )
    write_project(tmp_path, {"utils/loss.py": "import unittest\n" + case, "train.py": LOSS_TRAIN})
    found = _loss_findings(capsys, str(tmp_path))
    assert found == [10, 21]  # the TestCase subclass kept; aLRPLoss, named by nothing, left out


def test_torch_hub_entry_points_are_never_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_project(
        tmp_path, {"hubconf.py": LOSS, "train.py": LOSS_TRAIN.replace("from loss", "from hubconf")}
    )
    main(["lint", str(tmp_path), "--select", "TP207", "--format", "json"])
    found = {
        f["line"] for f in json.loads(capsys.readouterr().out) if f["path"].endswith("hubconf.py")
    }
    assert {9, 15} <= found  # named by torch.hub's users, not by the project
