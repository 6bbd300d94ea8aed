"""Classes issue 32's twelfth change set showed (huggingface/peft's examples, rasbt's
deeplearning-models notebooks, CompVis/latent-diffusion, facebookresearch/SlowFast; judged before
any rule changed against it). Each fixture has the shape of the code it is cut from, shortened;
each test fails on the rules before the change and keeps the old answer where the shape differs
in what matters."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from lint_findings import findings as _findings
from lint_findings import write_project

from torchpace.cli import main

# The shape of PEFT's sequence-classification notebooks (Apache-2.0): a float32 model from
# Transformers, fine-tuned by a loop of the file's own on the device PEFT's helper picks.
FINE_TUNE = """
import torch
from torch.optim import AdamW
from peft.utils import infer_device
from transformers import AutoModelForSequenceClassification{imports}

device = infer_device()
model = AutoModelForSequenceClassification.from_pretrained("roberta-large"{load})
optimizer = AdamW(model.parameters(), lr=1e-3)


def train(loader):
    model.to(device)
    for epoch in range(3):
        model.train()
        for step, batch in enumerate(loader):
            batch.to(device)
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
"""


def _fine_tune(imports: str = "", load: str = "") -> str:
    return FINE_TUNE.format(imports=imports, load=load)


def test_a_float32_transformers_model_in_a_loop_of_the_files_own_gets_autocast_advice() -> None:
    assert _findings(_fine_tune(), "TP302") == [("TP302", 16)]


def test_transformers_still_manages_precision_through_its_trainer_or_a_reduced_load() -> None:
    # handed to the Trainer: TrainingArguments(bf16=True) decides
    assert _findings(_fine_tune(imports=", Trainer, TrainingArguments"), "TP302") == []
    # loaded quantized, or in a dtype of the model's own or an option's
    for load in (
        ", load_in_8bit=True",
        ", quantization_config=bnb",
        ', torch_dtype="auto"',
        ", torch_dtype=args.dtype",
    ):
        assert _findings(_fine_tune(load=load), "TP302") == [], load
    # float32, said out loud, is still float32; so is a model beside a dtype of other tensors
    assert _findings(_fine_tune(load=", torch_dtype=torch.float32"), "TP302") == [("TP302", 16)]
    ids = _fine_tune().replace(
        "optimizer = AdamW", "ids = torch.tensor([1], dtype=torch.long)\noptimizer = AdamW"
    )
    assert _findings(ids, "TP302") == [("TP302", 17)]


# The shape of rasbt's MNIST GAN notebooks (MIT): the generator's noise drawn on the host each
# step (an in-place fill of a host tensor), then copied; cuDNN's determinism asked for on every
# CUDA run.
GAN = """
import torch
from torch import nn

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
if torch.cuda.is_available():
    torch.backends.cudnn.deterministic = True

model = nn.Sequential(nn.Conv2d(1, 64, 3), nn.Flatten(), nn.LazyLinear(1)).to(device)
optimizer = torch.optim.Adam(model.parameters())


def train(loader, latent):
    for epoch in range(10):
        for features, targets in loader:
            features = features.to(device)
            z = torch.zeros((targets.size(0), latent)).uniform_(-1.0, 1.0).to(device)
            w = torch.empty(targets.size(0)).normal_().to(device)
            loss = model(features).mean() + (z.sum() + w.sum()) * 0
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_noise_filled_in_place_on_the_host_then_moved_is_found() -> None:
    assert _findings(GAN, "TP207") == [("TP207", 17), ("TP207", 18)]


def test_determinism_asked_for_under_a_cuda_check_decides_every_cuda_run() -> None:
    assert _findings(GAN, "TP303") == []
    # under a seeded-run branch it still decides only that case
    seeded = GAN.replace("if torch.cuda.is_available():", "if args.seed is not None:")
    assert _findings(seeded, "TP303") == [("TP303", 9)]


# The shape of PEFT's multitask prompt-tuning notebook (Apache-2.0): the loss tensor handed to a
# tqdm progress bar on every step.
POSTFIX = """
import torch
from tqdm import tqdm

device = "cuda"


def train(model, optimizer, loader):
    bar = tqdm(loader)
    for step, batch in enumerate(bar):
        batch = {k: v.to(device) for k, v in batch.items()}
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        bar.set_postfix(train_loss=loss)
        bar.set_postfix({"loss": loss})
        bar.set_postfix(step=step, lr=0.1)
        if step % 100 == 0:
            bar.set_postfix(train_loss=loss)
"""


