"""Classes of findings judged on change-38 (issue 32), each cut from the code it was seen in and
checked the other way round: what a GPU training run does is still reported."""

from __future__ import annotations

from lint_findings import findings

# PyTorch-FastCampus's notebooks set ``num_epoch = 1``: the loader is iterated once a run, so its
# two workers start once whatever persistent_workers says. Ten epochs, or an option's default
# that a run may raise, re-iterate it.
ONE_EPOCH = """
import torch
import torchvision

train_loader = torch.utils.data.DataLoader(
    torchvision.datasets.MNIST("./", train=True), batch_size=16, shuffle=True, num_workers=2
)
model = torch.nn.Linear(784, 10).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
{epochs}
for i in range(num_epoch):
    for j, (image, label) in enumerate(train_loader):
        loss = torch.nn.functional.cross_entropy(model(image.view(-1, 784).cuda()), label.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_loader_iterated_by_an_epoch_loop_that_runs_once_restarts_nothing() -> None:
    assert findings(ONE_EPOCH.format(epochs="num_epoch = 1"), "TP104") == []
    assert findings(ONE_EPOCH.format(epochs="num_epoch = 10"), "TP104") == [("TP104", 5)]
    option = (
        "import argparse\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--num_epoch', type=int, default=1)\n"
        "num_epoch = parser.parse_args().num_epoch"
    )
    assert findings(ONE_EPOCH.format(epochs=option), "TP104") == [("TP104", 5)]


# PyTorch-FastCampus's InfoGAN and CAM notebooks: DataParallel on one device (device_ids=[0], or
# CUDA_VISIBLE_DEVICES set to one GPU before torch starts) only calls the module.
ONE_DEVICE = """
import os
{environ}
import torch
import torch.nn as nn

generator = nn.DataParallel(Generator(){ids}).cuda()
optimizer = torch.optim.Adam(generator.parameters())
for z in loader:
    loss = generator(z.cuda()).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_data_parallel_on_one_device_is_left_alone_and_on_several_reported() -> None:
    def tp501(environ: str, ids: str) -> list[tuple[str, int]]:
        return findings(ONE_DEVICE.format(environ=environ, ids=ids), "TP501")

    assert tp501("", ", device_ids=[0]") == []
    assert tp501("os.environ['CUDA_VISIBLE_DEVICES'] = '0'", "") == []
    assert tp501("", ", device_ids=[0, 1]") == [("TP501", 7)]
    assert tp501("os.environ['CUDA_VISIBLE_DEVICES'] = '0,1'", "") == [("TP501", 7)]
    assert tp501("", "") == [("TP501", 7)]


# FastSpeech 2's (ESPnet's) positional encoding: ``extend_pe`` returns early while the kept
# table is long enough, so the table is built once, not every step. Without the early return
# it is built and copied on every call.
POSITIONAL = """
import torch

class PositionalEncoding(torch.nn.Module):
    def __init__(self, d_model, max_len=5000):
        super().__init__()
        self.d_model = d_model
        self.pe = None
        self.extend_pe(torch.tensor(0.0).expand(1, max_len))

    def extend_pe(self, x):
        if self.pe is not None:
            if self.pe.size(1) >= x.size(1):
                {kept}
        pe = torch.zeros(x.size(1), self.d_model)
        self.pe = pe.unsqueeze(0).to(device=x.device, dtype=x.dtype)

    def forward(self, x):
        self.extend_pe(x)
        return x + self.pe[:, : x.size(1)]
"""

LOOP = """
model = PositionalEncoding(256).cuda()
optimizer = torch.optim.Adam(model.parameters())
for x in loader:
    loss = model(x.cuda()).mean()
    loss.backward()
    optimizer.step()
"""


