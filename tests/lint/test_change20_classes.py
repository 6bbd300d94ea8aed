"""Classes the eighteenth session found in the judged corpus (issue 32), fixed in general. Each
fixture has the shape of the code a judge read, shortened and renamed; each test fails on the
rules before the change."""

from __future__ import annotations

import textwrap

import pytest
from lint_findings import findings

# PyTorch's DDP tutorial series: a Trainer class keeps the model it is handed in ``__init__``
# (moved, then wrapped in DDP), and the model comes from a builder that returns it in a tuple
# the caller unpacks. A toy ``Linear(20, 1)`` is launch-bound: autocast cannot pay (judged
# debatable three times); a wide model keeps the finding.
TRAINER = """
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader


class Trainer:
    def __init__(self, model, data, optimizer, gpu_id):
        self.gpu_id = gpu_id
        self.model = model.to(gpu_id)
        WRAP
        self.data = data
        self.optimizer = optimizer

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(source), targets)
        loss.backward()
        self.optimizer.step()

    def train(self, epochs):
        for epoch in range(epochs):
            for source, targets in self.data:
                self._run_batch(source.to(self.gpu_id), targets.to(self.gpu_id))


def load_train_objs():
    train_set = torch.utils.data.TensorDataset(torch.randn(2048, 20), torch.randn(2048, 1))
    model = MODEL
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    return train_set, model, optimizer


def main(epochs):
    dataset, model, optimizer = load_train_objs()
    data = DataLoader(dataset, batch_size=32, pin_memory=True, num_workers=2)
    trainer = Trainer(model, data, optimizer, torch.device("cuda"))
    trainer.train(epochs)


if __name__ == "__main__":
    main(10)
"""


@pytest.mark.parametrize("wrap", ["pass", "self.model = DDP(model, device_ids=[gpu_id])"])
@pytest.mark.parametrize(
    ("model", "reported"),
    [("torch.nn.Linear(20, 1)", False), ("torch.nn.Linear(4096, 4096)", True)],
)
def test_a_model_handed_to_a_trainer_class_from_a_builders_tuple_is_sized(
    wrap: str, model: str, reported: bool
) -> None:
    source = TRAINER.replace("WRAP", wrap).replace("MODEL", model)
    assert bool(findings(source, "TP302")) is reported


def test_a_name_bound_to_itself_through_aliases_stays_unknown() -> None:
    # ``a = b`` and ``b = a``: no size to read, so the loop keeps its finding.
    source = TRAINER.replace("WRAP", "pass").replace(
        "    model = MODEL\n", "    model = net\n    net = model\n"
    )
    assert findings(source, "TP302")


# PyTorch's tensor-parallel examples: the model is sharded by ``parallelize_module(module=...)``
# (or FSDP2's ``fully_shard``, or FSDP imported from its module), which returns the module it is
# given. A toy model stays a toy (judged debatable twice); a wide one keeps the finding.
SHARDED = """
import torch
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
IMPORT


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.in_proj = nn.Linear(10, WIDTH)
        self.mid = nn.Linear(WIDTH, WIDTH)
        self.out_proj = nn.Linear(WIDTH, 5)

    def forward(self, x):
        return self.out_proj(torch.relu(self.mid(torch.relu(self.in_proj(x)))))


mesh = init_device_mesh("cuda", (2,))
model = ToyModel().to("cuda")
model = SHARD
optimizer = torch.optim.AdamW(model.parameters(), lr=0.25)
for i in range(10):
    inp = torch.rand(20, 10, device="cuda")
    output = model(inp)
    output.sum().backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    ("imported", "shard"),
    [
        (
            "from torch.distributed.tensor.parallel import parallelize_module",
            "parallelize_module(module=model, device_mesh=mesh, parallelize_plan={})",
        ),
        ("from torch.distributed.fsdp import fully_shard", "fully_shard(model, mesh=mesh)"),
        (
            "from torch.distributed.fsdp.fully_sharded_data_parallel import "
            "FullyShardedDataParallel as FSDP",
            "FSDP(model)",
        ),
    ],
)
@pytest.mark.parametrize(("width", "reported"), [("32", False), ("2048", True)])
def test_a_sharded_model_is_the_model_it_shards(
    imported: str, shard: str, width: str, reported: bool
) -> None:
    source = SHARDED.replace("IMPORT", imported).replace("SHARD", shard).replace("WIDTH", width)
    assert bool(findings(source, "TP302")) is reported


# Knowledge distillation on MNIST and many scripts like it: the step calls a loss built where the
# file cannot read it (a library, another file). Named as a loss, it is sized as one (no
# weights), so the small MLP student decides (two findings judged false left); any other
# callable the file cannot read keeps the model unknown and the finding.
LOSS = """
import torch
import torch.nn as nn
from losses import build_loss

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).cuda()
NAME = build_loss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    x, y = torch.randn(64, 32).cuda(), torch.randint(0, 10, (64,)).cuda()
    loss = NAME(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    ("name", "reported"),
    [("criterion", False), ("loss_fn", False), ("criterion_pixel", False), ("head", True)],
)
def test_a_loss_built_out_of_sight_is_no_model(name: str, reported: bool) -> None:
    assert bool(findings(LOSS.replace("NAME", name), "TP302")) is reported


