"""Classes the seventeenth session found in the judged corpus (issue 32), fixed in general: mask
and window helpers of another file that a model's forward calls (FastSpeech 2, VITS, BasicSR,
Time-Series-Library), and models a notebook or script trains that lint sized wrongly (a
function's own ``model``, a notebook's later cells, a class count, CIFAR-sized images). Each
fixture has the shape of the code a judge read, shortened and renamed; each test fails on the
rules before the change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lint_findings import findings, write_project

from torchpace.cli import main

# FastSpeech 2: the variance adaptor's forward calls ``get_mask_from_lengths`` of utils/tools.py,
# which builds ``arange`` on the host and moves it, on every training step. The model is built
# in a file no training loop of the project calls (a factory), and the helper's own file names
# no device.
TOOLS = """
import torch


def get_mask_from_lengths(lengths, max_len=None):
    batch_size = lengths.shape[0]
    ids = torch.arange(0, max_len).unsqueeze(0).expand(batch_size, -1).to(lengths.device)
    return ids >= lengths.unsqueeze(1).expand(-1, max_len)


def plot_mel(mel):
    return torch.zeros(4).to(mel.device)
"""

ADAPTOR = """
import torch
from torch import nn

from utils.tools import get_mask_from_lengths

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class VarianceAdaptor(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(256, 256)

    def forward(self, x, lengths):
        mask = get_mask_from_lengths(lengths, x.shape[1])
        return self.proj(x).masked_fill(mask.unsqueeze(-1), 0.0)
"""


def _findings(root: Path, capsys: pytest.CaptureFixture[str], code: str) -> list[tuple[str, int]]:
    main(["lint", str(root), "--select", code, "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    return sorted((Path(f["path"]).relative_to(root.resolve()).as_posix(), f["line"]) for f in out)


def test_a_helper_of_another_file_that_a_forward_calls_is_read_as_forward_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_project(tmp_path, {"utils/tools.py": TOOLS, "model/adaptor.py": ADAPTOR})
    line = TOOLS.splitlines().index(
        "    ids = torch.arange(0, max_len).unsqueeze(0).expand(batch_size, -1).to(lengths.device)"
    )
    # the helper the forward calls, not the one it does not
    assert _findings(tmp_path, capsys, "TP207") == [("utils/tools.py", line + 1)]


def test_a_helper_is_not_read_on_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_project(tmp_path, {"utils/tools.py": TOOLS})
    assert _findings(tmp_path, capsys, "TP207") == []


# VITS: the training loop calls the generator, whose forward (its file entered by the loop)
# calls ``commons.rand_slice_segments``; ``commons`` is entered already for a loss the loop
# calls, and keeps that entry beside the forward's.
COMMONS = """
import torch


def rand_slice_segments(x, segment_size=4):
    b, d, t = x.size()
    ids_str = (torch.rand([b]).to(device=x.device) * (t - segment_size)).to(dtype=torch.long)
    return ids_str


def feature_loss(a, b):
    return torch.mean(torch.abs(a - b))
"""

MODELS = """
import torch
from torch import nn

import commons


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(80, 80, 3)

    def forward(self, x):
        x = x.to(self.conv.weight.device)
        ids = commons.rand_slice_segments(x)
        return self.conv(x), ids
"""

TRAIN = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

import commons
from models import Generator

net_g = Generator().cuda()
net_g = DDP(net_g)
opt = torch.optim.AdamW(net_g.parameters())
for x in loader:
    x = x.cuda(non_blocking=True)
    y, ids = net_g(x)
    loss = commons.feature_loss(y, x)
    loss.backward()
    opt.step()
"""


def test_a_helper_the_step_code_of_an_entered_file_calls_is_read_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_project(tmp_path, {"commons.py": COMMONS, "models.py": MODELS, "train.py": TRAIN})
    line = next(i for i, text in enumerate(COMMONS.splitlines()) if "torch.rand([b])" in text)
    assert _findings(tmp_path, capsys, "TP207") == [("commons.py", line + 1)]


# Time-Series-Library: a forward builds a mask object of another file each step; its class's
# ``__init__`` makes the mask on the host and moves it.
MASKING = """
import torch


class TriangularCausalMask:
    def __init__(self, B, L, device="cpu"):
        mask_shape = [B, 1, L, L]
        with torch.no_grad():
            self._mask = torch.triu(torch.ones(mask_shape, dtype=torch.bool), diagonal=1).to(device)
"""

ATTENTION = """
import torch
from torch import nn

from utils.masking import TriangularCausalMask


class FullAttention(nn.Module):
    def forward(self, queries, keys, values):
        B, L, H, E = queries.shape
        mask = TriangularCausalMask(B, L, device=queries.device)
        scores = torch.einsum("blhe,bshe->bhls", queries, keys.to(queries.device))
        return scores.masked_fill(mask._mask, -1e9)
"""


def test_a_class_another_files_forward_builds_runs_its_init_every_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_project(tmp_path, {"utils/masking.py": MASKING, "layers/attention.py": ATTENTION})
    line = next(i for i, text in enumerate(MASKING.splitlines()) if "torch.triu(" in text)
    assert _findings(tmp_path, capsys, "TP207") == [("utils/masking.py", line + 1)]


# jeffheaton's ensembles notebook: the module-level loop trains a small MLP; a function further
# down builds its own ``model`` and loops ``for j, model in enumerate(models)``, which are that
# function's names, not the notebook's.
SCOPED = """
import torch
from torch import nn

device = "cuda"
x = torch.randn(100, 7, device=device)
y = torch.randn(100, 1, device=device)
model = MODEL
model = model.to(device)
opt = torch.optim.Adam(model.parameters())
for epoch in range(1000):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(loss.item())


def blend(models):
    model = nn.Linear(7, 1)
    for j, model in enumerate(models):
        print(model)
"""
SMALL_MLP = (
    "nn.Sequential(nn.Linear(7, 50), nn.ReLU(), nn.Linear(50, 25), nn.ReLU(), nn.Linear(25, 1))"
)


@pytest.mark.parametrize(("model", "reported"), [(SMALL_MLP, False), ("torch.load('m.pt')", True)])
def test_a_functions_own_model_does_not_stand_for_the_modules(model: str, reported: bool) -> None:
    assert bool(findings(SCOPED.replace("MODEL", model), "TP201")) is reported


# A notebook trains a small autoencoder in one cell; later cells rebind ``model`` to a wide
# convolutional one and ``encoding_dim`` to another size.
CELLS = """
import torch
from torch import nn


class AutoEncoder(nn.Module):
    def __init__(self, input_dim, encoding_dim):
        super().__init__()
        self.encoder = nn.Linear(input_dim, encoding_dim)
        self.decoder = nn.Linear(encoding_dim, input_dim)

    def forward(self, x):
        return self.decoder(torch.relu(self.encoder(x)))


class ConvAutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, 64, 3), nn.Conv2d(64, 32, 3))
        self.decoder = nn.Sequential(nn.ConvTranspose2d(32, 64, 3), nn.ConvTranspose2d(64, 1, 3))

    def forward(self, x):
        return self.decoder(self.encoder(x))


def train_model(model, loader, optimizer):
    for data in loader:
        data = data.view(-1, 784).cuda()
        loss = ((model(data) - data) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())


input_dim = 784
encoding_dim = 64
model = AutoEncoder(input_dim, encoding_dim)
model = model.cuda()
train_model(model, loader, torch.optim.Adam(model.parameters()))
encoding_dim = 32
model = AutoEncoder(input_dim, encoding_dim)
model = LATER.cuda()
"""


@pytest.mark.parametrize(
    ("later", "reported"), [("ConvAutoEncoder()", False), ("torch.load('m.pt')", False)]
)
def test_a_notebooks_later_cells_do_not_size_the_model_a_cell_trains(
    later: str, reported: bool
) -> None:
    assert bool(findings(CELLS.replace("LATER", later), "TP201")) is reported


def test_a_model_bound_before_the_training_call_is_the_one_sized() -> None:
    # the model bound before the call is a library's: unknown, so the read is reported
    source = CELLS.replace(
        "model = AutoEncoder(input_dim, encoding_dim)\nmodel = model.cuda()\ntrain_model",
        "model = torch.load('m.pt')\nmodel = model.cuda()\ntrain_model",
    )
    assert findings(source, "TP201")


# jeffheaton's iris notebook: the output layer has one unit per class of a label encoder.
CLASSES = """
import torch
from torch import nn
from sklearn.preprocessing import LabelEncoder

le = LabelEncoder()
y = torch.tensor(le.fit_transform(labels), dtype=torch.long, device="cuda")
species = le.classes_
model = nn.Sequential(
    nn.Linear(x.shape[1], 50), nn.ReLU(), nn.Linear(50, 25), nn.ReLU(), nn.Linear(25, OUT)
)
model = model.to("cuda")
opt = torch.optim.Adam(model.parameters())
for epoch in range(1000):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(loss.item())
"""


@pytest.mark.parametrize(
    ("out", "reported"),
    [("len(species)", False), ("len(train_data.classes)", False), ("len(vocab)", True)],
)
def test_a_count_of_classes_is_the_datas_width(out: str, reported: bool) -> None:
    assert bool(findings(CLASSES.replace("OUT", out), "TP201")) is reported


# A CIFAR-10 tutorial: three narrow convolutions over 32x32 images at batch 20.
CIFAR = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import datasets
import torchvision.transforms as transforms

transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
train_data = datasets.DATASET("data", train=True, download=True, transform=transform)
train_loader = torch.utils.data.DataLoader(train_data, batch_size=20, num_workers=2)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 64, 3, padding=1)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc1 = nn.Linear(64 * 4 * 4, 500)
        self.fc2 = nn.Linear(500, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = self.pool(F.relu(self.conv3(x)))
        return self.fc2(F.relu(self.fc1(x.view(-1, 64 * 4 * 4))))


model = Net().cuda()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(30):
    for data, target in train_loader:
        data, target = data.cuda(), target.cuda()
        optimizer.zero_grad()
        loss = criterion(model(data), target)
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    ("dataset", "reported"), [("CIFAR10", False), ("SVHN", False), ("ImageNet", True)]
)
def test_a_narrow_conv_net_on_cifar_sized_images_is_a_small_step(
    dataset: str, reported: bool
) -> None:
    found = {code for code, _ in findings(CIFAR.replace("DATASET", dataset))}
    assert ("TP302" in found) is reported
    assert ("TP303" in found) is reported


