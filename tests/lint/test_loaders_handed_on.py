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


# A factory whose ``num_workers`` defaults to 0, called with workers: rasbt's
# ``create_dataloader_v1(..., num_workers=0)`` called with ``num_workers=4`` in the same file;
# sovit-123's Faster R-CNN pipeline, whose train.py hands ``create_train_loader(dataset, batch,
# NUM_WORKERS)``'s loader to ``train_one_epoch`` of another file every epoch.
FACTORY_DEFAULT = """
import torch
from torch.utils.data import DataLoader


def create_loader(data, batch_size=4, shuffle=True, num_workers=0):
    return DataLoader(data, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers)


model = GPT().to("cuda")
optimizer = torch.optim.AdamW(model.parameters())
train_loader = create_loader(train_data, batch_size=8{given})
for epoch in range(10):
    for x, y in train_loader:
        loss = model(x.to("cuda"), y.to("cuda"))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_factory_default_of_no_workers_that_the_call_overrides_has_workers() -> None:
    assert findings(FACTORY_DEFAULT.format(given=", num_workers=4"), "TP104") == [("TP104", 7)]
    assert findings(FACTORY_DEFAULT.format(given=""), "TP104") == []
    assert findings(FACTORY_DEFAULT.format(given=", num_workers=0"), "TP104") == []


DATASETS = """
from torch.utils.data import DataLoader


def create_train_loader(train_dataset, batch_size, num_workers=0, batch_sampler=None):
    train_loader = DataLoader(
        train_dataset, batch_size=batch_size, num_workers=num_workers, sampler=batch_sampler
    )
    return train_loader
"""

ENGINE = """
def train_one_epoch(model, optimizer, data_loader, device):
    for images, targets in data_loader:
        loss = model(images.to(device), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

TRAIN = """
import torch
from datasets import create_train_loader
from engine import train_one_epoch

DEVICE = torch.device("cuda")
NUM_WORKERS = args["workers"]
model = build_model().to(DEVICE)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
train_loader = create_train_loader(train_dataset, 8, {workers})
for epoch in range(20):
    train_one_epoch(model, optimizer, train_loader, DEVICE)
"""


def test_a_factory_of_another_file_called_with_workers_for_every_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {"datasets.py": DATASETS, "engine.py": ENGINE}
    given = {**files, "train.py": TRAIN.format(workers="NUM_WORKERS")}
    assert _lines(project_findings(tmp_path, given, "TP104", capsys)) == [("datasets.py", 6)]


def test_the_same_factory_called_without_workers_has_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {"datasets.py": DATASETS, "engine.py": ENGINE}
    none = {**files, "train.py": TRAIN.format(workers="0")}
    assert _lines(project_findings(tmp_path, none, "TP104", capsys)) == []


# rasbt's training-speed scripts: every few steps ``evaluate_model(model, train_loader, ...)``
# reads batches of the loader the step loop is still iterating. Persistent workers keep one
# iterator, which that inner pass resets: the epoch restarts and never ends (checked by the
# judge on a 12-item loader). Barlow Twins hands its loader to a function that only takes its
# length, which iterates nothing.
REENTERED = """
import torch
from torch.utils.data import DataLoader


def calc_loss_loader(data_loader, model, num_batches):
    total = 0.0
    for i, (x, y) in enumerate(data_loader):
        if i >= num_batches:
            break
        total += model(x.cuda(), y.cuda()).item()
    return total / num_batches


def evaluate_model(model, train_loader, val_loader, eval_iter):
    model.eval()
    with torch.no_grad():
        train_loss = calc_loss_loader(train_loader, model, eval_iter)
        val_loss = calc_loss_loader(val_loader, model, eval_iter)
    model.train()
    return train_loss, val_loss


def adjust_learning_rate(optimizer, loader, step):
    for group in optimizer.param_groups:
        group["lr"] = 0.1 * step / len(loader)


def train_model(model, train_loader, val_loader, optimizer, num_epochs):
    step = 0
    for epoch in range(num_epochs):
        for x, y in train_loader:
            loss = model(x.cuda(), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            {inside}


model = GPT().cuda()
optimizer = torch.optim.AdamW(model.parameters())
train_loader = DataLoader(train_set, batch_size=8, shuffle=True, num_workers=4)
val_loader = DataLoader(val_set, batch_size=8, num_workers=4)
train_model(model, train_loader, val_loader, optimizer, 10)
"""


def test_a_loader_iterated_again_inside_its_own_loop_keeps_its_workers_restarting() -> None:
    evaluated = (
        "if step % 5 == 0:\n                evaluate_model(model, train_loader, val_loader, 5)"
    )
    assert findings(REENTERED.format(inside=evaluated), "TP104") == []


def test_a_loader_handed_on_for_its_length_only_is_reported() -> None:
    length = "adjust_learning_rate(optimizer, train_loader, step)"
    assert findings(REENTERED.format(inside=length), "TP104") == [("TP104", 43)]
