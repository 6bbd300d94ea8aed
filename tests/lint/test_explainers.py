"""Explainers are inference (issue 32, the twenty-sixth session): DIG's DeepLIFT, GNN-LRP,
GradCAM and GNNExplainer are modules whose ``forward`` puts the trained model they wrap in eval
mode, then attributes its prediction; notebooks call them in a loop over test graphs. change-36's
judges called the 16 findings in them false (export or inference). The fixtures have the shape of
that code, shortened and renamed; each test fails on the rules before the change, and the
controls hold on both."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_findings import findings, project_findings

EXPLAINER = """
import torch
import torch.nn as nn


class DeepLIFT(nn.Module):
    def __init__(self, model, device):
        super().__init__()
        self.model = model
        self.device = device

    def forward(self, x, edge_index, num_classes):
        self.model.eval()
        out = self.model(x, edge_index)
        labels = tuple(torch.tensor([label]).to(self.device) for label in range(num_classes))
        return [out[:, label] for label in labels]
"""

NOTEBOOK_LOOP = """
import torch
from explain.deeplift import DeepLIFT

device = torch.device("cuda")
model = GCN().to(device)
model.load_state_dict(torch.load("gcn.pt"))
explainer = DeepLIFT(model, device)
for data in loader:
    data = data.to(device)
    masks = explainer(data.x, data.edge_index, num_classes=2)
    collector.collect(masks)
"""


def test_an_explainers_forward_is_not_step_code() -> None:
    assert findings(EXPLAINER, "TP207") == []


def test_an_explainer_called_in_another_files_loop_is_not_step_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {"explain/__init__.py": "", "explain/deeplift.py": EXPLAINER, "run.py": NOTEBOOK_LOOP}
    assert project_findings(tmp_path, files, "TP207", capsys) == []


def test_a_forward_that_puts_its_module_back_in_training_is_step_code() -> None:
    trains = EXPLAINER.replace(
        "        return [out", "        self.model.train()\n        return [out"
    )
    assert findings(trains, "TP207") == [("TP207", 15)]