def test_a_tensor_given_to_a_progress_bars_postfix_is_formatted_every_step() -> None:
    # numbers are formatted as numbers (line 18); a logging cadence gates the last (line 20)
    assert _findings(POSTFIX, "TP202") == [("TP202", 16), ("TP202", 17)]


# The shapes of latent-diffusion's AttnBlock and QKVAttentionLegacy and SlowFast's Non-local
# block (MIT, Apache-2.0): attention with the transpose done ahead (a permuted query), the head
# axis contracted in the middle of an einsum, and an einsum given its operands as one tuple.
ATTENTION = """
import torch
from torch import nn


class AttnBlock(nn.Module):
    def forward(self, q, k, v):
        b, c, h, w = q.shape
        q = q.reshape(b, c, h * w)
        q = q.permute(0, 2, 1)
        k = k.reshape(b, c, h * w)
        w_ = torch.bmm(q, k)
        w_ = w_ * (int(c) ** (-0.5))
        w_ = torch.nn.functional.softmax(w_, dim=2)
        v = v.reshape(b, c, h * w)
        w_ = w_.permute(0, 2, 1)
        return torch.bmm(v, w_).reshape(b, c, h, w)


class QKVAttentionLegacy(nn.Module):
    def forward(self, q, k, v):
        weight = torch.einsum("bct,bcs->bts", q, k)
        weight = torch.softmax(weight.float(), dim=-1).type(weight.dtype)
        return torch.einsum("bts,bcs->bct", weight, v)


class Nonlocal(nn.Module):
    def forward(self, theta, phi, g):
        theta_phi = torch.einsum("nct,ncp->ntp", (theta, phi))
        theta_phi = nn.functional.softmax(theta_phi, dim=2)
        return torch.einsum("ntg,ncg->nct", (theta_phi, g))


class SharedKeys(nn.Module):
    def forward(self, q, k, v):
        sim = torch.einsum("b h i d, b j d -> b h i j", q, k)
        return torch.einsum("b h i j, b j d -> b h i d", sim.softmax(dim=-1), v)


class Pooling(nn.Module):
    def forward(self, x, w):
        scores = torch.matmul(x, w)
        return torch.matmul(torch.softmax(scores, dim=-1), x)
"""


def test_attention_with_the_transpose_done_ahead_or_the_head_axis_inside_is_found() -> None:
    assert _findings(ATTENTION, "TP307") == [
        ("TP307", 12),
        ("TP307", 22),
        ("TP307", 29),
        ("TP307", 36),
    ]
    # a product of two plain operands, neither transposed, is no score (line 42)


# The shape of SlowFast's tools/train_net.py and slowfast/datasets/loader.py (Apache-2.0): the
# training loader comes from a function of another module of the project, which binds one of
# several DataLoader calls and returns it; the script re-iterates it every epoch on CUDA.
SLOWFAST_LOADER = """
import torch


def construct_loader(cfg, split):
    dataset = build_dataset(cfg, split)
    if isinstance(dataset, torch.utils.data.IterableDataset):
        loader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=cfg.WORKERS)
    else:
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=8, shuffle=True, num_workers=cfg.WORKERS
        )
    return loader


def build_dataset(cfg, split):
    return list(range(10))
"""

SLOWFAST_TRAIN = """
import torch
from slowfast.datasets import loader


def train_epoch(train_loader, model, optimizer):
    for inputs, labels in train_loader:
        inputs, labels = inputs.cuda(), labels.cuda()
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def train(cfg, model, optimizer):
    model = model.cuda()
    train_loader = loader.construct_loader(cfg, "train")
    for epoch in range(cfg.EPOCHS):
        train_epoch(train_loader, model, optimizer)
"""


def test_a_loader_another_project_file_builds_and_the_script_reiterates_is_reported_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_project(
        tmp_path,
        {
            "slowfast/__init__.py": "",
            "slowfast/datasets/__init__.py": "",
            "slowfast/datasets/loader.py": SLOWFAST_LOADER,
            "tools/train_net.py": SLOWFAST_TRAIN,
        },
    )
    # the whole rule set: the script's loops are read when a loop rule runs on it
    main(["lint", "--format", "json", "."])
    found = {(f["path"], f["line"], f["code"]) for f in json.loads(capsys.readouterr().out)}
    assert {f for f in found if f[2] == "TP104"} == {
        ("slowfast/datasets/loader.py", 8, "TP104"),
        ("slowfast/datasets/loader.py", 10, "TP104"),
    }
    # iterated once (no epoch loop around it), the workers start once
    once = textwrap.dedent(SLOWFAST_TRAIN).replace(
        "for epoch in range(cfg.EPOCHS):\n        train_epoch",
        "if cfg.EPOCHS:\n        train_epoch",
    )
    (tmp_path / "tools" / "train_net.py").write_text(once)
    main(["lint", "--format", "json", "."])
    assert [f for f in json.loads(capsys.readouterr().out) if f["code"] == "TP104"] == []


