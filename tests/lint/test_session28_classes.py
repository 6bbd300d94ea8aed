"""Classes of patterns from the recorded recall lists (issue 32), session 28: each cut from the
code it was seen in, and checked the other way round."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lint_findings import findings, write_project

from torchpace.cli import main

# pytorch-ddpm and pytorch-cifar100: TensorBoard's add_scalar handed the CUDA loss (or a gradient
# norm) converts it with .cpu().numpy() on every step, a wait no .item() in the source shows.
LOGGED = """
import torch
import wandb
from torch.utils.tensorboard import SummaryWriter

writer = SummaryWriter()
model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, y) in enumerate(loader):
    loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    {log}
"""


def test_a_tensor_handed_to_a_logger_is_a_read_on_the_host() -> None:
    def tp201(log: str) -> list[tuple[str, int]]:
        return findings(LOGGED.format(log=log), "TP201")

    assert tp201('writer.add_scalar("loss", loss, step)') == [("TP201", 14)]
    assert tp201('writer.add_scalar("loss", scalar_value=loss, global_step=step)') == [
        ("TP201", 14)
    ]
    grad_norm = 'for p in model.parameters():\n        writer.add_histogram("g", p.grad, step)'
    assert tp201(grad_norm) == [("TP201", 15)]
    assert tp201('wandb.log({"loss": loss, "lr": 0.1})') == [("TP201", 14)]
    # read once, where the source reads it; host values and cadences cost nothing
    assert tp201('writer.add_scalar("loss", loss.item(), step)') == [("TP201", 14)]
    assert tp201('writer.add_scalar("lr", 0.1, step)') == []
    assert tp201('wandb.log({"step": step})') == []
    assert tp201('if step % 100 == 0:\n        writer.add_scalar("loss", loss, step)') == []


# sweetice's SAC: update() runs `for _ in range(args.gradient_steps)` (default 1) on every
# environment step, whose action read already waits: one gradient step an environment step is
# the environment loop's. TD3's update(10) runs ten, and stays reported.
SAC = """
import argparse
import gym
import torch
from torch.utils.tensorboard import SummaryWriter

parser = argparse.ArgumentParser()
parser.add_argument("--gradient_steps", default={steps}, type=int)
args = parser.parse_args()
env = gym.make("Pendulum-v0")


class SAC:
    def __init__(self):
        self.net = Net().cuda()
        self.optimizer = torch.optim.Adam(self.net.parameters())
        self.writer = SummaryWriter()

    def select_action(self, state):
        return self.net(torch.FloatTensor(state).cuda()).cpu().numpy()

    def update(self, s):
        for _ in range(args.gradient_steps):
            loss = self.net(s).mean()
            self.losses.append(loss.item())
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()


agent = SAC()
for episode in range(1000):
    state = env.reset()
    for t in range(200):
        action = agent.select_action(state)
        state, reward, done, info = env.step(action)
        agent.update(batch)
"""


def test_one_gradient_step_each_environment_step_is_the_environment_loops() -> None:
    assert findings(SAC.format(steps=1), "TP201") == []
    assert findings(SAC.format(steps=10), "TP201") == [("TP201", 25)]  # the .item()


# change-39, PyTorch Step-by-Step: loaders over a random_split of a TensorDataset, and over the
# TensorDataset a helper returns (features extracted once, token ids): a batch is a slice of
# tensors in memory. A split of an image folder still decodes files.
IN_MEMORY = """
import torch
from torch.utils.data import DataLoader, TensorDataset, random_split
from torchvision.datasets import ImageFolder


def tokenize_dataset(sentences, labels, tokenizer):
    token_ids = tokenizer(sentences, return_tensors="pt")["input_ids"]
    dataset = TensorDataset(token_ids, torch.as_tensor(labels))
    return dataset


dataset = {dataset}
train_data, val_data = random_split(dataset, [80, 20])
train_loader = DataLoader(dataset=train_data, batch_size=16, shuffle=True)
model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for xb, yb in train_loader:
    loss = model(xb.cuda()).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    ("dataset", "reported"),
    [
        ("TensorDataset(torch.as_tensor(x).float(), torch.as_tensor(y).float())", False),
        ("tokenize_dataset(sentences, labels, tokenizer)", False),
        ('ImageFolder("data/train")', True),
    ],
)
def test_a_split_of_tensors_in_memory_or_a_helpers_is_in_memory(
    dataset: str, reported: bool
) -> None:
    found = findings(IN_MEMORY.format(dataset=dataset), "TP101")
    assert found == ([("TP101", 15)] if reported else [])


