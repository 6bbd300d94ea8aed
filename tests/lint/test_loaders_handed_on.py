"""Loaders a training function reaches though this file's loops over them only peek (issue 32,
the twenty-sixth session): dataflowr's DDPM notebooks show a first batch (``for b in
dataloader: break``), then hand the loader to ``training_loop(model, dataloader, ...)``, whose
epoch loop re-iterates it; pytorch-cifar100's ``def train(epoch):`` iterates the loader its
``__main__`` block binds, as a global. The fixtures have the shape of that code, shortened and
renamed; each test fails on the rules before the change, and the controls hold on both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lint_findings import findings, project_findings

PEEKED = """
import torch
import torchvision

device = "cuda"


def training_loop(model, dataloader, optimizer, num_epochs):
    for epoch in range(num_epochs):
        for step, batch in enumerate(dataloader):
            batch = batch[0].to(device)
            loss = model(batch).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


dataset = torchvision.datasets.MNIST(root="data", train=True, transform=transform)
dataloader = torch.utils.data.DataLoader(dataset, batch_size=4096, shuffle=True, num_workers=10)
for b in dataloader:
    batch = b[0]
    break
model = Net().to(device)
optimizer = torch.optim.Adam(model.parameters())
{call}
"""


def test_a_loader_peeked_at_then_handed_to_training_feeds_training() -> None:
    trained = PEEKED.format(call="training_loop(model, dataloader, optimizer, 50)")
    assert findings(trained, "TP104") == [("TP104", 19)]
    assert findings(trained, "TP102") == [("TP102", 19)]


def test_a_loader_only_peeked_at_or_evaluated_does_not() -> None:
    assert findings(PEEKED.format(call="pass"), "TP104") == []
    evaluated = PEEKED.format(call="evaluate(model, dataloader)")
    assert findings(evaluated, "TP104") == []


GLOBAL = """
import torch
from torch.utils.data import DataLoader


def train(epoch):
    net.train()
    for images, labels in training_loader:
        images, labels = images.cuda(), labels.cuda()
        optimizer.zero_grad()
        loss = loss_function(net(images), labels)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    net = ResNet18().cuda()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    training_loader = {loader}
    for epoch in range(1, 200):
        train(epoch)
"""


UTILS = """
import torchvision
from torch.utils.data import DataLoader


def get_training_dataloader(batch_size=16, num_workers=2, shuffle=True):
    training = torchvision.datasets.CIFAR100(root="./data", train=True, transform=t)
    training_loader = DataLoader(
        training, shuffle=shuffle, num_workers=num_workers, batch_size=batch_size
    )
    return training_loader
"""
FACTORY = "get_training_dataloader(num_workers=4, batch_size=128)"


def _lines(found: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(Path(f["path"]).name, f["line"]) for f in found]


def test_a_global_loader_a_function_iterates_every_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = "from utils import get_training_dataloader\n" + GLOBAL.format(loader=FACTORY)
    files = {"utils.py": UTILS, "train.py": script}
    assert _lines(project_findings(tmp_path, files, "TP104", capsys)) == [("utils.py", 8)]


def test_a_loader_the_function_binds_itself_is_not_the_global(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local = GLOBAL.replace(
        "    net.train()\n", "    net.train()\n    training_loader = make_loader()\n"
    )
    script = "from utils import get_training_dataloader\n" + local.format(loader=FACTORY)
    files = {"utils.py": UTILS, "train.py": script}
    assert _lines(project_findings(tmp_path, files, "TP104", capsys)) == []