# glow-tts: the generator is wrapped by apex's DistributedDataParallel, which keeps its forward;
# the loop's call is the generator's.
APEX = """
import torch
from apex.parallel import DistributedDataParallel as DDP

import models

generator = models.FlowGenerator().cuda()
generator = DDP(generator)
opt = torch.optim.Adam(generator.parameters())
for x in loader:
    loss = generator(x.cuda()).sum()
    loss.backward()
    opt.step()
"""


def test_apex_ddp_keeps_the_models_class() -> None:
    from torchpace.lint.engine import calls_out, parse

    ctx = parse("train.py", APEX.encode())
    assert not isinstance(ctx, Exception)
    assert ctx.loops.instances["generator"] == "models.FlowGenerator"
    assert ("models", "FlowGenerator.forward") in calls_out(ctx)


# DeiT, MAE and DINO: the training loop hands its MetricLogger plain numbers only (the loss
# already read with ``.item()``, the optimizer's learning rate), so the logger's ``.item()`` of
# a tensor never runs; DETR's hands it its loss dict's tensors, and there it reads each one.
LOGGER = """
import torch


class MetricLogger:
    def __init__(self):
        self.meters = {}

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            self.meters[k] = v
"""

ENGINE = """
import torch

import misc


def train_one_epoch(model, loader, optimizer, device):
    metric_logger = misc.MetricLogger()
    for samples, targets in loader:
        samples = samples.to(device, non_blocking=True)
        loss = model(samples).mean()
        loss_value = loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        max_lr = 0.0
        for group in optimizer.param_groups:
            max_lr = max(max_lr, group["lr"])
        metric_logger.update(loss=LOGGED, lr=max_lr)
"""