# change-39, RWKV's trainers: `if config.num_workers > 0:` builds a loader with that count, and
# `else:` one without, for a run that asks for none; the config class's default is 0.
GUARDED = """
import torch
from torch.utils.data import DataLoader


class TrainerConfig:
    num_workers = 0


def train(model, dataset, config):
    optimizer = torch.optim.Adam(model.cuda().parameters())
    {build}
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_loader_built_in_a_branch_on_the_worker_count_is_what_the_code_chose() -> None:
    guarded = (
        "if config.num_workers > 0:\n"
        "        loader = DataLoader(dataset, batch_size=8, num_workers=config.num_workers)\n"
        "    else:\n"
        "        loader = DataLoader(dataset, batch_size=8)"
    )
    assert findings(GUARDED.format(build=guarded), "TP101") == []
    plain = "loader = DataLoader(dataset, batch_size=8, num_workers=config.num_workers)"
    assert findings(GUARDED.format(build=plain), "TP101") == [("TP101", 12)]


# change-39, PyTorch Step-by-Step's StepByStep.lr_range_test: a learning-rate sweep, run once
# before training, is no training run, whatever its function is called beside range_test.
SWEEP = """
import torch


def {name}(model, loader, optimizer, end_lr=10.0, num_iter=100):
    model.cuda()
    losses = []
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
"""


def test_a_learning_rate_range_test_is_a_sweep_not_the_training_run() -> None:
    assert findings(SWEEP.format(name="lr_range_test"), "TP201") == []
    assert findings(SWEEP.format(name="find_lr_rate"), "TP201") == []
    assert findings(SWEEP.format(name="fit"), "TP201") == [("TP201", 13)]


# change-39, RWKV-v1: RWKV_TinyAttn's only use is a commented-out line; it never runs.
ATTN = """
import torch
import torch.nn as nn


class TinyAttn(nn.Module):
    def forward(self, x):
        mask = torch.ones(x.shape[1], x.shape[1]).cuda()
        return x * mask


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        {use}

    def forward(self, x):
        return x + torch.zeros(x.shape[0]).cuda()
"""
ATTN_TRAIN = """
import torch

from model import Block


def train(loader, opt):
    model = Block().cuda()
    for x in loader:
        loss = model(x.cuda()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


@pytest.mark.parametrize(
    ("use", "lines"),
    [
        ("# self.tiny_att = TinyAttn()", [18]),
        ("self.tiny_att = TinyAttn()  # the tiny attention", [8, 18]),
    ],
)
def test_a_name_only_on_a_line_commented_out_is_not_a_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], use: str, lines: list[int]
) -> None:
    write_project(tmp_path, {"model.py": ATTN.format(use=use), "train.py": ATTN_TRAIN})
    main(["lint", str(tmp_path), "--select", "TP207", "--format", "json"])
    found = json.loads(capsys.readouterr().out)
    assert sorted(f["line"] for f in found if Path(f["path"]).name == "model.py") == lines


# change-39, RWKV's and minGPT's trainers (also decision-transformer's copy): the token counter
# adds a device tensor each step (`self.tokens += (y >= 0).sum()`), then the learning-rate
# schedule branches on it and reads it with float(): the batch comes through a progress bar
# bound to a name, `pbar = tqdm(enumerate(loader)) if is_train else enumerate(loader)`.
TOKENS = """
import math
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm


class Trainer:
    def __init__(self, model, train_dataset, config):
        self.model, self.train_dataset, self.config = model, train_dataset, config
        self.tokens = 0
        self.device = "cuda"

    def train(self):
        model, config = self.model.to(self.device), self.config
        optimizer = torch.optim.AdamW(model.parameters())
        for epoch in range(config.max_epochs):
            loader = DataLoader(self.train_dataset, batch_size=config.batch_size, num_workers=4)
            pbar = {pbar}
            for it, (x, y) in pbar:
                x = x.to(self.device)
                y = y.to(self.device)
                _, loss = model(x, y)
                model.zero_grad()
                loss.backward()
                optimizer.step()
                self.tokens += (y >= 0).sum()
                if self.tokens < config.warmup_tokens:
                    lr_mult = 1.0
                else:
                    progress = float(self.tokens - config.warmup_tokens) / config.final_tokens
                    lr_mult = 0.5 * (1.0 + math.cos(math.pi * progress))
                if it >= 0:
                    pass
"""


