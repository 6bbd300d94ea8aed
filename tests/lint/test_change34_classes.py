"""Classes change-34 showed, fixed in general (issue 32, the twenty-fifth session). Each fixture
has the shape of the code a judge read, shortened and renamed; each test fails on the rules
before the change, and the controls hold on both."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_findings import findings, project_findings

# OpenAI's diffusion trainers (improved-diffusion, guided-diffusion, consistency models) have
# their own 16-bit path: a flag makes a half copy of the model with float32 master weights and
# loss scaling. The training loop's file only calls that machinery, by a name that says so.
TRAINER = """
import torch
from .fp16_util import MixedPrecisionTrainer


class TrainLoop:
    def __init__(self, model, data, lr, use_fp16=False):
        self.model = model.to("cuda")
        self.data = data
        self.mp_trainer = {machinery}
        self.opt = torch.optim.AdamW(self.mp_trainer.master_params, lr=lr)

    def run_loop(self):
        for batch in self.data:
            self.mp_trainer.zero_grad()
            loss = self.model(batch.to("cuda")).mean()
            self.mp_trainer.backward(loss)
            self.mp_trainer.optimize(self.opt)
"""


def test_the_projects_own_mixed_precision_trainer_manages_precision() -> None:
    machinery = "MixedPrecisionTrainer(model=self.model, use_fp16=use_fp16)"
    assert findings(TRAINER.format(machinery=machinery), "TP302") == []
    converted = "Master(self.model)\n        if use_fp16:\n            self.model.convert_to_fp16()"
    assert findings(TRAINER.format(machinery=converted), "TP302") == []


def test_a_name_that_only_contains_the_letters_is_not_machinery() -> None:
    # ``sample``, ``clamp``, ``example`` hold "amp" but not as a word
    # and ``is_bf16_supported`` asks a question
    for name in (
        "SampleTrainer",
        "clamp_trainer",
        "ExampleWrapper",
        "torch.cuda.is_bf16_supported",
    ):
        source = TRAINER.format(machinery=f"{name}(model=self.model)")
        assert findings(source, "TP302") == [("TP302", 14)]


# YOLO's End2End export wrapper: an autograd Function whose forward makes placeholder
# detections while ONNX traces it, and whose ``symbolic`` is the exported op.
NMS = """
import torch
import torch.nn as nn


class FakeNMS(torch.autograd.Function):
    @staticmethod
    def forward(ctx, boxes, scores):
        device = boxes.device
        num = torch.randint(0, 100, (1,)).item()
        idxs = torch.arange(100, 100 + num).to(device)
        return torch.cat([idxs, idxs], 0)
{symbolic}

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8).to("cuda")

    def forward(self, x):
        return FakeNMS.apply(self.proj(x), x)
"""

SYMBOLIC = """
    @staticmethod
    def symbolic(g, boxes, scores):
        return g.op("NonMaxSuppression", boxes, scores)
"""


def test_an_autograd_function_with_an_onnx_symbolic_is_an_export_stub() -> None:
    assert findings(NMS.format(symbolic=SYMBOLIC), "TP207") == []
    assert findings(NMS.format(symbolic=""), "TP207") == [("TP207", 11)]


def test_a_folder_named_for_export_holds_no_training_forward(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = NMS.format(symbolic="")
    exported = {"onnxexport/model_onnx.py": source}
    every = "--include-unreferenced"  # the fixture's classes are a library's: nothing names them
    assert project_findings(tmp_path / "a", exported, "TP207", capsys, every) == []
    model = {"models/common.py": source}
    found = project_findings(tmp_path / "b", model, "TP207", capsys, every)
    assert [(Path(f["path"]).name, f["line"]) for f in found] == [("common.py", 11)]


# A course's log-linear language model: embedding tables and a bias, run by a helper the loop
# calls, not by the loop itself; the helper's own names (a loss's result) are not models.
LOGLINEAR = """
import torch
import torch.nn as nn

device = "cuda" if torch.cuda.is_available() else "cpu"


class LogLinear(nn.Module):
    def __init__(self, words, n):
        super().__init__()
        self.embeddings = nn.ModuleList([nn.Embedding(words, words) for _ in range(n)])
        self.bias = torch.zeros(words, requires_grad=True).to(device)

    def forward(self, x):
        embs = torch.cat([lookup(x) for x, lookup in zip(x.T, self.embeddings)])
        return embs.sum(dim=0) + self.bias


model = LogLinear(10000, 2).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
criterion = torch.nn.CrossEntropyLoss()


def sentence_loss(sent):
    logits = model(torch.LongTensor(sent[:-1]).to(device))
    res = criterion(logits, torch.LongTensor(sent[1:]).to(device))
    return res


for sent in train_data:
    loss = sentence_loss(sent)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_embedding_tables_run_by_a_helper_need_no_autocast() -> None:
    assert findings(LOGLINEAR, "TP302") == []


def test_a_layer_run_by_the_helper_still_needs_it() -> None:
    source = LOGLINEAR.replace(
        "model = LogLinear(10000, 2).to(device)", "model = nn.Linear(10000, 10000).to(device)"
    )
    assert findings(source, "TP302") == [("TP302", 30)]


# A script that plays or evaluates a trained model on a device it names the CPU: moving the
# model to that name shows no GPU run (recurrent PPO's enjoy.py, a tutorial's CPU default).
CPU_EVALUATION = """
import torch

device = {device}
model = torch.load("model.pt")
model.to(device)
model.eval()
correct = 0
for x, y in loader:
    out = model(x.to(device))
    correct += (out.argmax(1) == y.to(device)).sum()
"""


def test_a_device_named_the_cpu_is_no_gpu_run() -> None:
    assert findings(CPU_EVALUATION.format(device='torch.device("cpu")'), "TP403") == []
    assert findings(CPU_EVALUATION.format(device='"cpu"'), "TP403") == []
    assert findings(CPU_EVALUATION.format(device='torch.device("cuda")'), "TP403") == [("TP403", 9)]


def test_a_name_bound_to_the_cpu_once_and_a_gpu_elsewhere_is_a_device() -> None:
    source = CPU_EVALUATION.format(device='torch.device("cpu")') + 'device = "cuda:0"\n'
    assert findings(source, "TP403") == [("TP403", 9)]