# Pointnet++'s part-segmentation trainer: the step reads ``correct.item()`` right after binding
# ``correct = pred.eq(target).cpu().sum()``, a host tensor (the sync is the ``.cpu()``); the
# same function's evaluation later binds ``correct = np.sum(...)``. The binding that reaches the
# read decides (one finding judged false left); a device tensor there keeps the finding.
POINTNET = """
import numpy as np
import torch
from models import PartSegNet

model = PartSegNet().cuda()
optimizer = torch.optim.Adam(model.parameters())
loader = torch.utils.data.DataLoader(dataset, batch_size=16, num_workers=4, pin_memory=True)


def main():
    for epoch in range(10):
        accuracies = []
        model.train()
        for points, target in loader:
            points, target = points.cuda(), target.cuda()
            pred = model(points)
            CORRECT
            accuracies.append(correct.item() / len(target))
            loss = torch.nn.functional.nll_loss(pred, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            for points, target in loader:
                out = model(points.cuda()).argmax(1).cpu().numpy()
                correct = np.sum(out == target.numpy())


main()
"""


@pytest.mark.parametrize(
    ("correct", "item_reported"),
    [
        ("correct = pred.argmax(1).eq(target).cpu().sum()", False),
        ("correct = pred.argmax(1).eq(target).sum()", True),
    ],
)
def test_the_binding_that_reaches_a_read_says_whether_it_is_on_the_host(
    correct: str, item_reported: bool
) -> None:
    source = POINTNET.replace("CORRECT", correct)
    lines = [line for code, line in findings(source, "TP201")]
    item_line = 1 + next(
        i for i, text in enumerate(textwrap.dedent(source).splitlines()) if "correct.item()" in text
    )
    assert (item_line in lines) is item_reported


# Time-Series-Library's Koopa: a layer solves for its operator by least squares and, only where
# the solution went bad, replaces it with an identity built on the host and moved. A branch
# taken only on a NaN or an infinity is error recovery, not every step (four findings judged
# false left); a test that holds on good values keeps its body every step.
KOOPA = """
import torch
import torch.nn as nn

device = torch.device("cuda")


class KPLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(96, 96)

    def forward(self, z):
        self.K = torch.linalg.lstsq(z[:, :-1], z[:, 1:]).solution
        if TEST:
            self.K = torch.eye(self.K.shape[1]).unsqueeze(0).repeat(z.shape[0], 1, 1).to(z.device)
        return self.proj(torch.bmm(z, self.K))
"""


@pytest.mark.parametrize(
    ("test", "reported"),
    [
        ("torch.isnan(self.K).any()", False),
        ("not torch.isfinite(self.K).all()", False),
        ("(~torch.isfinite(self.K)).any() or torch.isinf(z).any()", False),
        ("torch.isfinite(self.K).all()", True),
        ("not torch.isnan(self.K).any()", True),
    ],
)
def test_a_branch_taken_only_on_bad_values_is_not_every_step(test: str, reported: bool) -> None:
    assert bool(findings(KOOPA.replace("TEST", test), "TP207")) is reported