@pytest.mark.parametrize(
    "pbar",
    [
        "tqdm(enumerate(loader), total=len(loader))",
        "tqdm(enumerate(loader)) if epoch == 0 else enumerate(loader)",
        "enumerate(loader)\n            pbar = tqdm(pbar, total=len(loader))",
    ],
)
def test_a_counter_of_device_tensors_is_read_through_a_progress_bars_batches(pbar: str) -> None:
    found = [f for f in findings(TOKENS.format(pbar=pbar)) if f[0] in ("TP201", "TP204")]
    shift = pbar.count("\n")
    # the counter's branch and read; not `it`, the progress bar's count of steps
    assert found == [("TP204", 28 + shift), ("TP201", 31 + shift)]


def test_a_loader_wrapped_in_a_progress_bar_each_epoch_still_restarts_its_workers() -> None:
    src = TOKENS.replace(
        "            loader = DataLoader(self.train_dataset, batch_size=config.batch_size, "
        "num_workers=4)\n",
        "",
    ).replace(
        "        for epoch in range(config.max_epochs):\n",
        "        loader = DataLoader(self.train_dataset, batch_size=config.batch_size, "
        "num_workers=4)\n        for epoch in range(config.max_epochs):\n",
    )
    assert findings(
        src.format(pbar="tqdm(loader)").replace("(x, y) in pbar", "(x, y) in enumerate(pbar)"),
        "TP104",
    ) == [("TP104", 17)]


# change-39, PatchTST (and Time-Series-Library, change-8): the experiment's `_get_data` unpacks
# `data_set, data_loader = data_provider(self.args, flag)` from another file and returns both;
# the epoch loop re-iterates the training loader, whose workers start again each epoch.
FACTORY = """
from torch.utils.data import DataLoader


def data_provider(args, flag):
    data_set = Dataset_Custom(args.root_path, flag=flag)
    data_loader = DataLoader(
        data_set, batch_size=args.batch_size, shuffle=True, num_workers=args.num_workers
    )
    return data_set, data_loader
"""
EXPERIMENT = """
import argparse

import torch

from data_provider.data_factory import data_provider

parser = argparse.ArgumentParser()
parser.add_argument("--num_workers", type=int, default={workers})


class Exp_Main:
    def __init__(self, args):
        self.args = args
        self.model = Model(args).cuda()

    def _get_data(self, flag):
        data_set, data_loader = data_provider(self.args, flag)
        return data_set, data_loader

    def train(self):
        train_data, train_loader = self._get_data(flag="train")
        optimizer = torch.optim.Adam(self.model.parameters())
        for epoch in range(self.args.train_epochs):
            for batch_x, batch_y in train_loader:
                loss = self.model(batch_x.cuda()).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


def main():
    args = parser.parse_args()
    {run}
"""


@pytest.mark.parametrize(
    ("workers", "run", "reported"),
    [
        (10, "Exp_Main(args).train()", True),
        # the options this file parses and hands on say no workers (DLRM's --num-workers 0)
        (0, "Exp_Main(args).train()", False),
    ],
)
def test_a_loader_unpacked_from_another_files_factory_restarts_each_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], workers: int, run: str, reported: bool
) -> None:
    write_project(
        tmp_path,
        {
            "data_provider/__init__.py": "",
            "data_provider/data_factory.py": FACTORY,
            "exp/__init__.py": "",
            "exp/exp_main.py": EXPERIMENT.format(workers=workers, run=run),
        },
    )
    main(["lint", str(tmp_path), "--format", "json"])
    found = json.loads(capsys.readouterr().out)
    tp104 = [(Path(f["path"]).name, f["line"]) for f in found if f["code"] == "TP104"]
    assert tp104 == ([("data_factory.py", 7)] if reported else [])