MAIN = """
import torch
import torchvision

from engine import train_one_epoch

device = torch.device("cuda")
model = torchvision.models.resnet50().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    train_one_epoch(model, loader, optimizer, device)
"""


@pytest.mark.parametrize(("logged", "reported"), [("loss_value", False), ("loss", True)])
def test_a_helper_handed_plain_numbers_never_reads_a_tensor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], logged: str, reported: bool
) -> None:
    write_project(
        tmp_path,
        {"misc.py": LOGGER, "engine.py": ENGINE.replace("LOGGED", logged), "main.py": MAIN},
    )
    found = [path for path, _ in _findings(tmp_path, capsys, "TP201") if path == "misc.py"]
    assert bool(found) is reported


# OGB's knowledge-graph models: the forward picks its scoring method from a dict of its own
# methods by the configured name; TransE reads the model's fixed margin parameter every call.
KGE = """
import torch
from torch import nn


class KGEModel(nn.Module):
    def __init__(self, model_name, gamma):
        super().__init__()
        self.model_name = model_name
        self.gamma = nn.Parameter(torch.Tensor([gamma]), requires_grad=False)
        self.entity = nn.Parameter(torch.zeros(100, 16))

    def forward(self, sample):
        head = self.entity[sample[:, 0]].to(sample.device)
        tail = self.entity[sample[:, 2]]
        score_of = SCORES
        return score_of[self.model_name](head, tail)

    def TransE(self, head, tail):
        return self.gamma.item() - torch.norm(head - tail, p=1, dim=-1)

    def DistMult(self, head, tail):
        return (head * tail).sum(dim=-1)
"""