def test_a_table_a_module_keeps_and_returns_early_on_is_built_once() -> None:
    kept = POSITIONAL.format(kept="return")
    rebuilt = POSITIONAL.format(kept="pass")
    assert findings(kept, "TP207") == []  # the model file alone: its forward's code
    assert findings(rebuilt, "TP207") == [("TP207", 15)]
    assert findings(kept + LOOP, "TP207") == []  # a loop of the file runs the model
    assert findings(rebuilt + LOOP, "TP207") == [("TP207", 15)]


# GraphRNN sorts the loader's lengths and reads them with ``.numpy()``: a CUDA tensor's
# ``.numpy()`` raises, so what it reads is in host memory. The copy that waits is ``.cpu()``, and
# ``.numpy(force=True)`` copies from the device itself.
LENGTHS = """
import torch

rnn = Net().cuda()
optimizer = torch.optim.Adam(rnn.parameters())
for data in loader:
    y_len, sort_index = torch.sort(data["len"].cuda(), 0, descending=True)
    lengths = {read}
    loss = rnn(data["x"].cuda(), lengths).mean()
    loss.backward()
    optimizer.step()
"""


def test_numpy_reads_host_memory_and_the_copy_before_it_is_what_waits() -> None:
    assert findings(LENGTHS.format(read="y_len.numpy().tolist()"), "TP201") == []
    assert findings(LENGTHS.format(read="y_len.cpu().numpy().tolist()"), "TP201") == [("TP201", 8)]
    assert findings(LENGTHS.format(read="y_len.numpy(force=True)"), "TP201") == [("TP201", 8)]


# PyTorch-FastCampus's DCGAN and InfoGAN: a transposed convolution with its default bias straight
# into a BatchNorm, and the same pair named in an OrderedDict; a conv followed by a ReLU first,
# or with bias=False, is left alone.
GENERATOR = """
from collections import OrderedDict

import torch
import torch.nn as nn

class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Sequential(
            nn.ConvTranspose2d(100, 256, 4, 1, 0{bias}),
            nn.BatchNorm2d(256),
            nn.ReLU(),
        )
        self.down = nn.Sequential(OrderedDict([
            ("conv1", nn.Conv2d(256, 64, 3, padding=1{bias})),
            ("bn1", nn.BatchNorm2d(64)),
            ("conv2", nn.Conv2d(64, 64, 3, padding=1)),
            ("relu2", nn.ReLU()),
            ("bn2", nn.BatchNorm2d(64)),
        ]))

    def forward(self, z):
        return self.down(self.up(z))
"""


def test_a_transposed_conv_or_a_named_pair_before_batchnorm_keeps_a_cancelled_bias() -> None:
    assert findings(GENERATOR.format(bias=""), "TP401") == [("TP401", 11), ("TP401", 16)]
    assert findings(GENERATOR.format(bias=", bias=False"), "TP401") == []


# Stability AI's generative-models: a Lightning data module whose file ends in a demo
# ``__main__`` that only shows a sample; the Trainer trains from ``train_dataloader()``. A file
# of the same shape whose method no framework calls to train is an offline script.
DATA_MODULE = """
import pytorch_lightning as pl
import torchvision
from torch.utils.data import DataLoader

class MNISTLoader(pl.LightningDataModule):
    def __init__(self, batch_size=8, num_workers=1):
        super().__init__()
        self.batch_size, self.num_workers = batch_size, num_workers
        self.train_dataset = torchvision.datasets.MNIST(".", train=True)

    def {hook}(self):
        return DataLoader(self.train_dataset, batch_size=self.batch_size,
                          shuffle=True, num_workers=self.num_workers)

if __name__ == "__main__":
    ex = torchvision.datasets.MNIST(".", train=False)[0]
    print(ex[0].size)
"""


def test_a_lightning_data_module_with_a_demo_main_still_feeds_training() -> None:
    assert findings(DATA_MODULE.format(hook="train_dataloader"), "TP104") == [("TP104", 13)]
    assert findings(DATA_MODULE.format(hook="load_samples"), "TP104") == []