# change-39, PyTorch Step-by-Step: the notebooks train conv nets through the book's StepByStep
# class (stepbystep/v3.py), whose train() calls set_seed(), which turns the auto-tuner off for
# reproducible lessons: the choice is made, in the class the notebook builds.
STEPBYSTEP = """
import numpy as np
import torch


class StepByStep:
    def __init__(self, model, loss_fn, optimizer):
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model.to(self.device)

    def set_seed(self, seed=42):
        {setting}
        torch.manual_seed(seed)
        np.random.seed(seed)

    def train(self, loader, n_epochs, seed=42):
        self.set_seed(seed)
        for epoch in range(n_epochs):
            for x, y in loader:
                loss = self.loss_fn(self.model(x.to(self.device)), y.to(self.device))
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
"""
NOTEBOOK_SCRIPT = """
import torch
import torch.nn as nn

from stepbystep.v3 import StepByStep

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(3))
sbs = StepByStep(model, nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters()))
sbs.train(train_loader, 10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in train_loader:  # the notebook's own loop, after the book's class trained the net
    loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


@pytest.mark.parametrize(
    ("setting", "reported"),
    [
        (
            "torch.backends.cudnn.deterministic = True\n"
            "        torch.backends.cudnn.benchmark = False",
            False,
        ),
        ("pass", True),
    ],
)
def test_cudnn_set_up_by_a_method_of_a_class_the_file_builds_is_set_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, reported: bool
) -> None:
    write_project(
        tmp_path,
        {
            "stepbystep/__init__.py": "",
            "stepbystep/v3.py": STEPBYSTEP.format(setting=setting),
            "train.py": NOTEBOOK_SCRIPT,
        },
    )
    main(["lint", str(tmp_path / "train.py"), "--select", "TP303", "--format", "json"])
    found = json.loads(capsys.readouterr().out)
    assert [f["line"] for f in found] == ([8] if reported else [])


# change-39: MAR's cache_latents (the frozen VAE's latents written to .npz files, once, before
# training) and PyTorch Step-by-Step's preprocessed_dataset (a frozen model's features, in eval
# mode each pass): passes over a loader that train nothing, whose host reads are their output.
CACHING = """
import os

import numpy as np
import torch

import misc


def cache_latents(vae, data_loader, device, args):
    for samples, _, paths in data_loader:
        samples = samples.to(device, non_blocking=True)
        with torch.no_grad():
            moments = vae.encode(samples).parameters
        for i, path in enumerate(paths):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            np.savez(os.path.join(args.cached_path, path), moments=moments[i].cpu().numpy())
        if misc.is_dist_avail_and_initialized():
            torch.cuda.synchronize()
        {step}
"""
FEATURES = """
import torch


def preprocessed_dataset(model, loader, device="cuda"):
    features = []
    for x, y in loader:
        model.{mode}()
        output = model(x.to(device))
        features.append(output.detach().cpu())
    return torch.cat(features)
"""


def test_a_pass_that_caches_or_extracts_features_is_not_a_training_step() -> None:
    def syncs(src: str) -> list[tuple[str, int]]:
        return [f for f in findings(src) if f[0] in ("TP201", "TP205")]

    assert syncs(CACHING.format(step="")) == []
    trains = "vae.train_step(samples)"  # a call lint cannot see into may train
    assert syncs(CACHING.format(step=trains)) == [("TP201", 17), ("TP205", 19)]
    assert syncs(FEATURES.format(mode="eval")) == []
    assert syncs(FEATURES.format(mode="train")) == [("TP201", 10)]


# change-39: FEDformer's "attention" over complex Fourier modes, and RWKV's inference demos
# (soft-capped scores, decoded under torch.no_grad() in a file that trains nothing): no fused
# kernel runs either. Plain attention in a model file is still reported.
ATTENTION = """
import torch
import torch.nn.functional as F


def attention(q, k, v):
    {prologue}
    scores = {scores}
    probs = F.softmax(scores, dim=-1)
    return probs @ v