@pytest.mark.parametrize(
    ("scores", "reported"),
    [('{"TransE": self.TransE, "DistMult": self.DistMult}', True), ("{}", False)],
)
def test_a_method_a_forward_picks_from_a_dict_of_its_own_runs_every_step(
    scores: str, reported: bool
) -> None:
    line = KGE.splitlines().index(
        "        return self.gamma.item() - torch.norm(head - tail, p=1, dim=-1)"
    )
    found = findings(KGE.replace("SCORES", scores), "TP201")
    assert (("TP201", line + 1) in found) is reported


# PyTorch-GAN's MLP GANs: each block of the generator comes from a helper nested in __init__,
# the image's size is np.prod of a shape of option defaults, and a legacy tensor type makes
# the labels; the loader resizes MNIST to the option's size.
GAN = """
import argparse

import numpy as np
import torch
import torch.nn as nn
import torchvision.transforms as transforms
from torchvision import datasets

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=64)
parser.add_argument("--latent_dim", type=int, default=100)
parser.add_argument("--img_size", type=int, default=SIZE)
parser.add_argument("--channels", type=int, default=1)
opt = parser.parse_args()
img_shape = (opt.channels, opt.img_size, opt.img_size)
cuda = True if torch.cuda.is_available() else False


class Generator(nn.Module):
    def __init__(self):
        super().__init__()

        def block(in_feat, out_feat, normalize=True):
            layers = [nn.Linear(in_feat, out_feat)]
            if normalize:
                layers.append(nn.BatchNorm1d(out_feat, 0.8))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        self.model = nn.Sequential(
            *block(opt.latent_dim, 128, normalize=False),
            *block(128, 256),
            *block(256, 512),
            *block(512, 1024),
            nn.Linear(1024, int(np.prod(img_shape))),
            nn.Tanh(),
        )

    def forward(self, z):
        return self.model(z).view(z.shape[0], *img_shape)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(
            nn.Linear(int(np.prod(img_shape)), 512),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(512, 256),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(256, 1),
        )

    def forward(self, img):
        return self.model(img.view(img.shape[0], -1))


generator = Generator()
discriminator = Discriminator()
if cuda:
    generator.cuda()
    discriminator.cuda()
dataloader = torch.utils.data.DataLoader(
    datasets.MNIST(
        "data",
        train=True,
        download=True,
        transform=transforms.Compose([transforms.Resize(opt.img_size), transforms.ToTensor()]),
    ),
    batch_size=opt.batch_size,
    shuffle=True,
    num_workers=2,
)
optimizer_G = torch.optim.Adam(generator.parameters())
optimizer_D = torch.optim.Adam(discriminator.parameters())
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
for epoch in range(200):
    for i, (imgs, _) in enumerate(dataloader):
        real_imgs = imgs.type(Tensor)
        optimizer_G.zero_grad()
        z = Tensor(np.random.normal(0, 1, (imgs.shape[0], opt.latent_dim)))
        g_loss = -torch.mean(discriminator(generator(z)))
        g_loss.backward()
        optimizer_G.step()
        optimizer_D.zero_grad()
        fake = generator(z).detach()
        d_loss = -torch.mean(discriminator(real_imgs)) + torch.mean(discriminator(fake))
        d_loss.backward()
        optimizer_D.step()
"""


@pytest.mark.parametrize(("size", "reported"), [("28", False), ("256", True)])
def test_a_gans_nested_block_helper_and_image_product_are_sized(size: str, reported: bool) -> None:
    found = {code for code, _ in findings(GAN.replace("SIZE", size))}
    assert ("TP302" in found) is reported
