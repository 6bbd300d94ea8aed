"""TP203 on an index whose name says it is a boolean mask (issue 32, the twenty-fifth session).

Change sets showed selections through a mask lint could not see being one: a head's ``x[mask]``
of what its ``forward`` is handed (SlowFast), a codebook loss's ``targets_k[mask_k]``
(stable-audio-tools), a trainer's ``inputs["input_ids"][mask_bool]`` (TRL), a graph example's
``out[data.train_mask]`` (ogb). Each fixture has the shape of the code a judge read, shortened
and renamed; each test fails on the rules before the change, and the controls hold on both."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_findings import findings, project_findings

# A node classifier trained full-batch: the graph, its labels and its split masks live on the
# device, and the loss selects the training nodes every step (a nonzero sync each time).
GRAPH = """
import torch
import torch.nn.functional as F
from torch_geometric.datasets import Planetoid
from torch_geometric.nn import GCNConv

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
dataset = Planetoid("data", "Cora")
data = dataset[0].to(device)


class Net(torch.nn.Module):
    def __init__(self, i, h, o):
        super().__init__()
        self.conv1 = GCNConv(i, h)
        self.conv2 = GCNConv(h, o)

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


model = Net(dataset.num_features, 256, dataset.num_classes).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)


def train():
    model.train()
    optimizer.zero_grad()
    out = model(data.x, data.edge_index)
    loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()
    return float(loss)


for epoch in range(200):
    train()
"""


def test_a_split_mask_of_the_moved_graph_is_a_mask() -> None:
    assert findings(GRAPH, "TP203") == [("TP203", 30)]


def test_an_index_tensor_named_like_a_split_is_not() -> None:
    # ``train_idx`` holds node indices: a gather, whose size the host knows
    assert findings(GRAPH.replace("train_mask", "train_idx"), "TP203") == []


# A loss in another file selects each codebook's valid tokens through a slice of the mask the
# training step hands it (stable-audio-tools' cross-entropy over codebooks).
CODEBOOKS = {
    "losses.py": """
        import torch.nn.functional as F


        def codebook_loss(logits, targets, mask):
            total = 0.0
            for k in range(logits.shape[1]):
                mask_k = mask[:, k]
                total = total + F.cross_entropy(logits[:, k][mask_k], targets[:, k][mask_k])
            return total
        """,
    "train.py": """
        import torch
        from losses import codebook_loss

        model = Model().cuda()
        optimizer = torch.optim.AdamW(model.parameters())
        for ids, targets, loss_mask in loader:
            ids, targets, loss_mask = ids.cuda(), targets.cuda(), loss_mask.cuda()
            loss = codebook_loss(model(ids), targets, loss_mask)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
}


def test_a_slice_of_a_mask_parameter_selects_through_a_mask(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = project_findings(tmp_path, CODEBOOKS, "TP203", capsys)
    assert {(Path(f["path"]).name, f["line"]) for f in found} == {("losses.py", 9)}


def test_names_of_indices_are_not_masks() -> None:
    # ``mask_idx`` and ``mask_token_id`` name positions, and a name the scope binds to indices
    # (``randperm``, ``nonzero``, ``.long()``) is not a mask whatever it is called
    source = """
import torch

model = Model().cuda()
optimizer = torch.optim.AdamW(model.parameters())
for batch, mask_idx in loader:
    batch, mask_idx = batch.cuda(), mask_idx.cuda()
    out = model(batch)
    picked = batch[mask_idx]
    mask = torch.randperm(out.shape[0], device="cuda")[:16]
    kept = batch[mask]
    token = out[batch == 3]
    loss = picked.sum() + kept.sum() + token.sum()
    loss.backward()
    optimizer.step()
"""
    assert findings(source, "TP203") == [("TP203", 12)]


def test_a_mask_in_host_memory_is_not_waited_for() -> None:
    source = """
import torch

model = Model().cuda()
optimizer = torch.optim.AdamW(model.parameters())
for batch, train_mask in loader:
    out = model(batch.cuda())
    labels = batch[train_mask]
    loss = out.sum()
    loss.backward()
    optimizer.step()
"""
    assert findings(source, "TP203") == []


# A detection head selects the masked tokens of what its forward is handed; the trainer in
# another file moves the batch and calls the model each step.
HEAD = {
    "heads.py": """
        import torch.nn as nn


        class MaskedHead(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(768, 768)

            def forward(self, x, mask):
                x = x[mask]
                return self.proj(x)
        """,
    "train.py": """
        import torch
        from heads import MaskedHead

        model = MaskedHead().cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, mask in loader:
            out = model(x.cuda(), mask.cuda())
            out.sum().backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
}


def test_a_forwards_mask_parameter_selects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = project_findings(tmp_path, HEAD, "TP203", capsys)
    assert [(Path(f["path"]).name, f["line"]) for f in found] == [("heads.py", 11)]


def test_a_slice_of_indices_or_a_numpy_result_named_mask_is_not_a_mask() -> None:
    # GRACE's batched loss slices an arange; a speaker-verification loss indexes with np.where
    source = """
import numpy as np
import torch

model = Model().cuda()
optimizer = torch.optim.AdamW(model.parameters())
for z1 in loader:
    z1 = model(z1.cuda())
    indices = torch.arange(0, z1.size(0)).to(z1.device)
    mask = indices[0:256]
    picked = z1[mask]
    mask = np.where(keep)[0]
    kept = z1[mask]
    loss = picked.sum() + kept.sum()
    loss.backward()
    optimizer.step()
"""
    assert findings(source, "TP203") == []


# An epoch loop trains, then calls an evaluation named for it that puts the model in eval mode
# and reads accuracies, with autograd left on: its reads and selections are the evaluation's,
# once an epoch, not the step's (PyG's ARMA example).
EVALUATION = (
    GRAPH[: GRAPH.index("def train():")]
    + """def train():
    model.train()
    optimizer.zero_grad()
    out = model(data.x, data.edge_index)
    loss = F.nll_loss(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()


def test():
    model.eval()
    out, accs = model(data.x, data.edge_index), []
    for _, mask in data("train_mask", "val_mask", "test_mask"):
        pred = out[mask].argmax(1)
        accs.append(pred.eq(data.y[mask]).sum().item() / mask.sum().item())
    return accs


for epoch in range(1, 401):
    train()
    train_acc, val_acc, test_acc = test()
"""
)


def test_an_evaluation_left_with_autograd_on_is_still_the_evaluation() -> None:
    found = findings(EVALUATION)
    assert [line for code, line in found if code in ("TP201", "TP203")] == [30]
    probe = EVALUATION.replace("def test():", "def probe():").replace("= test()", "= probe()")
    assert [line for code, line in findings(probe) if code in ("TP201", "TP203")] == [
        30,
        39,
        40,
        40,
    ]


def test_a_function_named_for_evaluation_that_steps_is_training() -> None:
    source = EVALUATION.replace("def train():", "def validate_and_train():").replace(
        "    train()\n", "    validate_and_train()\n"
    )
    source = source.replace("model.train()", "model.eval()")
    assert ("TP203", 30) in findings(source)
