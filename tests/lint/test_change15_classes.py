"""Classes issue 32's fifteenth change set showed (five repositories judged before any rule
changed against them: pixel RL, an LLM pre-training library, production detection, speech
synthesis, a beginner course). Each fixture has the shape of the code a judge read, shortened
and renamed; each test fails on the rules before the change."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_findings import findings, write_project

from torchpace.lint import RULES, FileResult, lint_source

# StyleTTS2's second-stage trainer (MIT): a subclass of nn.DataParallel that forwards attribute
# lookups to the wrapped module, around every model of the step.
SUBCLASS = """
import torch


class MyDataParallel(torch.nn.DataParallel):
    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.module, name)


model = {{key: MyDataParallel(build(key)) for key in ("decoder", "predictor")}}
optimizer = torch.optim.AdamW(params, lr=1e-4)
for batch in loader:
    loss = model["decoder"](batch).mean()
    loss.backward()
    optimizer.step()
"""


def test_a_subclass_of_data_parallel_is_data_parallel() -> None:
    line = (
        SUBCLASS.format()
        .splitlines()
        .index('model = {key: MyDataParallel(build(key)) for key in ("decoder", "predictor")}')
    )
    assert findings(SUBCLASS.format(), "TP501") == [("TP501", line + 1)]


# StyleTTS2's text aligner (Utils/ASR/models.py, MIT), shortened: the decoder's states are made
# on the host and moved to the memory's device in a method the forward calls, on every step. No
# training loop of this file calls the model: the trainers build it through a factory.
ALIGNER = """
import torch
import torch.nn as nn


class ASRS2S(nn.Module):
    def __init__(self, dim=512):
        super().__init__()
        self.dim = dim
        self.rnn = nn.LSTMCell(dim, dim)

    def initialize_decoder_states(self, memory):
        B, L, H = memory.shape
        self.decoder_hidden = torch.zeros((B, self.dim)).type_as(memory)

    def forward(self, memory, text_input):
        self.initialize_decoder_states(memory)
        {branch}
        return self.rnn(memory[:, 0], (self.decoder_hidden, self.decoder_hidden))

    @torch.no_grad()
    def infer(self, memory):
        return torch.zeros(memory.shape[0]).to(memory.device)
"""


def test_a_host_tensor_moved_in_a_models_forward_is_reported_without_a_loop() -> None:
    plain = ALIGNER.format(branch="pass")
    line = plain.splitlines().index(
        "        self.decoder_hidden = torch.zeros((B, self.dim)).type_as(memory)"
    )
    assert findings(plain, "TP207") == [("TP207", line + 1)]
    # What only evaluation runs (the else of `if self.training:`) is left alone.
    move = "m = torch.ones(3).to(memory.device)"
    evaluation = f"if self.training:\n            pass\n        else:\n            {move}"
    assert findings(ALIGNER.format(branch=evaluation), "TP207") == [("TP207", line + 1)]
    other = f"if not self.rnn.training:\n            {move}"  # another module's mode
    assert findings(ALIGNER.format(branch=other), "TP207") == [("TP207", line + 1)]
    # Built once and kept (lazy initialisation): not every step.
    cached = "if self.rel is None:\n            self.rel = torch.zeros(3).to(memory.device)"
    assert findings(ALIGNER.format(branch=cached), "TP207") == [("TP207", line + 1)]
    trained = f"if self.training:\n            {move}"
    assert len(findings(ALIGNER.format(branch=trained), "TP207")) == 2


# nanotron's trainer (Apache-2.0), shortened: the model is built in the configuration's dtype
# (bfloat16 by default), and a sanity check names a parameter that has no gradient.
NANOTRON = """
import torch


class Trainer:
    def __init__(self, config):
        self.config = config
        self.model = build_model(config.model.config, dtype={dtype}).to("cuda")
        self.optimizer = torch.optim.AdamW(self.model.parameters())

    def train(self, loader):
        for batch in loader:
            loss = self.model(batch["input_ids"].cuda()).mean()
            loss.backward()
            self.optimizer.step()
            for name, param in self.model.named_parameters():
                if param.is_tied:
                    name = param.get_tied_info().full_name()
                if param.grad is None:
                    log(f"{{name}} is missing gradient")
"""


def test_a_model_built_in_the_configurations_dtype_manages_its_precision() -> None:
    assert findings(NANOTRON.format(dtype="config.model.dtype"), "TP302") == []
    assert findings(NANOTRON.format(dtype="torch.bfloat16"), "TP302") == []
    assert [c for c, _ in findings(NANOTRON.format(dtype="torch.float32"), "TP302")] == ["TP302"]


def test_the_name_named_parameters_gives_is_a_string() -> None:
    assert findings(NANOTRON.format(dtype="config.model.dtype"), "TP202") == []


# YOLOX's head (Apache-2.0), shortened: in training its forward computes the loss, whose label
# assignment empties the allocator's cache for every image, and again when it runs out of memory.
HEAD = """
import torch
import torch.nn as nn


class YOLOXHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls = nn.Conv2d(256, 80, 1)

    def forward(self, xin, labels=None):
        out = self.cls(xin)
        if self.training:
            return self.get_losses(out, labels)
        return out

    def get_losses(self, out, labels):
        loss = 0
        for i in range(out.shape[0]):
            try:
                loss = loss + self.assign(out[i], labels[i])
            except RuntimeError:
                torch.cuda.empty_cache()
                loss = loss + self.assign(out[i].cpu(), labels[i].cpu())
            torch.cuda.empty_cache()
        return loss
"""


def test_empty_cache_in_a_models_forward_is_reported_but_not_in_an_error_handler() -> None:
    line = HEAD.splitlines().index("            torch.cuda.empty_cache()")
    assert findings(HEAD, "TP206") == [("TP206", line + 1)]


# glow-tts's trainer and collate function (MIT), shortened: each batch is padded to its own
# longest text and spectrogram, so the convolutions see a new length at almost every step.
COLLATE = """
class TextMelCollate:
    def __call__(self, batch):
        max_input_len = max(len(x[0]) for x in batch)
        max_target_len = max(x[1].size(1) for x in batch)
        return pad(batch, max_input_len, max_target_len)
"""
GLOW_TRAIN = """
import torch
from torch.utils.data import DataLoader
from data_utils import TextMelCollate

model = FlowGenerator().cuda()
conv = torch.nn.Conv1d(80, 192, 5)
optimizer = torch.optim.Adam(model.parameters())
train_loader = DataLoader(train_dataset, num_workers=8, collate_fn={collate})
for epoch in range(100):
    for x, y in train_loader:
        loss = model(x.cuda(), y.cuda()).mean()
        loss.backward()
        optimizer.step()
"""


def test_batches_padded_to_their_longest_item_change_shape_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, {"data_utils.py": COLLATE})
    padded = lint_source("train.py", GLOW_TRAIN.format(collate="TextMelCollate()").encode(), RULES)
    assert isinstance(padded, FileResult)
    assert [f.code for f in padded.findings if f.code == "TP303"] == []
    fixed = lint_source("train.py", GLOW_TRAIN.format(collate="None").encode(), RULES)
    assert isinstance(fixed, FileResult)
    assert [f.code for f in fixed.findings if f.code == "TP303"] == ["TP303"]