"""


@pytest.mark.parametrize(
    ("prologue", "scores", "reported"),
    [
        ("pass", "q @ k.transpose(-2, -1) / 8", True),
        ("q = torch.fft.rfft(q, dim=-1)", "q @ k.transpose(-2, -1) / 8", False),
        ("pass", "64 * torch.tanh((q @ k.mT) / 1024)", False),
    ],
)
def test_attention_no_fused_kernel_takes_is_left_alone(
    prologue: str, scores: str, reported: bool
) -> None:
    found = findings(ATTENTION.format(prologue=prologue, scores=scores), "TP307")
    assert found == ([("TP307", 8)] if reported else [])


def test_attention_decoded_without_autograd_in_a_file_that_trains_nothing_is_inference() -> None:
    demo = ATTENTION.format(prologue="pass", scores="q @ k.transpose(-2, -1) / 8").replace(
        "def attention", "@torch.no_grad()\ndef attention"
    )
    assert findings(demo, "TP307") == []
    training = demo + (
        "\nfor x in loader:\n    loss = attention(x, x, x).sum()\n    loss.backward()\n"
        "    optimizer.step()\n"
    )
    assert findings(training, "TP307") == [("TP307", 9)]


def test_a_counter_of_host_batches_compared_with_a_config_value_is_on_the_host() -> None:
    # RWKV-v4's trainer leaves the batch on the host (the model moves it): the counter of
    # host tensors is a host tensor, and so is its comparison with a config's number
    host = TOKENS.format(pbar="tqdm(enumerate(loader))").replace(
        "                x = x.to(self.device)\n                y = y.to(self.device)\n", ""
    )
    assert [f for f in findings(host) if f[0] in ("TP201", "TP204")] == []


# change-39, MAR: a host mask drawn each step, then transformed and moved
# (`torch.rand(bsz) < p`, then `.unsqueeze(-1).cuda().to(x.dtype)`).
DROP_MASK = """
import torch
import torch.nn as nn


class MAR(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        drop_latent_mask = torch.rand(x.shape[0]) < 0.1
        drop_latent_mask = drop_latent_mask{move}
        return self.proj(x) * drop_latent_mask
"""


def test_a_host_mask_transformed_then_moved_is_built_on_the_host() -> None:
    moved = ".unsqueeze(-1).cuda().to(x.dtype)"
    assert findings(DROP_MASK.format(move=moved), "TP207") == [("TP207", 12)]
    assert findings(DROP_MASK.format(move=".unsqueeze(-1).float()"), "TP207") == []


# change-40, DeepGCNs' OGB examples: the options come from `args = ArgsInit().save_exp()`, whose
# args.py declares `--num_workers` with a default of 0: the loader has no workers (TP101), and
# none to pin beside the step or keep across epochs (TP102, TP104).
OPTIONS = """
import argparse


class ArgsInit(object):
    def __init__(self):
        parser = argparse.ArgumentParser(description="DeeperGCN")
        parser.add_argument("--num_workers", type=int, default={workers})
        parser.add_argument("--epochs", type=int, default=300)
        self.args = parser.parse_args()

    def save_exp(self):
        return self.args
"""
OGB_MAIN = """
import torch
from torch_geometric.loader import DataLoader

from args import ArgsInit


def main():
    args = ArgsInit().save_exp()
    device = torch.device("cuda")
    model = DeeperGCN(args).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    train_loader = DataLoader(dataset, batch_size=32, shuffle=True,
                              num_workers=args.num_workers)
    for epoch in range(args.epochs):
        for batch in train_loader:
            loss = model(batch.to(device)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


@pytest.mark.parametrize(("workers", "codes"), [(0, {"TP101"}), (4, {"TP102", "TP104"})])
def test_option_defaults_are_read_in_the_file_the_options_object_comes_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], workers: int, codes: set[str]
) -> None:
    write_project(tmp_path, {"args.py": OPTIONS.format(workers=workers), "main.py": OGB_MAIN})
    main(["lint", str(tmp_path / "main.py"), "--format", "json"])
    found = json.loads(capsys.readouterr().out)
    assert {f["code"] for f in found if f["code"] in ("TP101", "TP102", "TP104")} == codes


# change-40, DeepGCNs' ModelNet: `def infer(model, test_loader, criterion, opt)` puts the model
# in eval mode and computes under `with torch.no_grad():`; the epoch loop calls it beside the
# training step: its reads are the evaluation's, whatever the function is called.
INFER = """
import torch


def train_step(model, loader, optimizer, criterion):
    model.train()
    for data, label in loader:
        optimizer.zero_grad()
        loss = criterion(model(data.cuda()), label.cuda())
        loss.backward()
        optimizer.step()


def {name}(model, loader, criterion):
    model.eval()
    losses = []
    {context}
        for data, label in loader:
            loss = criterion(model(data.cuda()), label.cuda())
            losses.append(loss.item())
    return losses


model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(100):
    train_step(model, train_loader, optimizer, criterion)
    {name}(model, test_loader, criterion)
"""


