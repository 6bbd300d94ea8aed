"""False classes issue 32's fourteenth change set showed in a course's notebooks
(dataflowr/notebooks, judged before any rule changed against it), fixed in the fifteenth
session. Each fixture has the shape of the code a judge read, shortened and renamed; each test
fails on the rules before the change and keeps the finding where the shape differs in what
matters."""

from __future__ import annotations

import ast

from lint_findings import findings
from test_notebooks import _notebook  # the notebook fixture of the notebook tests

from torchpace.lint import RULES, FileResult, lint_source
from torchpace.lint.engine import context

# Transfer learning in a course's first module (MIT): the VGG trunk's features are computed once
# over the loader and kept on the host; a classifier head is trained on them later.
FEATURES = """
import numpy as np
import torch
import torchvision.models as models
from torch.utils.data import DataLoader

device = torch.device("cuda")
model_vgg = models.vgg16(weights=None).to(device)
loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)


def preconvfeat(dataloader):
    conv_features = []
    labels_list = []
    for inputs, labels in dataloader:
        inputs = inputs.to(device)
        x = model_vgg.features(inputs)
        conv_features.extend(x.data.cpu().numpy())
        labels_list.extend(labels.data.cpu().numpy())
    return np.concatenate([[f] for f in conv_features]), labels_list


features, labels = preconvfeat(loader)
"""


def test_a_loop_that_only_runs_a_model_forward_is_not_a_training_step() -> None:
    # Feature extraction: the host reads are the loop's output, not a sync inside a step.
    assert findings(FEATURES, "TP201") == []
    # A call lint cannot see into may train: the loop stays a step loop, its reads reported.
    hidden = FEATURES.replace(
        "        x = model_vgg.features(inputs)\n",
        "        x = model_vgg.features(inputs)\n        train_head(x, labels)\n",
    )
    assert [c for c, _ in findings(hidden, "TP201")] == ["TP201"]  # x; labels stay on the host


# Collaborative filtering (the same course): a dot model of embedding tables, whose tables are a
# subclass of nn.Embedding that only rescales its initial weights.
DOT = """
import torch
import torch.nn as nn


class ScaledEmbedding(nn.Embedding):
    def reset_parameters(self):
        self.weight.data.normal_(0, 1.0 / self.embedding_dim)


class DotModel(nn.Module):
    def __init__(self, num_users, num_items, dim=32):
        super().__init__()
        self.user = ScaledEmbedding(num_users, dim)
        self.item = {item}(num_items, dim)

    def forward(self, u, i):
        return (self.user(u) * self.item(i)).sum(1)


device = torch.device("cuda")
net = DotModel(n_users, n_items).to(device)
optimizer = torch.optim.Adam(net.parameters(), lr=0.1)
for e in range(15):
    loss = ((net(users, items) - ratings) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_model_of_embedding_subclasses_has_nothing_for_autocast() -> None:
    assert findings(DOT.format(item="ScaledEmbedding"), "TP302") == []
    # A linear layer beside them has a matrix product to cast.
    assert [c for c, _ in findings(DOT.format(item="nn.Linear"), "TP302")] == ["TP302"]


# The course's GPT notebook: the dataset is a Python list of encoded sequences and their labels,
# made before the loader exists; the loader only indexes it and stacks the tensors.
LISTS = """
import torch

device = torch.device("cuda")


def make_inputs(rows):
    return [torch.tensor(r) for r in rows]


def make_loader(rows):
    inputs = make_inputs(rows)
    labels = [x.sum() for x in inputs]
    dataset = {dataset}
    return torch.utils.data.DataLoader(dataset, batch_size=128, shuffle=True{extra})


loader = make_loader(rows)
model = build_model().to(device)
optimizer = torch.optim.Adam(model.parameters())
for x, y in loader:
    loss = model(x.to(device), y.to(device))
    loss.backward()
    optimizer.step()
"""


def test_a_loader_over_a_python_list_in_memory_needs_no_workers() -> None:
    for dataset in ("list(zip(inputs, labels))", "inputs[:100] + labels[:100]"):
        assert findings(LISTS.format(dataset=dataset, extra=""), "TP101") == [], dataset
    # A collate function may read what the items name (paths): that loader is still reported.
    collated = LISTS.format(dataset="list(zip(inputs, labels))", extra=", collate_fn=load")
    assert [c for c, _ in findings(collated, "TP101")] == ["TP101"]
    # A dataset class of a library is not a list in memory.
    folder = LISTS.format(dataset="ImageFolder(root)", extra="")
    assert [c for c, _ in findings(folder, "TP101")] == ["TP101"]


def test_a_tensor_cast_and_bound_again_by_a_later_cell_is_still_in_memory() -> None:
    nb = _notebook(
        ("code", "import torch\nfrom torch.utils.data import DataLoader\n"),
        ("code", "data = torch.randn(10, 2)\n"),
        (
            "code",
            "data = torch.from_numpy(points).type(torch.float32)\n"
            "loader = DataLoader(data, batch_size=100, shuffle=True)\n",
        ),
        ("code", "model = Energy().cuda()\nopt = torch.optim.Adam(model.parameters())\n"),
        ("code", "for x in loader:\n    model(x.cuda()).mean().backward()\n    opt.step()\n"),
    )
    result = lint_source("energy.ipynb", nb, RULES)
    assert isinstance(result, FileResult), result
    assert [f.code for f in result.findings if f.code == "TP101"] == []


def _notebook_codes(*cells: str) -> list[str]:
    result = lint_source("course.ipynb", _notebook(*(("code", c) for c in cells)), RULES)
    assert isinstance(result, FileResult), result
    return sorted({f.code for f in result.findings})


# The course's batch-norm notebook: a settings object picks CUDA when there is one, and nothing
# reads that field again; the nets and batches stay on the CPU.
_SETTINGS = """
import torch
from torch.utils.data import DataLoader


