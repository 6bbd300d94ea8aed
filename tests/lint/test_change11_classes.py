"""Classes issue 32's eleventh change set showed (sgrvinod's SSD tutorial, higgsfield's
RL-Adventure-2, descriptinc/melgan-neurips, facebookresearch/moco, meta-llama/llama-recipes,
facebookresearch/demucs; judged before any rule changed against it). Each fixture has the
shape of the code it is cut from, shortened; each test fails on the rules before the change and
keeps the old answer where the shape differs in what matters."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from lint_findings import findings as _findings

from torchpace.cli import main

# The shape of the SSD tutorial's MultiBoxLoss (MIT) and demucs' solver (MIT): tensors made
# on the host inside the step, then moved: a legacy typed constructor of a range, a window
# function, and a move to where another tensor of the step is (``.to(sources)``).
HOST_MADE = """
import torch

device = torch.device("cuda")


def train(loader, model, optimizer, weights):
    for images, sources in loader:
        sources = sources.to(device)
        n = images.size(0)
        ranks = torch.LongTensor(range(n)).unsqueeze(0).expand_as(sources).to(device)
        idx = torch.LongTensor(range(n)).to(device)
        window = torch.hann_window(400).to(sources)
        w = torch.tensor(weights).to(sources)
        rows = torch.FloatTensor(images.numpy()).to(device)
        cast = torch.zeros(n).to(torch.float16)
        loss = (model(sources, window, rows)[idx] * ranks * w * cast).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_tensors_made_on_the_host_in_the_step_are_found_through_more_spellings() -> None:
    found = _findings(HOST_MADE, "TP207")
    assert found == [("TP207", n) for n in (11, 12, 13, 14)]
    # host data copied in (an observation, a NumPy batch) is a copy either way (line 15), and a
    # cast to a dtype moves nothing (line 16)


# The shape of RL-Adventure-2's 9.her notebook (no licence given; cut to its structure): the
# acting loop calls a function of the file that runs the Q-network and returns an action.
ACTING_THROUGH_A_FUNCTION = """
import random

import gym
import torch
import torch.nn as nn

device = torch.device("cuda")
env = gym.make("CartPole-v1")
model = nn.Linear(4, 2).to(device)
optimizer = torch.optim.Adam(model.parameters())


def get_action(model, state):
    if random.random() < 0.1:
        return random.randrange(2)
    state = torch.FloatTensor(state).unsqueeze(0).to(device)
    q_value = model(state)
    return q_value.max(1)[1].item()


def update():
    loss = model(torch.zeros(4, device=device)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


for episode in range(100):
    state = env.reset()
    done = False
    while not done:
        action = get_action(model, state)
        state, reward, done, _ = env.step(action)
    update()
"""


def test_an_acting_loop_that_runs_the_model_in_a_function_of_the_file_is_reported() -> None:
    assert _findings(ACTING_THROUGH_A_FUNCTION, "TP403") == [("TP403", 32)]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the function turns autograd off itself
        (
            "    q_value = model(state)\n",
            "    with torch.no_grad():\n        q_value = model(state)\n",
        ),
        # it hands the output on: the graph may be kept
        ("    return q_value.max(1)[1].item()\n", "    return q_value\n"),
        # it stores something of its own
        ("    q_value = model(state)\n", "    q_value = model(state)\n    cache[0] = q_value\n"),
    ],
)
def test_an_acting_function_that_keeps_its_graph_or_disables_autograd_is_not(
    old: str, new: str
) -> None:
    source = textwrap.dedent(ACTING_THROUGH_A_FUNCTION)
    assert old in source
    assert _findings(source.replace(old, new), "TP403") == []


# The shape of demucs (MIT): one loop serves training and validation, by a parameter; the
# validation branch runs chunked inference and reads a value of it.
BOTH_PASSES = """
import torch


def apply_model(model, mix):
    return model(mix)


class Solver:
    def __init__(self, model, optimizer):
        self.model = model.cuda()
        self.optimizer = optimizer

    def _run_one_epoch(self, loader, train=True):
        for sources in loader:
            sources = sources.cuda()
            if not train and self.valid_apply:
                estimate = apply_model(self.model, sources)
                print(estimate.abs().max().item())
            else:
                estimate = self.model(sources)
            loss = (estimate - sources).abs().mean()
            if train:
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
"""


def test_the_evaluation_branch_of_a_loop_that_trains_under_a_flag_is_not_the_step() -> None:
    assert ("TP201", 19) not in _findings(BOTH_PASSES)
    always = BOTH_PASSES.replace("if not train and self.valid_apply:", "if self.valid_apply:")
    assert ("TP201", 19) in _findings(always)
    # a branch that trains is the step's, whatever its test says
    trains = BOTH_PASSES.replace(
        "print(estimate.abs().max().item())",
        "estimate.sum().backward()\n                print(estimate.abs().max().item())",
    )
    assert ("TP201", 20) in _findings(trains)


# The shape of demucs' package (MIT): train.py moves the model to CUDA and hands it to the
# Solver class it imports relatively; the solver's loop never names a device.
DEMUCS_TRAIN = """
import torch

from .solver import Solver


def get_solver(args):
    model = build_model(args)
    if torch.cuda.is_available():
        model.cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    return Solver(loaders, model, optimizer, args)
"""
DEMUCS_SOLVER = """
import torch


class Solver:
    def __init__(self, loaders, model, optimizer, args):
        self.loaders, self.model, self.optimizer = loaders, model, optimizer
        self.device = next(iter(self.model.parameters())).device

    def train(self):
        for sources in self.loaders["train"]:
            sources = sources.to(self.device)
            loss = torch.nn.functional.l1_loss(self.model(sources[:, 0]), sources[:, 1])
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
"""


