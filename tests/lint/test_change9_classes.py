"""Classes issue 32's ninth change set showed (Kaixhin/Rainbow, crowsonkb/k-diffusion,
jzhang38/TinyLlama, amdegroot/ssd.pytorch, Diego999/pyGAT, MorvanZhou/PyTorch-Tutorial,
jaywalnut310/glow-tts; judged before any rule changed against it). Each fixture has the shape of
the code it is cut from, shortened; each test fails on the rules before the change and keeps the
finding where the shape differs in what matters."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from lint_findings import findings as _findings
from lint_findings import write_project

from torchpace.cli import main

# The shape of pyGAT's and pygcn's train.py (MIT): one full-batch step an epoch, then the
# validation forward in eval mode, whose loss is printed and returned for early stopping.
FULL_BATCH = """
import argparse
import torch
import torch.nn.functional as F
import torch.optim as optim

parser = argparse.ArgumentParser()
parser.add_argument("--fastmode", action="store_true", default=False)
args = parser.parse_args()
model = GAT(nfeat=features.shape[1], nhid=8, nclass=7, nheads=8).cuda()
features, adj, labels = features.cuda(), adj.cuda(), labels.cuda()
optimizer = optim.Adam(model.parameters(), lr=0.005)


def train(epoch):
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    loss_train = F.nll_loss(output[idx_train], labels[idx_train])
    loss_train.backward()
    optimizer.step()

    if not args.fastmode:
        model.eval()
        output = model(features, adj)

    loss_val = F.nll_loss(output[idx_val], labels[idx_val])
    print("loss_train", loss_train.item(), "loss_val", loss_val.item())
    return loss_val.item()


best = float("inf")
for epoch in range(1000):
    loss = train(epoch)
    if loss < best:
        best = loss
"""


def test_a_step_that_validates_after_stepping_waits_there_anyway():
    # pyGAT: 3 false (needed for early stopping) and 2 evaluation reads; pygcn: 2 evaluation
    # reads and 2 debatable ones, all on the per-epoch print and return of train(epoch)
    assert [f for f in _findings(FULL_BATCH) if f[0] == "TP201"] == []
    # Without the validation forward in eval mode, the training reads are the step's own waits
    no_validation = FULL_BATCH.replace(
        "    if not args.fastmode:\n        model.eval()\n        output = model(features, adj)\n",
        "",
    )
    assert [f for f in _findings(no_validation) if f[0] == "TP201"] != []
    # Nor when the validation runs only every 10 epochs (a cadence)
    every_ten = FULL_BATCH.replace("    if not args.fastmode:\n", "    if epoch % 10 == 0:\n")
    assert [f for f in _findings(every_ten) if f[0] == "TP201"] != []


# The shape of MorvanZhou's 306_optimizer.py (MIT): a CPU-only script whose own epoch loop
# re-iterates a loader with two workers.
CPU_WORKERS = """
import torch
import torch.utils.data as Data