class ExperimentParams:
    def __init__(self):
        self.batch_size = 64
        self.num_workers = 4
        self.device = "cuda" if torch.cuda.is_available() else "cpu"


args = ExperimentParams()
"""
_TRAIN = """
loader = DataLoader(dataset, batch_size=args.batch_size, num_workers=args.num_workers)
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(net(x{move}), y{move})
    loss.backward()
    opt.step()
"""


def test_a_notebook_settings_device_that_nothing_reads_leaves_the_run_on_the_cpu() -> None:
    cpu = _notebook_codes(_SETTINGS, _TRAIN.format(move=""))
    assert not {"TP102", "TP104", "TP302"} & set(cpu), cpu
    # Read where the batches go, it is the run's device.
    gpu = _notebook_codes(_SETTINGS, _TRAIN.format(move=".to(args.device)"))
    assert {"TP102", "TP302"} <= set(gpu), gpu


# The course's plotting helper: the loader's images, never moved, are read back on the host.
RAW = """
import numpy as np
import torch

device = torch.device("cuda")


def get_raw_images(dataloader, mean=0.1307, std=0.3081):
    raw = np.zeros((len(dataloader.dataset), 1, 28, 28))
    k = 0
    for input, target in dataloader:
        raw[k : k + len(input)] = (input{move} * std + mean).data.cpu().numpy()
        k += len(input)
    return raw


images = get_raw_images(train_loader)
"""


def test_a_loop_that_reads_batches_on_the_host_and_moves_nothing_is_not_a_step() -> None:
    assert findings(RAW.format(move=""), "TP201") == []
    # Moved to the device and read back, each batch waits for the copy: still reported.
    assert [c for c, _ in findings(RAW.format(move=".to(device)"), "TP201")] == ["TP201"]


def test_a_loop_that_hands_its_batches_on_stays_a_step_loop() -> None:
    source = b"def cycle(dl):\n    while True:\n        for data in dl:\n            yield data\n"
    facts = context("t.py", source, ast.parse(source)).loops
    assert [loop.lineno for loop in facts.step_loops] == [3]
    assert facts.eval_loops == []


# The seq2seq tutorial's training step (the course's copy): without teacher forcing, the decoder
# runs until it predicts the end-of-sentence token.
GREEDY = """
import random
import torch

device = torch.device("cuda")


def train_pair(src, tgt, encoder, decoder, enc_opt, dec_opt, criterion):
    enc_opt.zero_grad()
    dec_opt.zero_grad()
    loss = 0
    hidden = encoder(src)
    decoder_input = torch.tensor([[0]], device=device)
    for di in range(tgt.size(0)):
        out, hidden = decoder(decoder_input, hidden)
        topv, topi = out.topk(1)
        decoder_input = topi.squeeze().detach()
        loss += criterion(out, tgt[di])
        {test}
    loss.backward()
    enc_opt.step()
    dec_opt.step()
    return loss


for src, tgt in pairs:
    train_pair(src.to(device), tgt.to(device), encoder, decoder, enc_opt, dec_opt, criterion)
"""


def test_a_read_that_ends_the_decoding_loop_is_needed() -> None:
    assert (
        findings(GREEDY.format(test="if decoder_input.item() == 1:\n            break"), "TP201")
        == []
    )
    # A read whose branch does more than leave the loop is reported.
    counted = "if decoder_input.item() == 1:\n            n += 1"
    assert [c for c, _ in findings(GREEDY.format(test=counted), "TP201")] == ["TP201"]


# pix2pix's trainer (eriklindernoren/PyTorch-GAN, MIT), shortened: one image pair a step.
PAIRS = """
import argparse
import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default={size})
opt = parser.parse_args()
device = torch.device("cuda")
loader = DataLoader(ImageDataset(root), batch_size=opt.batch_size, shuffle=True, num_workers=8)
for real_a, real_b in loader:
    loss = criterion(generator(real_a.to(device)), real_b.to(device))
    loss.backward()
    optimizer.step()
"""


def test_pinning_a_batch_of_a_few_items_is_left_alone() -> None:
    assert findings(PAIRS.format(size=1), "TP102") == []
    assert [c for c, _ in findings(PAIRS.format(size=64), "TP102")] == ["TP102"]