def test_a_function_in_eval_mode_under_no_grad_that_trains_nothing_evaluates() -> None:
    def tp201(name: str, context: str) -> list[tuple[str, int]]:
        return findings(INFER.format(name=name, context=context), "TP201")

    assert tp201("infer", "with torch.no_grad():") == []
    # a step that trains, then validates under no_grad in the same function, still trains
    step = INFER.replace(
        "    losses = []\n",
        "    losses = []\n    train_step(model, loader, optimizer, criterion)\n",
    )
    assert findings(step.format(name="run_pass", context="with torch.no_grad():"), "TP201") != []
    assert tp201("run_pass", "with torch.no_grad():") == []
    assert tp201("run_pass", "if True:") == [("TP201", 20)]  # autograd on: not shown to evaluate


def test_a_tensors_type_name_is_a_string_not_a_tensor() -> None:
    # change-40, KAIR's SSIM loss: `self.window.data.type() == img1.data.type()` compares names
    ssim = """
import torch
import torch.nn as nn


class SSIMLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.channel = 1
        self.window = torch.ones(1, 1, 11, 11)

    def forward(self, img1, img2):
        (_, channel, _, _) = img1.size()
        if channel == self.channel and self.window.data.type() == img1.data.type():
            window = self.window
        else:
            window = torch.ones(1, channel, 11, 11)
            if img1.is_cuda:
                window = window.cuda(img1.get_device())
            self.window = window
            self.channel = channel
        return (img1 - img2).abs().mean() * window.mean()


model = Net().cuda()
criterion = SSIMLoss().cuda()
optimizer = torch.optim.Adam(model.parameters())
for x, y in loader:
    loss = criterion(model(x.cuda()), y.cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
    assert findings(ssim, "TP204") == []  # was reported: `.type()` read as a cast


def test_a_databricks_notebook_source_file_with_shell_lines_lints(tmp_path: Path) -> None:
    # change-41, Dolly's train_dolly.py: a Databricks notebook exported as .py, whose
    # `!deepspeed ...` cell is IPython; it made the run exit 2 as a syntax error
    source = (
        "# Databricks notebook source\n"
        "# MAGIC %md\n"
        "# MAGIC ## Train\n"
        "\n"
        "# COMMAND ----------\n"
        "\n"
        "!deepspeed --num_gpus=8 \\\n"
        "    --module training.trainer\n"
        "\n"
        "# COMMAND ----------\n"
        "\n"
        "import torch\n"
        "model = Net().cuda()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x in loader:\n"
        "    loss = model(x.cuda()).sum()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    print(loss.item())\n"
    )
    path = tmp_path / "train_dolly.py"
    path.write_text(source)
    found = [f[1] for f in findings(source, "TP201")]
    assert found == [19]  # the read, at its own line: the shell cell kept its lines
    assert main(["lint", str(path), "--select", "TP201"]) == 1  # findings, not an error
    plain = tmp_path / "plain.py"
    plain.write_text(source.replace("# Databricks notebook source\n", ""))
    assert main(["lint", str(plain), "--select", "TP201"]) == 2  # a script's syntax error stays


def test_a_save_on_a_new_best_score_is_no_per_step_read() -> None:
    # change-40, DeepGCNs: full-batch training evaluates and checkpoints each step, but copies the
    # state to the host only when the score beats the best so far
    src = """
import torch

model = Net().cuda()
optimizer = torch.optim.Adam(model.parameters())
best_acc = 0.0
for epoch in range(500):
    loss = model(data).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    acc = evaluate(model)
    if {test}:
        best_acc = acc
        torch.save({{k: v.cpu() for k, v in model.state_dict().items()}}, "best.pt")
"""
    assert findings(src.format(test="acc > best_acc"), "TP201") == []
    assert findings(src.format(test="acc > 0.5"), "TP201") == [("TP201", 15)]  # no record kept