x = torch.unsqueeze(torch.linspace(-1, 1, 1000), dim=1)
y = x.pow(2) + 0.1 * torch.normal(torch.zeros(*x.size()))
torch_dataset = Data.TensorDataset(x, y)
loader = Data.DataLoader(dataset=torch_dataset, batch_size=32, shuffle=True, num_workers=2)
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
loss_func = torch.nn.MSELoss()
for epoch in range(12):
    for step, (b_x, b_y) in enumerate(loader):
        loss = loss_func(net(b_x), b_y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_persistent_workers_are_not_advised_to_a_cpu_only_script():
    assert ("TP104", 8) not in _findings(CPU_WORKERS)
    on_gpu = CPU_WORKERS.replace("net(b_x), b_y", "net.cuda()(b_x.cuda()), b_y.cuda()")
    assert ("TP104", 8) in _findings(on_gpu)


# The shape of ssd.pytorch's train.py (MIT) and k-diffusion's train.py (MIT): an option off by
# default whose help says it visualises or measures something gates a per-step read.
OPT_IN = """
import argparse
import torch

parser = argparse.ArgumentParser()
parser.add_argument(
    "--visdom", default=False, type=str2bool, help="Use visdom for loss visualization"
)
parser.add_argument("--gns", action="store_true", help="measure the gradient noise scale")
args = parser.parse_args()
model = build_model().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
for images, targets in data_loader:
    loss = criterion(model(images.cuda()), targets.cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if args.visdom:
        update_vis_plot(loss.detach().cpu())
    if args.gns:
        gns.update(loss.item())
"""


def test_a_read_under_an_option_for_diagnostics_its_help_names_is_not_a_default_runs():
    assert [f for f in _findings(OPT_IN) if f[0] == "TP201"] == []
    # an opt-in option whose help names no diagnostic keeps what it gates
    features = OPT_IN.replace("Use visdom for loss visualization", "use the large model").replace(
        "measure the gradient noise scale", "clip the gradients"
    )
    assert [f for f in _findings(features) if f[0] == "TP201"] == [("TP201", 19), ("TP201", 21)]


# The shape of ssd.pytorch (MIT): train.py builds ``criterion = MultiBoxLoss(...)``, imported
# from a package whose __init__ only re-exports it, and calls it every step; its forward builds
# the targets with the first API's typed constructors and selects with reshaped masks.
SSD_TRAIN = """
import torch
from torch.autograd import Variable
from layers.modules import MultiBoxLoss

net = build_ssd("train", 300, 21).cuda()
criterion = MultiBoxLoss(21, 0.5, True, 0, True, 3, 0.5, False, True)
optimizer = torch.optim.SGD(net.parameters(), lr=1e-3)
for images, targets in data_loader:
    images = Variable(images.cuda())
    out = net(images)
    optimizer.zero_grad()
    loss_l, loss_c = criterion(out, targets)
    loss = loss_l + loss_c
    loss.backward()
    optimizer.step()
"""
SSD_LOSS = """
import torch
import torch.nn as nn
from torch.autograd import Variable


class MultiBoxLoss(nn.Module):
    def forward(self, predictions, targets):
        loc_data, conf_data = predictions
        conf_t = torch.LongTensor(loc_data.size(0), loc_data.size(1))
        fill(targets, conf_t)
        conf_t = Variable(conf_t.cuda(), requires_grad=False)
        pos = conf_t > 0
        pos_idx = pos.unsqueeze(pos.dim()).expand_as(loc_data)
        loc_p = loc_data[pos_idx].view(-1, 4)
        neg = rank(conf_data) < 3
        conf_p = conf_data[(pos + neg).gt(0)]
        return loc_p.sum(), conf_p.sum()
"""


def test_a_class_a_package_re_exports_is_followed_to_its_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_project(
        tmp_path,
        {
            "layers/__init__.py": "from .modules import *\n",
            "layers/modules/__init__.py": "from .multibox_loss import MultiBoxLoss\n",
            "layers/modules/multibox_loss.py": SSD_LOSS,
            "train.py": SSD_TRAIN,
        },
    )
    main(["lint", "--format", "json", "."])
    found = {(f["path"], f["line"], f["code"]) for f in json.loads(capsys.readouterr().out)}
    loss = "layers/modules/multibox_loss.py"
    # a mask reshaped (unsqueeze, expand_as) still selects by value; so does ``.gt(0)`` of a sum
    # of masks; conf_t is a tensor through LongTensor, .cuda() and Variable
    assert {(loss, 15, "TP203"), (loss, 17, "TP203")} <= found
    # Renamed on re-export, the class keeps its own name in its module
    (tmp_path / "layers" / "modules" / "__init__.py").write_text(
        "from .multibox_loss import MultiBoxLoss as Criterion\n"
    )
    (tmp_path / "train.py").write_text(
        textwrap.dedent(SSD_TRAIN)
        .replace("from layers.modules import MultiBoxLoss", "from layers.modules import Criterion")
        .replace("criterion = MultiBoxLoss(", "criterion = Criterion(")
    )
    main(["lint", "--format", "json", "."])
    found = {(f["path"], f["line"], f["code"]) for f in json.loads(capsys.readouterr().out)}
    assert {(loss, 15, "TP203"), (loss, 17, "TP203")} <= found


def test_a_masked_augmented_assignment_reads_the_selection():
    # Rainbow's target projection: ``l[(u > 0) * (l == u)] -= 1`` reads l[mask] first; a plain
    # masked write (a masked fill) does not select
    source = """
    import torch

    model = build_model().cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for x, y in loader:
        b = torch.sigmoid(model(x.cuda())) * 50
        l, u = b.floor().long(), b.ceil().long()
        l[(u > 0) * (l == u)] -= 1
        u[(u > 0) * (l == u)] = 0
        loss = (b - l.float()).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert [f for f in _findings(source) if f[0] == "TP203"] == [("TP203", 9)]


def test_a_conv_net_built_through_an_imported_module_needs_the_autotuner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # k-diffusion (MIT): train.py calls K.config.make_model(config), whose config.py builds
    # models.ImageDenoiserModelV1 (``from . import models``; the subpackage re-exports the conv
    # U-Net of image_v1.py) for one configuration type and transformers for the others
    monkeypatch.chdir(tmp_path)
    pkg = tmp_path / "kdiff"
    (pkg / "models").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import config, models\n")
    (pkg / "models" / "__init__.py").write_text("from .image_v1 import ImageDenoiserModelV1\n")
    (pkg / "models" / "image_v1.py").write_text(
        "from torch import nn\n\n\n"
        "class ImageDenoiserModelV1(nn.Module):\n"
        "    def __init__(self, c_in, width):\n"
        "        super().__init__()\n"
        "        self.proj_in = nn.Conv2d(c_in, width, 3, padding=1)\n"
    )
    (pkg / "config.py").write_text(
        "from . import models\n\n\n"
        "def make_model(config):\n"
        "    if config['type'] == 'image_v1':\n"
        "        return models.ImageDenoiserModelV1(config['c_in'], config['width'])\n"
        "    return models.Transformer(config)\n"
    )
    train = (
        "import torch\nimport kdiff as K\n\n"
        "inner_model = K.config.make_model(config)\n"
        "model = inner_model.cuda()\n"
        "opt = torch.optim.AdamW(model.parameters())\n"
        "for x in loader:\n"
        "    loss = model(x.cuda()).mean()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    (tmp_path / "train.py").write_text(train)
    main(["lint", "--format", "json", "--select", "TP303", "train.py"])
    found = {(f["path"], f["line"]) for f in json.loads(capsys.readouterr().out)}
    assert found == {("train.py", 4)}
    # a module of the project that builds no convolution leaves it alone
    (pkg / "models" / "image_v1.py").write_text(
        (pkg / "models" / "image_v1.py")
        .read_text()
        .replace("nn.Conv2d(c_in, width, 3, padding=1)", "nn.Linear(c_in, width)")
    )
    main(["lint", "--format", "json", "--select", "TP303", "train.py"])
    assert json.loads(capsys.readouterr().out) == []
