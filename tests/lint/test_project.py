"""Project-level analysis: helpers in another linted file that the training loop calls per step.

DINO's `utils.clip_gradients` (a `.item()` and a tensor branch per parameter per step) and MAE's
`misc.all_reduce_mean` were invisible file by file (issue 16, benchmarks/realworld/).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchpace.cli import main
from torchpace.lint import RULES, FileResult
from torchpace.lint.engine import lint_file
from torchpace.lint.project import step_callees

TRAIN = """\
import torch
import utils
from pkg.helpers import log_norm

model = Net().cuda()
for x, y in loader:
    loss = model(x).sum()
    loss.backward()
    utils.clip_gradients(model, 3.0)
    log_norm(model)
    optimizer.step()
"""
UTILS = """\
def clip_gradients(model, clip):
    norms = []
    for name, p in model.named_parameters():
        param_norm = p.grad.data.norm(2)
        norms.append(param_norm.item())
        if clip / (param_norm + 1e-6) < 1:
            p.grad.data.mul_(0.5)
    return norms


def unused(model):
    return [p.item() for p in model.parameters()]
"""
HELPERS = """\
import torch


def log_norm(model):
    total = torch.stack([p.grad.norm() for p in model.parameters()]).sum()
    print(float(total))
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "helpers.py").write_text(HELPERS)
    return tmp_path


def _found(capsys: pytest.CaptureFixture[str], *paths: str) -> set[tuple[str, int, str]]:
    main(["lint", "--format", "json", *paths])
    return {(f["path"], f["line"], f["code"]) for f in json.loads(capsys.readouterr().out)}