def test_a_model_moved_to_cuda_and_handed_to_a_relatively_imported_trainer_trains_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    pkg = tmp_path / "demucs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(textwrap.dedent(DEMUCS_TRAIN))
    (pkg / "solver.py").write_text(textwrap.dedent(DEMUCS_SOLVER))
    main(["lint", "--format", "json", "--select", "TP302", "."])
    found = {(f["path"], f["line"]) for f in json.loads(capsys.readouterr().out)}
    assert found == {("demucs/solver.py", 11)}
    # a model handed on without an optimizer is wrapped or inspected there, not trained
    (pkg / "train.py").write_text(
        textwrap.dedent(DEMUCS_TRAIN).replace(
            "Solver(loaders, model, optimizer, args)", "Solver(loaders, model, args)"
        )
    )
    main(["lint", "--format", "json", "--select", "TP302", "."])
    assert json.loads(capsys.readouterr().out) == []
    # a model the file never moves says nothing of the device
    (pkg / "train.py").write_text(
        textwrap.dedent(DEMUCS_TRAIN).replace("model.cuda()", "print(model)")
    )
    main(["lint", "--format", "json", "--select", "TP302", "."])
    assert json.loads(capsys.readouterr().out) == []


# The shape of PyTorch-Ignite's cifar10 example (BSD-3-Clause): the loader comes from
# ``idist.auto_dataloader``, which hands its keywords to a DataLoader and pins on CUDA itself;
# ``trainer.run`` iterates it once per epoch.
IGNITE = """
import ignite.distributed as idist
import torch
from ignite.engine import Engine


def training(local_rank, config):
    device = idist.device()
    train_loader = idist.auto_dataloader(
        train_ds, batch_size=config["batch_size"], num_workers=12, shuffle=True, drop_last=True
    )
    model = idist.auto_model(build_model()).to(device)
    optimizer = idist.auto_optim(torch.optim.SGD(model.parameters(), lr=0.1))

    def train_step(engine, batch):
        x, y = batch[0].to(device), batch[1].to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    trainer = Engine(train_step)
    trainer.run(train_loader, max_epochs=config["num_epochs"])
"""


def test_a_library_function_that_builds_a_dataloader_is_read_as_one() -> None:
    assert _findings(IGNITE, "TP104") == [("TP104", 9)]
    assert _findings(IGNITE, "TP102") == []  # auto_dataloader pins on CUDA when not told
    assert _findings(IGNITE.replace("num_workers=12, ", ""), "TP101") == [("TP101", 9)]


# The shape of rasbt/LLMs-from-scratch's previous_chapters.py (Apache-2.0): a loader built in a
# function whose ``num_workers`` parameter defaults to 0, in a file that uses CUDA.
LOADER_FUNCTION = """
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")


def create_dataloader_v1(txt, batch_size=4, shuffle=True, num_workers=0):
    dataset = GPTDatasetV1(txt)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers)


def train(model, loader, optimizer):
    for x, y in loader:
        loss = model(x.to(device), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_pinning_is_not_asked_of_a_loader_whose_workers_default_to_none() -> None:
    assert _findings(LOADER_FUNCTION, "TP102") == []
    some = LOADER_FUNCTION.replace("num_workers=0):", "num_workers=4):")
    assert _findings(some, "TP102") == [("TP102", 10)]


# The shapes of VITS' mel_processing.py (MIT), open_clip's legacy_train.py (MIT) and
# accelerate's checkpoint helpers (Apache-2.0), which the cross-file reading above reached.
MEMOISED = """
import torch

hann_window = {}


def spectrogram(y, n_fft, win_size):
    key = str(win_size) + "_" + str(y.dtype) + "_" + str(y.device)
    if key not in hann_window:
        hann_window[key] = torch.hann_window(win_size).to(dtype=y.dtype, device=y.device)
    return torch.stft(y, n_fft, window=hann_window[key], return_complex=True)


def train(model, loader, optimizer):
    for y in loader:
        y = y.cuda()
        loss = (model(spectrogram(y, 1024, 1024)) - y).abs().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_cache_filled_once_per_key_is_not_the_steps_work() -> None:
    assert _findings(MEMOISED, "TP207") == []
    # filling another key than the one tested (hifi-gan's) builds the window every step
    broken = MEMOISED.replace("if key not in hann_window:", "if win_size not in hann_window:")
    assert _findings(broken, "TP207") == [("TP207", 10)]


AUTOCAST_HELPER = """
import torch

from precision import get_autocast


def train(model, loader, optimizer, args):
    autocast = get_autocast(args.precision)
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        with autocast():
            loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_helper_that_picks_the_autocast_context_is_mixed_precision() -> None:
    assert _findings(AUTOCAST_HELPER, "TP302") == []
    plain = AUTOCAST_HELPER.replace("get_autocast(args.precision)", "nullcontext").replace(
        "with autocast():", "with nullcontext():"
    )
    assert _findings(plain, "TP302") == [("TP302", 9)]


SAFE_GLOBALS = """
import torch


def train(model, loader, optimizer):
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        old_safe_globals = torch.serialization.get_safe_globals()
        if old_safe_globals:
            torch.serialization.clear_safe_globals()
"""


def test_a_checkpoint_helpers_result_is_not_a_tensor() -> None:
    assert _findings(SAFE_GLOBALS, "TP204") == []