# The shape of rasbt's LLMs-from-scratch create_dataloader_v1 (Apache-2.0): the loader is built
# and returned by a function of the file, whose num_workers parameter defaults to 0.
RETURNED_LOADER = """
import torch
from torch.utils.data import DataLoader


def create_dataloader(data, batch_size=4, shuffle=True, num_workers={default}):
    dataloader = DataLoader(data, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers)
    return dataloader


def train(model, optimizer, data, epochs):
    model.to("cuda")
    train_loader = create_dataloader(data)
    for epoch in range(epochs):
        for x, y in train_loader:
            loss = model(x.to("cuda"), y.to("cuda"))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_a_loader_returned_through_a_name_is_followed_and_a_zero_default_has_no_workers() -> None:
    assert _findings(RETURNED_LOADER.format(default=4), "TP104") == [("TP104", 7)]
    assert _findings(RETURNED_LOADER.format(default=0), "TP104") == []


# The shapes of timm's EfficientFormerV2 and CaiT attention and DeiT's PatchConvNet pooling
# (Apache-2.0): talking heads mix the heads' maps through modules before and after the softmax,
# which SDPA cannot take; an nn.Identity hook point leaves the map as it is.
TALKING_HEADS = """
import torch
from torch import nn


class TalkingHeads(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.talking_head1 = nn.Conv2d(heads, heads, 1)
        self.proj_w = nn.Linear(heads, heads)

    def forward(self, q, k, v):
        attn = (q @ k.transpose(-2, -1)) * 0.125
        attn = self.talking_head1(attn)
        attn = attn.softmax(dim=-1)
        attn = self.proj_w(attn.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return attn @ v


class Pooled(nn.Module):
    def __init__(self):
        super().__init__()
        self.id = nn.Identity()
        self.attn_drop = nn.Dropout(0.1)

    def forward(self, q, k, v):
        attn = q @ k.transpose(-2, -1)
        attn = self.id(attn)
        attn = attn.softmax(dim=-1)
        attn = self.attn_drop(attn)
        return attn @ v
"""


def test_talking_heads_are_not_sdpa_but_an_identity_or_dropout_on_the_map_is() -> None:
    assert _findings(TALKING_HEADS, "TP307") == [("TP307", 27)]


# The shape of rasbt's character-level RNN notebook (MIT): a GRU of 100 units over the
# characters of Python's string.printable, trained one character at a time on CUDA.
CHAR_RNN = """
import string
import torch
import torch.nn.functional as F

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class RNN(torch.nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.embed = torch.nn.Embedding(input_size, hidden_size)
        self.gru = torch.nn.GRU(input_size=hidden_size, hidden_size=hidden_size)
        self.fc = torch.nn.Linear(hidden_size, output_size)

    def forward(self, features, hidden):
        output, hidden = self.gru(self.embed(features.view(1, -1)).view(1, 1, -1), hidden)
        return self.fc(output.view(1, -1)), hidden


def draw_random_sample():
    return torch.randint(0, 100, (1,)), torch.randint(0, 100, (1,)), torch.zeros(1, 1, 100)


model = RNN(len({vocabulary}), 100, len({vocabulary})).to(DEVICE)
optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
for iteration in range(20000):
    inputs, targets, hidden = draw_random_sample()
    outputs, hidden = model(inputs.to(DEVICE), hidden)
    loss = F.cross_entropy(outputs, targets.to(DEVICE))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_vocabulary_of_pythons_string_constants_is_read_as_a_size() -> None:
    assert _findings(CHAR_RNN.format(vocabulary="string.printable"), "TP302") == []
    # a vocabulary the file does not spell out is not taken as small
    assert _findings(CHAR_RNN.format(vocabulary="vocab"), "TP302") == [("TP302", 27)]


# The shapes of PyTorch's FSDP example (BSD-3-Clause) and SlowFast's contrastive training
# (Apache-2.0): the training loop lives in a helper module, and the script that calls it wraps
# the model in a mixed-precision policy, or calls the helper inside autocast.
HELPER_LOOP = """
import torch


def train(model, loader, optimizer):
    model.cuda()
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

FSDP_SCRIPT = """
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from utils.train_utils import train


def main(model, loader, optimizer, policy, epochs):
    torch.cuda.set_device(0)
    model = FSDP(model, mixed_precision=policy)
    for epoch in range(epochs):
        train(model, loader, optimizer)
"""

AUTOCAST_SCRIPT = """
import torch
from utils.train_utils import train


def main(model, loader, optimizer, epochs):
    torch.cuda.set_device(0)
    for epoch in range(epochs):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            train(model, loader, optimizer)
"""


def _helper_loop_tp302(tmp_path: Path, script: str, capsys: pytest.CaptureFixture[str]) -> set:
    write_project(
        tmp_path,
        {"utils/__init__.py": "", "utils/train_utils.py": HELPER_LOOP, "main.py": script},
    )
    main(["lint", "--format", "json", "."])
    out = json.loads(capsys.readouterr().out)
    return {(f["path"], f["line"]) for f in out if f["code"] == "TP302"}


def test_a_helpers_loop_run_in_reduced_precision_by_its_caller_gets_no_autocast_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _helper_loop_tp302(tmp_path, FSDP_SCRIPT, capsys) == set()
    assert _helper_loop_tp302(tmp_path, AUTOCAST_SCRIPT, capsys) == set()
    # a policy of None, or a call outside the autocast block, runs the helper in float32
    no_policy = FSDP_SCRIPT.replace("mixed_precision=policy", "mixed_precision=None")
    outside = AUTOCAST_SCRIPT.replace(
        '        with torch.autocast("cuda", dtype=torch.bfloat16):\n            train(',
        "        train(",
    )
    for script in (no_policy, outside):
        assert _helper_loop_tp302(tmp_path, script, capsys) == {("utils/train_utils.py", 7)}


# The shape of PointNet++'s train_classification.py (MIT): the accuracy count is summed on the
# host after the one read that waits (``.cpu()``), then read again with ``.item()``.
HOST_COUNT = """
import torch


def train(model, loader, optimizer):
    for points, target in loader:
        points, target = points.cuda(), target.cuda()
        pred = model(points)
        loss = torch.nn.functional.nll_loss(pred, target.long())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        pred_choice = pred.data.max(1)[1]
        correct = pred_choice.eq(target.long().data).cpu().sum()
        mean_correct = correct.item() / float(points.size()[0])
        on_device = pred_choice.eq(target).sum()
        on_device.item()
"""


def test_a_value_summed_on_the_host_after_its_copy_is_read_without_a_second_wait() -> None:
    # the .cpu() waits (line 14); .item() of its host sum does not (15); one of a sum on the
    # device does (17)
    assert _findings(HOST_COUNT, "TP201") == [("TP201", 14), ("TP201", 17)]


# The shape of StyleGAN2-ADA's calc_metrics.py (NVIDIA Source Code License, cut to its
# structure): a metric script that turns TF32 off for exact figures and trains nothing.
METRICS = """
import torch


def subprocess_fn(rank, args):
    device = torch.device("cuda", rank)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    G = args.G.eval().requires_grad_(False).to(device)
    return compute_metric(G, args.dataset)
"""


def test_tf32_turned_off_in_a_script_that_trains_nothing_is_left_alone() -> None:
    assert _findings(METRICS, "TP304") == []
    trains = METRICS + "\n\noptimizer = torch.optim.Adam(model.parameters())\n"
    assert _findings(trains, "TP304") == [("TP304", 8), ("TP304", 9)]


# The shape of DLRM's dlrm_s_pytorch.py (MIT): the autograd profiler wraps the whole training
# loop, but records only when --enable-profiling (a store_true flag) asks for it.
PROFILED = """
import argparse
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--enable-profiling", action="store_true", default=False)
args = parser.parse_args()


def train(model, loader, optimizer):
    with torch.autograd.profiler.profile({enabled}, use_cuda=True, record_shapes=True) as prof:
        for x, y in loader:
            loss = model(x.cuda(), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_a_profiler_off_unless_an_option_asks_is_an_opt_in_debug_run() -> None:
    assert _findings(PROFILED.format(enabled="args.enable_profiling"), "TP602") == []
    assert _findings(PROFILED.format(enabled="True"), "TP602") == [("TP602", 11)]