def _project(root: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    """Write ``files`` (relative path → text; each folder gets an ``__init__.py``) under
    ``root``, and lint from there."""
    monkeypatch.chdir(root)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent != root:
            (path.parent / "__init__.py").touch()
        path.write_text(text)


def test_helpers_called_per_step_are_hot(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = [lint_file(p, RULES) for p in ("train.py", "utils.py", "pkg/helpers.py")]
    assert step_callees([r for r in results if isinstance(r, FileResult)]) == {
        "utils.py": frozenset({"clip_gradients"}),
        "pkg/helpers.py": frozenset({"log_norm"}),
    }
    found = _found(capsys, ".")
    assert {("utils.py", 5, "TP201"), ("utils.py", 6, "TP204")} <= found
    assert ("pkg/helpers.py", 6, "TP201") in found
    assert not any(path == "utils.py" and line == 12 for path, line, _ in found)  # not called


def test_a_helper_linted_without_its_caller_is_quiet(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _found(capsys, "utils.py") == set()
    # A caller on the CPU alone: its helpers' reads wait for no device either.
    (project / "train.py").write_text(TRAIN.replace("Net().cuda()", "Net()"))
    assert _found(capsys, ".") == set()


MODELS = """\
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(64) for _ in range(4)])


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 10)
"""
GAN = """\
import torch
from models import *

G = Generator().cuda()
H = Head().cuda()
for x in loader:
    G(x).mean().backward()
    opt.step()
"""


@pytest.mark.parametrize(
    "imports, build",
    [
        ("from models import *", "Generator()"),  # PyTorch-GAN
        ("from models import Generator as Gen", "Gen()"),
        ("import models", "models.Generator()"),
        ("from nets.models import Generator", "Generator()"),  # a package one level down
        ("import torchvision", "torchvision.models.resnet50()"),  # pytorch/examples imagenet
    ],
)
def test_a_conv_net_from_another_file_needs_the_autotuner(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    imports: str,
    build: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "nets").mkdir()
    (tmp_path / "nets" / "models.py").write_text(MODELS)
    source = GAN.replace("from models import *", imports).replace("Generator()", build)
    (tmp_path / "gan.py").write_text(source)
    assert ("gan.py", 4, "TP303") in _found(capsys, "gan.py")
    (tmp_path / "gan.py").write_text(source + "torch.backends.cudnn.benchmark = True\n")
    assert not any(code == "TP303" for _, _, code in _found(capsys, "gan.py"))


DARKNET = """\
import torch.nn as nn


def create_modules(defs):
    layers = nn.ModuleList()
    for d in defs:
        layers.append(nn.Conv2d(d["in"], d["out"], 3))
    return layers


class Darknet(nn.Module):
    def __init__(self, config_path):
        super().__init__()
        self.module_list = create_modules(parse(config_path))


def load_model(config_path, weights=None):
    model = Darknet(config_path)
    return model


def load_mlp(width):
    return nn.Linear(width, width)
"""

YOLO = """\
import torch
from models import load_model

model = load_model("yolov3.cfg").cuda()
for imgs, targets in loader:
    loss = model(imgs.cuda()).sum()
    loss.backward()
    optimizer.step()
"""


def test_a_conv_net_built_by_a_function_of_another_file_needs_the_autotuner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # eriklindernoren/PyTorch-YOLOv3 (change-4): `model = load_model(args.model)` returns a
    # Darknet, whose convs a module-level function of its file builds in a loop; the pattern
    # was listed (TP303 at train.py's load_model line) and missed
    _project(tmp_path, monkeypatch, {"models.py": DARKNET, "train.py": YOLO})
    assert ("train.py", 4, "TP303") in _found(capsys, "train.py")
    (tmp_path / "train.py").write_text(YOLO.replace('load_model("yolov3.cfg")', "load_mlp(64)"))
    assert not any(code == "TP303" for _, _, code in _found(capsys, "train.py"))


def test_a_model_without_convs_from_another_file_is_not_a_conv_net(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "gan.py").write_text(GAN.replace("G = Generator().cuda()\n", ""))
    assert not any(code == "TP303" for _, _, code in _found(capsys, "gan.py"))


def test_a_device_helper_in_another_file_counts_as_cuda(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "common.py").write_text(
        "import torch\n\n\ndef get_device():\n"
        "    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
    )
    script = (
        "from torch.utils.data import DataLoader\nfrom common import get_device\n"
        "device = get_device()\nloader = DataLoader(ds, num_workers=2)\n"
    )
    (tmp_path / "train.py").write_text(script)
    assert _found(capsys, "train.py") == {("train.py", 4, "TP102")}
    (tmp_path / "train.py").write_text(script.replace("get_device()", "get_other()"))
    assert _found(capsys, "train.py") == set()


def test_a_method_of_an_imported_class_and_a_handed_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # DETR: `metric_logger = utils.MetricLogger()`, `.update(**losses)` per step reads each
    # tensor with .item() in util/misc.py; main.py picks CUDA and hands `device` to the engine.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "misc.py").write_text(
        "import torch\n\n\nclass MetricLogger:\n    def update(self, **kwargs):\n"
        "        for k, v in kwargs.items():\n            if isinstance(v, torch.Tensor):\n"
        "                v = v.item()\n\n    def summary(self):\n        return 1\n"
    )
    (tmp_path / "engine.py").write_text(
        "import torch\nimport misc\n\n\ndef train_one_epoch(model, loader, optimizer, device):\n"
        "    logger = misc.MetricLogger()\n    for x, y in loader:\n"
        "        loss = model(x.to(device)).mean()\n        loss.backward()\n"
        "        optimizer.step()\n        logger.update(loss=loss)\n"
    )
    (tmp_path / "main.py").write_text(
        "import argparse\nimport engine\np = argparse.ArgumentParser()\n"
        "p.add_argument('--device', default='cuda')\nargs = p.parse_args()\n"
        "device = args.device\nfor epoch in range(3):\n"
        "    engine.train_one_epoch(model, loader, optimizer, device)\n"
        "model.eval()\nfor x in val_loader:\n    model(x)\n"
    )
    found = _found(capsys, ".")
    assert ("misc.py", 8, "TP201") in found  # the method the loop calls per step
    assert not any(p == "misc.py" and line == 11 for p, line, _ in found)  # summary(): not
    assert ("engine.py", 7, "TP302") in found  # the engine trains on the device main.py picks
    (tmp_path / "main.py").write_text("import engine\nengine.train_one_epoch(m, l, o, 'cpu')\n")
    assert ("engine.py", 7, "TP302") not in _found(capsys, ".")


# A course package (after dsgiitr/d2l-pytorch): `d2l/__init__.py` re-exports its modules with
# `from .base import *`; `try_gpu` picks the device in one branch and returns a name; the
# chapter notebooks build a conv net and hand it, with that device, to `d2l.train_ch5`.
D2L_BASE = """\
import torch


def try_gpu():
    if torch.cuda.is_available():
        device = torch.device('cuda:0')
    else:
        device = torch.device('cpu')
    return device
"""
D2L_TRAIN = """\
def train_ch5(net, train_iter, num_epochs, device, lr):
    net.to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    for epoch in range(num_epochs):
        for X, y in train_iter:
            X, y = X.to(device), y.to(device)
            loss = criterion(net(X), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""
CHAPTER = """\
import d2l
import torch.nn as nn

net = nn.Sequential(nn.Conv2d(1, 96, kernel_size=11), nn.ReLU(), nn.Conv2d(96, 256, 5))
lr, num_epochs, device = 0.01, 5, d2l.try_gpu()
d2l.train_ch5(net, train_iter, num_epochs, device, lr)
"""


@pytest.fixture
def course(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d2l").mkdir()
    (tmp_path / "d2l" / "__init__.py").write_text("from .base import *\nfrom .train import *\n")
    (tmp_path / "d2l" / "base.py").write_text(D2L_BASE)
    (tmp_path / "d2l" / "train.py").write_text(D2L_TRAIN)
    (tmp_path / "ch09").mkdir()
    (tmp_path / "ch09" / "alexnet.py").write_text("import sys\nsys.path.insert(0, '..')\n")
    return tmp_path


def test_a_conv_net_handed_to_a_course_trainer_needs_the_autotuner(
    course: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (course / "chapter.py").write_text(CHAPTER)
    assert ("chapter.py", 4, "TP303") in _found(capsys, "chapter.py")
    # The device is the course's own helper's CUDA device, read through the package's re-export
    # and the tuple assignment; a device it does not give is not read as CUDA.
    (course / "chapter.py").write_text(CHAPTER.replace("d2l.try_gpu()", "d2l.pick()"))
    assert not any(code == "TP303" for _, _, code in _found(capsys, "chapter.py"))


def test_a_course_trainer_that_sets_the_autotuner_or_a_small_net_is_quiet(
    course: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tuned = "import torch\ntorch.backends.cudnn.benchmark = True\n" + D2L_TRAIN
    (course / "d2l" / "train.py").write_text(tuned)
    (course / "chapter.py").write_text(CHAPTER)
    assert not any(code == "TP303" for _, _, code in _found(capsys, "chapter.py"))
    # LeNet's 6 and 16 channels: a small model (lint.scale), nothing worth autotuning.
    (course / "d2l" / "train.py").write_text(D2L_TRAIN)
    lenet = CHAPTER.replace("nn.Conv2d(1, 96, kernel_size=11)", "nn.Conv2d(1, 6, kernel_size=5)")
    (course / "chapter.py").write_text(
        lenet.replace("nn.Conv2d(96, 256, 5)", "nn.Conv2d(6, 16, 5)")
    )
    assert not any(code == "TP303" for _, _, code in _found(capsys, "chapter.py"))
    # A function of the package that trains nothing is not a trainer.
    (course / "chapter.py").write_text(CHAPTER.replace("d2l.train_ch5(", "d2l.show("))
    assert not any(code == "TP303" for _, _, code in _found(capsys, "chapter.py"))


# Cut from jaywalnut310/vits (benchmarks/realworld, set new-change): the training script calls a
# model class of models.py, wrapped in DDP; its forward calls a duration predictor bound in an
# if/else and a helper of commons.py; the predictor's inverse pass (``reverse=True``) only runs
# at inference.
VITS_TRAIN = """\
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from models import SynthesizerTrn

def run(rank, loader):
    net_g = SynthesizerTrn(192).cuda(rank)
    net_g = DDP(net_g, device_ids=[rank])
    optim_g = torch.optim.AdamW(net_g.parameters(), 2e-4)
    for x, y in loader:
        x, y = x.cuda(rank, non_blocking=True), y.cuda(rank, non_blocking=True)
        loss = net_g(x, y).mean()
        optim_g.zero_grad()
        loss.backward()
        optim_g.step()
"""
VITS_MODELS = """\
import torch
from torch import nn
import commons

class StochasticDurationPredictor(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.proj = nn.Conv1d(channels, channels, 1)

    def forward(self, x, w=None, reverse=False):
        if not reverse:
            e_q = torch.randn(w.size(0), 2, w.size(2)).to(device=x.device, dtype=x.dtype)
            return self.proj(x) + e_q.sum()
        else:
            z = torch.randn(x.size(0), 2, x.size(2)).to(device=x.device, dtype=x.dtype)
            return self.proj(x) * z.sum()

class DurationPredictor(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.proj = nn.Conv1d(channels, 1, 1)

    def forward(self, x, w=None):
        return self.proj(x)

class SynthesizerTrn(nn.Module):
    def __init__(self, channels, use_sdp=True):
        super().__init__()
        if use_sdp:
            self.dp = StochasticDurationPredictor(channels)
        else:
            self.dp = DurationPredictor(channels)

    def forward(self, x, y):
        w = self.dp(x, y)
        z_slice = commons.rand_slice_segments(x, 4)
        return w + z_slice

    def infer(self, x):
        return self.dp(x, reverse=True)
"""
VITS_COMMONS = """\
import torch

def rand_slice_segments(x, segment_size=4):
    b, d, t = x.size()
    ids_str = (torch.rand([b]).to(device=x.device) * (t - segment_size)).long()
    return x[:, :, :segment_size] * ids_str.sum()

def unused(x):
    return torch.rand([4]).to(device=x.device)
"""


def test_a_model_class_of_another_file_runs_its_forward_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(VITS_TRAIN)
    (tmp_path / "models.py").write_text(VITS_MODELS)
    (tmp_path / "commons.py").write_text(VITS_COMMONS)
    found = _found(capsys, ".")
    # the forward's predictor (bound in an if/else, through the DDP wrapper)
    assert ("models.py", 12, "TP207") in found
    # the helper that forward calls, two files from the loop, is read as the forward's code is
    # (TP207: its host tensor is moved every step), not as a loop's hot code
    assert ("commons.py", 5, "TP207") in found
    # the inverse pass no training call asks for, and a helper nothing calls
    assert ("models.py", 15, "TP207") not in found
    assert ("commons.py", 9, "TP207") not in found
    # each alone: no loop says which branch training takes, so the model's forward is read
    # whole (a model's forward runs every step), and the helper it calls with it
    alone = {f for f in _found(capsys, "models.py", "commons.py") if f[2] == "TP207"}
    assert alone == {
        ("models.py", 12, "TP207"),
        ("models.py", 15, "TP207"),
        ("commons.py", 5, "TP207"),
    }
    assert {f for f in _found(capsys, "commons.py") if f[2] == "TP207"} == set()


def test_a_flag_a_training_call_passes_keeps_both_branches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(VITS_TRAIN)
    (tmp_path / "models.py").write_text(
        VITS_MODELS.replace("w = self.dp(x, y)", "w = self.dp(x, y, reverse=self.training)")
    )
    (tmp_path / "commons.py").write_text(VITS_COMMONS)
    found = _found(capsys, ".")
    assert {("models.py", 12, "TP207"), ("models.py", 15, "TP207")} <= found


def test_a_notebook_hands_its_device_to_a_project_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # After mrdbourke/pytorch-deep-learning (set new-change): a notebook with no loop of its own
    # picks CUDA and calls going_modular/engine.py's train(), whose loop names no device.
    engine = (
        "import torch\n\n\ndef train(model, dataloader, optimizer, device):\n"
        "    for X, y in dataloader:\n        X, y = X.to(device), y.to(device)\n"
        "        loss = torch.nn.functional.cross_entropy(model(X), y)\n"
        "        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n"
    )
    _project(tmp_path, monkeypatch, {"going_modular/engine.py": engine})
    cells = [
        "import torch\nimport torchvision\nfrom going_modular import engine",
        "device = 'cuda' if torch.cuda.is_available() else 'cpu'",
        "model = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3), torch.nn.Flatten(),\n"
        "                            torch.nn.LazyLinear(10)).to(device)",
        "results = engine.train(model=model, dataloader=train_dataloader,\n"
        "                       optimizer=optimizer, device=device)",
    ]
    notebook = {
        "cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": []} for c in cells],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "transfer.ipynb").write_text(json.dumps(notebook))
    found = _found(capsys, ".")
    assert ("going_modular/engine.py", 5, "TP302") in found
    # the notebook's conv net trains there, on CUDA, without the autotuner
    assert ("transfer.ipynb", 1, "TP303") in found
    # also through an epoch function that calls the file's step function
    (tmp_path / "going_modular" / "engine.py").write_text(
        (tmp_path / "going_modular" / "engine.py")
        .read_text()
        .replace("def train(", "def train_step(")
        + "\n\ndef train(model, dataloader, optimizer, device, epochs=5):\n"
        "    for epoch in range(epochs):\n"
        "        train_step(model, dataloader, optimizer, device)\n"
    )
    assert ("transfer.ipynb", 1, "TP303") in _found(capsys, ".")
    # the same notebook on the CPU hands nothing on
    notebook["cells"][1]["source"] = "device = 'cpu'"
    (tmp_path / "transfer.ipynb").write_text(json.dumps(notebook))
    assert not any(p.startswith("going_modular") for p, _, _ in _found(capsys, "."))


def test_an_option_declared_in_an_imported_project_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # kohya-ss/sd-scripts: every training script calls train_util.add_training_arguments(parser);
    # --persistent_data_loader_workers is a store_true flag declared there.
    train_util = (
        "def add_training_arguments(parser):\n"
        "    parser.add_argument('--persistent_data_loader_workers', action='store_true')\n"
        "    parser.add_argument('--max_data_loader_n_workers', type=int, default=0)\n"
    )
    _project(tmp_path, monkeypatch, {"library/train_util.py": train_util})
    script = (
        "import argparse\nimport torch\nfrom library import train_util\n\n"
        "parser = argparse.ArgumentParser()\ntrain_util.add_training_arguments(parser)\n"
        "args = parser.parse_args()\n"
        "loader = torch.utils.data.DataLoader(ds, num_workers=WORKERS,\n"
        "    persistent_workers=args.persistent_data_loader_workers)\n"
        "for epoch in range(10):\n    for x, y in loader:\n"
        "        model(x.cuda()).sum().backward()\n        opt.step()\n"
    )
    (tmp_path / "train.py").write_text(script.replace("WORKERS", "8"))
    assert ("train.py", 8, "TP104") in _found(capsys, "train.py")
    # workers from the imported option, 0 by default: nothing to keep, and no workers
    (tmp_path / "train.py").write_text(script.replace("WORKERS", "args.max_data_loader_n_workers"))
    found = _found(capsys, "train.py")
    assert ("train.py", 8, "TP104") not in found
    assert ("train.py", 8, "TP101") in found


def test_a_conv_built_by_a_wrapper_of_another_file_before_a_batchnorm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 32: a small model library's conv3x3 and StdConv2d, used by the model file.
    _project(
        tmp_path,
        monkeypatch,
        {
            "layers.py": (
                "from torch import nn\n\n\n"
                "def conv3x3(cin, cout, stride=1, bias=True):\n"
                "    return nn.Conv2d(cin, cout, 3, stride, 1, bias=bias)\n\n\n"
                "class StdConv2d(nn.Conv2d):\n"
                "    def forward(self, x):\n"
                "        return super().forward(x)\n"
            ),
            "model.py": (
                "import torch\nfrom torch import nn\nimport layers\n"
                "from layers import conv3x3\n\n\n"
                "class Block(nn.Module):\n"
                "    def __init__(self, c):\n"
                "        super().__init__()\n"
                "        self.conv1 = conv3x3(c, c)\n"
                "        self.bn1 = nn.BatchNorm2d(c)\n"
                "        self.conv2 = layers.StdConv2d(c, c, 3, padding=1)\n"
                "        self.bn2 = nn.BatchNorm2d(c)\n"
                "        self.conv3 = conv3x3(c, c, bias=False)\n"
                "        self.bn3 = nn.BatchNorm2d(c)\n\n"
                "    def forward(self, x):\n"
                "        x = torch.relu(self.bn1(self.conv1(x)))\n"
                "        x = torch.relu(self.bn2(self.conv2(x)))\n"
                "        return self.bn3(self.conv3(x))\n\n\n"
                "def build(c):\n"  # the library's builder: something names Block
                "    return Block(c)\n"
            ),
        },
    )
    found = {f for f in _found(capsys, ".") if f[2] == "TP401"}
    assert found == {("model.py", 10, "TP401"), ("model.py", 12, "TP401")}


def test_torch_names_a_project_module_brings_in_with_a_star_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 32 (AI-vaccine): `from loader.DataGenerater import *`, whose module does `import
    # torch.utils.data as Data`, makes `Data.DataLoader(...)` a DataLoader in the script.
    _project(
        tmp_path,
        monkeypatch,
        {
            "loader/data.py": (
                "import torch\nimport torch.utils.data as Data\n\n\n"
                "class Pairs(Data.Dataset):\n"
                "    def __getitem__(self, i):\n        return self.x[i], self.y[i]\n"
            ),
            "train.py": (
                "from loader.data import *\n\n"
                "device = torch.device('cuda')\n"
                "loader = Data.DataLoader(Pairs(), 1024, shuffle=True, num_workers=0)\n"
                "for epoch in range(10):\n"
                "    for x, y in loader:\n"
                "        loss = model(x.to(device)).sum()\n"
                "        loss.backward()\n"
                "        optimizer.step()\n"
            ),
        },
    )
    found = _found(capsys, "train.py")
    assert ("train.py", 4, "TP101") in found
    # The script's own binding of a name wins over the star's.
    (tmp_path / "train.py").write_text(
        (tmp_path / "train.py")
        .read_text()
        .replace("from loader.data import *\n", "from loader.data import *\nimport mylib as Data\n")
    )
    assert ("train.py", 5, "TP101") not in _found(capsys, "train.py")


def test_a_helper_of_another_file_builds_a_host_tensor_the_step_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 32 (kohya's FLUX trainers): flux_utils.prepare_img_ids builds the position ids on
    # the host (zeros, item assignments, einops.repeat); the step moves them every time.
    _project(
        tmp_path,
        monkeypatch,
        {
            "flux_utils.py": (
                "import einops\nimport torch\n\n\n"
                "def prepare_img_ids(b, h, w):\n"
                "    ids = torch.zeros(h, w, 3)\n"
                "    ids[..., 1] = ids[..., 1] + torch.arange(h)[:, None]\n"
                "    ids = einops.repeat(ids, 'h w c -> b (h w) c', b=b)\n"
                "    return ids\n\n\n"
                "def on_device(b, h, w, device):\n"
                "    return torch.zeros(b, h * w, 3, device=device)\n"
            ),
            "train.py": (
                "import torch\nimport flux_utils\n\n"
                "device = torch.device('cuda')\n"
                "for x in loader:\n"
                "    ids = flux_utils.prepare_img_ids(8, 32, 32).to(device=device)\n"
                "    same = flux_utils.on_device(8, 32, 32, device).to(device)\n"
                "    loss = model(x.to(device), ids, same).sum()\n"
                "    loss.backward()\n"
                "    optimizer.step()\n"
            ),
        },
    )
    found = {f for f in _found(capsys, "train.py") if f[2] == "TP207"}
    assert found == {("train.py", 6, "TP207")}


def test_a_subclass_in_another_file_overrides_a_method_the_base_trainers_loop_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 32 (kohya): NetworkTrainer.train() calls self.get_noise_pred_and_target(...) every
    # step; FluxNetworkTrainer, in another file, overrides it with a host tensor moved.
    _project(
        tmp_path,
        monkeypatch,
        {
            "train_network.py": (
                "import torch\n\n\n"
                "class NetworkTrainer:\n"
                "    def get_noise_pred_and_target(self, x):\n"
                "        return self.unet(x)\n\n"
                "    def sample(self, x):\n"
                "        return x\n\n"
                "    def train(self, loader, optimizer):\n"
                "        device = torch.device('cuda')\n"
                "        for batch in loader:\n"
                "            loss = self.get_noise_pred_and_target(batch.to(device)).mean()\n"
                "            loss.backward()\n"
                "            optimizer.step()\n"
            ),
            "flux_train_network.py": (
                "import torch\nimport train_network\n\n\n"
                "class FluxNetworkTrainer(train_network.NetworkTrainer):\n"
                "    def get_noise_pred_and_target(self, x):\n"
                "        ids = torch.zeros(x.shape[0], 3).to(device=x.device)\n"
                "        return self.unet(x, ids)\n\n"
                "    def sample(self, x):\n"
                "        return torch.zeros(3).to(device=x.device)\n\n\n"
                "if __name__ == '__main__':\n"  # as kohya's script runs its trainer
                "    FluxNetworkTrainer().train(loader=None, optimizer=None)\n"
            ),
        },
    )
    found = {f for f in _found(capsys, ".") if f[2] == "TP207"}
    assert found == {("flux_train_network.py", 7, "TP207")}  # not sample(): no loop calls it


SUBMODULES = {
    "train.py": """\
import torch
from model import GNN

model = GNN(300).cuda()
for batch in loader:
    batch = batch.to("cuda")
    loss = model(batch).sum()
    loss.backward()
    optimizer.step()
""",
    "model.py": """\
import torch.nn as nn
from conv import Virtualnode


class Encoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.node = Virtualnode(dim)

    def forward(self, batch):
        return self.node(batch)


class GNN(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.encoder = Encoder(dim)

    def forward(self, batch):
        return self.encoder(batch)
""",
    "conv.py": """\
import torch
import torch.nn as nn


class Virtualnode(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.embedding = nn.Embedding(1, dim)

    def forward(self, batch):
        n = batch.batch[-1].item() + 1
        return self.embedding(torch.zeros(n, dtype=torch.long, device=batch.x.device))


def summarise(batch):
    return batch.x.sum().item()
""",
}


def test_the_forward_of_a_submodule_from_another_file_runs_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ogb's graph property trainers (change-3): main_pyg.py trains GNN (gnn.py), whose
    # __init__ builds, through a class of its own file, GNN_node_Virtualnode of conv.py; its
    # forward reads batch[-1].item() on every step, two files from the loop (listed, missed)
    _project(tmp_path, monkeypatch, SUBMODULES)
    found = _found(capsys, ".")
    assert ("conv.py", 11, "TP201") in found
    # a helper function of that file that no forward calls is not hot
    assert not any(path == "conv.py" and line == 16 for path, line, _ in found)


UNET_PARTS = """\
import torch.nn as nn


class DoubleConv(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU())


class Up(nn.Module):
    def __init__(self, c_in, c_out, bilinear=True):
        super().__init__()
        if bilinear:
            self.up = nn.Upsample(scale_factor=2)
        else:
            self.up = nn.ConvTranspose2d(c_in, c_in // 2, 2, stride=2)
        self.conv = DoubleConv(c_in, c_out)
"""
UNET_MODEL = """\
import torch.nn as nn
from .unet_parts import *


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes):
        super().__init__()
        self.inc = DoubleConv(n_channels, 64)
        self.up = Up(128, 64)
"""
UNET_TRAIN = """\
import torch
from unet import UNet
model = UNet(3, 2).cuda()
for images, masks in loader:
    loss = criterion(model(images.cuda()), masks.cuda())
    loss.backward()
    optimizer.step()
"""


def test_a_conv_net_re_exported_by_its_package_needs_the_autotuner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # milesial/Pytorch-UNet: train.py imports UNet from the package, whose __init__.py
    # re-exports it from unet_model.py, built from the blocks unet_parts.py defines
    files = {
        "unet/__init__.py": "from .unet_model import UNet\n",
        "unet/unet_model.py": UNET_MODEL,
        "unet/unet_parts.py": UNET_PARTS,
        "train.py": UNET_TRAIN,
    }
    _project(tmp_path, monkeypatch, files)
    assert ("train.py", 3, "TP303") in _found(capsys, "train.py")


def test_a_convolution_built_only_on_an_option_makes_no_conv_net(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # x-transformers: a 1x1 Conv2d mixes attention heads only when talking_heads is set
    layers = """\
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, heads, talking_heads=False):
        super().__init__()
        self.to_q = nn.Linear(512, 512)
        self.talking_heads = nn.Conv2d(heads, heads, 1) if talking_heads else None


class Decoder(nn.Module):
    def __init__(self, depth, heads):
        super().__init__()
        self.layers = nn.ModuleList([Attention(heads) for _ in range(depth)])
"""
    train = UNET_TRAIN.replace("from unet import UNet", "from xformer import Decoder").replace(
        "UNet(3, 2)", "Decoder(6, 8)"
    )
    files = {"xformer/__init__.py": "from .layers import Decoder\n", "train.py": train}
    _project(tmp_path, monkeypatch, {**files, "xformer/layers.py": layers})
    assert not any(code == "TP303" for _, _, code in _found(capsys, "train.py"))
    # A convolution on both sides of the flag, or on a configuration's layer type, counts
    for always in (
        "nn.Conv2d(heads, heads, 1) if talking_heads else nn.Conv2d(heads, heads, 3)",
        '[nn.Conv2d(heads, heads, 1) for t in kinds if t == "conv"]',
    ):
        (tmp_path / "xformer/layers.py").write_text(
            layers.replace("nn.Conv2d(heads, heads, 1) if talking_heads else None", always)
        )
        assert ("train.py", 3, "TP303") in _found(capsys, "train.py"), always


def test_a_module_is_looked_up_again_in_another_folder_and_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The lookup was cached under the relative folder of a relative path ("train.py"): a
    # first run where `unet` does not exist hid the package from a later run elsewhere.
    empty = tmp_path / "first"
    empty.mkdir()
    _project(empty, monkeypatch, {"train.py": UNET_TRAIN})
    assert not any(code == "TP303" for _, _, code in _found(capsys, "train.py"))
    files = {
        "unet/__init__.py": "from .unet_model import UNet\n",
        "unet/unet_model.py": UNET_MODEL,
        "unet/unet_parts.py": UNET_PARTS,
        "train.py": UNET_TRAIN,
    }
    (tmp_path / "second").mkdir()
    _project(tmp_path / "second", monkeypatch, files)
    assert ("train.py", 3, "TP303") in _found(capsys, "train.py")


def test_conv_classes_read_each_import_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 30 modules that all import each other (torch's own sources look like this): reading the
    # conv classes once read every import three files deep, 30^3 lookups per question
    from torchpace.lint import project

    n = 30
    files = {
        f"pkg/m{i}.py": "".join(f"from .m{j} import *\n" for j in range(n) if j != i)
        + f"import torch.nn as nn\nclass Block{i}(nn.Module):\n    def __init__(self):\n"
        f"        super().__init__()\n        self.b = Block{(i + 1) % n}()\n"
        for i in range(n)
    }
    files["train.py"] = UNET_TRAIN.replace("from unet import UNet", "from pkg.m0 import Block0")
    files["train.py"] = files["train.py"].replace("UNet(3, 2)", "Block0()")
    _project(tmp_path, monkeypatch, files)
    lookups = []
    find = project.find_module
    monkeypatch.setattr(project, "find_module", lambda *a, **k: lookups.append(a) or find(*a, **k))
    assert not any(code == "TP303" for _, _, code in _found(capsys, "train.py"))
    # n^2 import statements, each looked up about twice (its import table, the project
    # analysis); following them three files deep per question made it n^3 and more
    assert len(lookups) <= 3 * n * n
