"""Classes of false findings and misses from the recorded verdicts (issue 32), session 30: each
cut from the code it was seen in, and checked the other way round."""

from __future__ import annotations

from lint_findings import findings, notebook_findings

# A Lightning Trainer run for one epoch through a name (`EPOCHS = 1`, `max_epochs=EPOCHS`) starts
# its loaders' workers once, as `max_epochs=1` does; the hook reading read only the literal.
HOOK = """
import torch
import pytorch_lightning as pl
from torch.utils.data import DataLoader

EPOCHS = {epochs}

class Net(pl.LightningModule):
    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=64, num_workers=8)

trainer = pl.Trainer(accelerator="gpu", max_epochs=EPOCHS)
trainer.fit(Net())
"""


def test_a_lightning_hook_loader_under_one_epoch_through_a_name_starts_its_workers_once() -> None:
    def tp104(epochs: str) -> list[tuple[str, int]]:
        return [f for f in findings(HOOK.format(epochs=epochs)) if f[0] == "TP104"]

    assert tp104("1") == []
    assert tp104("30") == [("TP104", 10)]


# The same for the loader a Trainer's fit is handed, where a notebook's own function takes the
# epoch count and every call passes 1; another call passing 20 makes it a many-epoch run.
FIT_CELLS = [
    """
import torch
import pytorch_lightning as pl
from torch.utils.data import DataLoader
train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=8)
""",
    """
def train(model, epochs):
    trainer = pl.Trainer(accelerator="gpu", max_epochs=epochs)
    trainer.fit(model, train_loader)
""",
    "train(Net(), epochs=1)",
]


def test_a_notebook_fit_whose_every_call_passes_one_epoch_starts_its_workers_once() -> None:
    assert notebook_findings(FIT_CELLS, "TP104") == []
    assert notebook_findings([*FIT_CELLS, "train(Net(), epochs=20)"], "TP104") == [("TP104", 1, 5)]


# pytorch-GAT's `main_loop(phase)` and the original transformer's `train_val_loop(is_train)`
# serve both passes: the step runs under `if phase == LoopPhase.TRAIN:`, and the evaluation's
# logging and early stopping under a later `elif phase == LoopPhase.VAL:` / `else:` (judged
# false 16 times at change-44); the training pass's own read stays reported. Logging under
# `config["enable_tensorboard"]`, a store_true option for TensorBoard, is opt-in.
PHASES = """
import argparse
import torch

def get_main_loop(config, gat, loss_fn, optimizer):
    def main_loop(phase, epoch=0):
        if phase == LoopPhase.TRAIN:
            gat.train()
        else:
            gat.eval()
        scores = gat(graph_data)[0]
        loss = loss_fn(scores, labels)
        if phase == LoopPhase.TRAIN:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        accuracy = torch.sum(torch.eq(scores.argmax(-1), labels).long()).item()
        if phase == LoopPhase.TRAIN:
            if config["enable_tensorboard"]:
                writer.add_scalar("training_loss", loss.item(), epoch)
        {branch}
            if accuracy > BEST or loss.item() < BEST_LOSS:
                BEST_LOSS = min(loss.item(), BEST_LOSS)
    return main_loop

def train(config):
    gat = GAT().to("cuda")
    optimizer = torch.optim.Adam(gat.parameters())
    main_loop = get_main_loop(config, gat, loss_fn, optimizer)
    for epoch in range(config["num_of_epochs"]):
        main_loop(phase=LoopPhase.TRAIN, epoch=epoch)
        with torch.no_grad():
            main_loop(phase=LoopPhase.VAL, epoch=epoch)

parser = argparse.ArgumentParser()
parser.add_argument("--enable_tensorboard", action="store_true", help="enable tensorboard logging")
train(vars(parser.parse_args()))
"""


def test_the_evaluation_branch_of_a_function_that_serves_both_passes_is_not_a_step() -> None:
    for branch in ("elif phase == LoopPhase.VAL:", "else:"):
        assert findings(PHASES.format(branch=branch), "TP201") == [("TP201", 17)]
    # a branch that only skips the step is not a pass: `if step % 10 == 0: ... else:` stays hot
    cadence = PHASES.format(branch="else:").replace(
        "if phase == LoopPhase.TRAIN:\n            if config",
        "if epoch % 10 == 0:\n            if config",
    )
    assert findings(cadence, "TP201") == [("TP201", 17), ("TP201", 22), ("TP201", 23)]
    # the flag on by default is not opt-in
    on = PHASES.format(branch="else:").replace('action="store_true"', "default=True")
    assert findings(on, "TP201") == [("TP201", 17), ("TP201", 20)]


# The original transformer's notebook: the training loop is a closure a factory returns, and it
# reads the model the factory was handed, moved to CUDA where `train_transformer` builds it. A
# notebook's loop that shows no device is taken for a host run; this one shows it through the
# factory's parameter (TP302 and TP201 listed, not reported, at change-44).
CLOSURE_CELLS = [
    "import torch\nimport torch.nn as nn",
    """
def get_train_val_loop(model, optimizer, loss_fn):
    def train_val_loop(is_train, loader):
        for src, trg in loader:
            loss = loss_fn(model(src), trg)
            if is_train:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                print(loss.item())
    return train_val_loop

def train_transformer(config):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Transformer(512, 8, 6){moved}
    optimizer = torch.optim.Adam(model.parameters())
    train_val_loop = get_train_val_loop(model, optimizer, nn.KLDivLoss())
    for epoch in range(20):
        train_val_loop(is_train=True, loader=train_loader)
""",
    "train_transformer({})",
]


def test_a_notebook_loop_reads_the_device_of_the_model_its_factory_was_handed() -> None:
    def found(moved: str) -> list[tuple[str, int | None, int]]:
        cells = [CLOSURE_CELLS[0], CLOSURE_CELLS[1].format(moved=moved), CLOSURE_CELLS[2]]
        return [f for f in notebook_findings(cells) if f[0] in ("TP201", "TP302")]

    assert found(".to(device)") == [("TP302", 2, 4), ("TP201", 2, 10)]
    assert found("") == []  # a model left on the host: a CPU run of the notebook


# Swin's SimMIM loop: `if config.TRAIN.CLIP_GRAD:` is an option of the config's training
# section, not a test of the training pass; its `else:` runs on every step where clipping is off.
SIMMIM = """
import torch

def train_one_epoch(config, model, loader, optimizer, scaler):
    for idx, (img, mask) in enumerate(loader):
        img = img.cuda(non_blocking=True)
        loss = model(img, mask)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        if config.TRAIN.CLIP_GRAD:
            scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.TRAIN.CLIP_GRAD)
        else:
            grad_norm = sum(p.grad.norm().item() for p in model.parameters())
        scaler.step(optimizer)
        scaler.update()
"""


def test_an_option_of_a_training_section_is_not_a_test_of_the_training_pass() -> None:
    assert findings(SIMMIM, "TP201") == [("TP201", 14)]


# SimCLR's `info_nce_loss`, every step: labels built on the host over two statements and then
# moved (the name is bound again later in the function), and a diagonal mask made as a bool tensor
# and moved, then used to select (listed at change-44, not reported).
SIMCLR = """
import torch
import torch.nn.functional as F

class SimCLR:
    def info_nce_loss(self, features):
        labels = torch.cat([torch.arange(self.args.batch_size) for i in range(2)], dim=0)
        labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
        labels = labels.to(self.args.device)
        similarity_matrix = torch.matmul(features, features.T)
        mask = torch.eye(labels.shape[0], dtype={dtype}).to(self.args.device)
        labels = labels[~mask].view(labels.shape[0], -1)
        logits = similarity_matrix[labels.bool()].view(labels.shape[0], -1)
        labels = torch.zeros(logits.shape[0], dtype=torch.long).to(self.args.device)
        return logits, labels

    def train(self, train_loader):
        for images, _ in train_loader:
            images = images.to(self.args.device)
            features = self.model(images)
            logits, labels = self.info_nce_loss(features)
            loss = self.criterion(logits, labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
"""


def test_a_tensor_built_on_the_host_in_the_lines_before_its_move_is_reported() -> None:
    found = findings(SIMCLR.format(dtype="torch.bool"))
    assert [f for f in found if f[0] == "TP207"] == [("TP207", 9), ("TP207", 11), ("TP207", 14)]
    assert [f for f in found if f[0] == "TP203"] == [("TP203", 12), ("TP203", 13)]
    # a float mask is no selection; labels built on the device are no copy
    found = findings(
        SIMCLR.format(dtype="torch.float").replace(
            "torch.arange(self.args.batch_size)",
            "torch.arange(self.args.batch_size, device=self.args.device)",
        )
    )
    assert [f for f in found if f[0] in ("TP203", "TP207")] == [
        ("TP207", 11),
        ("TP203", 13),
        ("TP207", 14),
    ]


# The universal vocoder's step loop draws batches by hand and starts the loader again when it
# runs out: each `iter()` starts 8 workers again, once per epoch (listed at change-44).
RESTARTED = """
import torch
from torch.utils.data import DataLoader

def main(n_steps, device="cuda"):
    train_loader = DataLoader(trainset, batch_size=32, shuffle=True, num_workers=8{persistent})
    model = Vocoder().to(device)
    optimizer = torch.optim.Adam(model.parameters())
    train_iterator = iter(train_loader)
    for step in range(n_steps):
        try:
            mels, wavs = next(train_iterator)
        except StopIteration:
            train_iterator = iter(train_loader)
            mels, wavs = next(train_iterator)
        loss = model(wavs.to(device), mels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_loader_a_step_loop_starts_again_by_hand_restarts_its_workers() -> None:
    assert findings(RESTARTED.format(persistent=""), "TP104") == [("TP104", 6)]
    assert findings(RESTARTED.format(persistent=", persistent_workers=True"), "TP104") == []
    # iterated once, before the loop only: no restart
    once = RESTARTED.format(persistent="").replace(
        "train_iterator = iter(train_loader)\n            mels", "break\n            mels"
    )
    assert findings(once, "TP104") == []


def test_a_loader_whose_sampler_never_runs_out_starts_its_workers_once() -> None:
    # minGPT's trainer: RandomSampler(..., replacement=True, num_samples=int(1e10)) under the
    # same restart by hand; the first epoch never ends (judged false twice, session 30)
    endless = RESTARTED.format(persistent="").replace(
        "shuffle=True,",
        "sampler=torch.utils.data.RandomSampler(trainset, replacement=True, "
        "num_samples=int(1e10)),",
    )
    assert findings(endless, "TP104") == []
    # sized to the run (the review's `num_samples=max_iters * batch_size`): the same
    assert findings(endless.replace("int(1e10)", "max_iters * 32"), "TP104") == []
    # a plain sampler of the dataset: each epoch ends, and `iter()` starts its workers again
    plain = endless.replace(", replacement=True, num_samples=int(1e10)", "")
    assert findings(plain, "TP104") == [("TP104", 6)]


# BYOL's Lightning example: `gpus=NUM_GPUS` with `NUM_GPUS = 2` at module level puts the fit on
# the GPU, as `gpus=2` does: float32 by default (TP302) and an unpinned loader (TP102), both
# listed at change-45.
BYOL = """
import torch
import pytorch_lightning as pl
from torch.utils.data import DataLoader
from torchvision import models

NUM_GPUS = {gpus}
resnet = models.resnet50(pretrained=True)

class SelfSupervisedLearner(pl.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.learner = BYOL(net, image_size=256)

    def training_step(self, images, _):
        return self.learner(images)

if __name__ == "__main__":
    train_loader = DataLoader(ds, batch_size=32, num_workers=8, shuffle=True)
    model = SelfSupervisedLearner(resnet)
    trainer = pl.Trainer(gpus=NUM_GPUS, max_epochs=1000)
    trainer.fit(model, train_loader)
"""


def test_a_lightning_trainer_given_a_module_constant_of_gpus_runs_on_the_gpu() -> None:
    def codes(gpus: str) -> list[str]:
        return [code for code, _ in findings(BYOL.format(gpus=gpus)) if code in ("TP102", "TP302")]

    assert codes("2") == ["TP102", "TP302"]
    assert codes("0") == []


# The review of 0eaf5ac..fd18d91 (a helper who wrote none of it): each case fails on fd18d91.
REVIEW = """
import torch
from torch.utils.data import DataLoader

def train(loader, model, optimizer, device="cuda"):
    it = iter(loader)
    for step in range(100000):
{body}
        x = x.to(device)
        loss = model(x)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=8)
"""


def test_review_a_peek_under_a_cadence_is_no_restart() -> None:
    peek = (
        "        x = next(it)\n        if step % 5000 == 0:\n            show(next(iter(loader)))"
    )
    assert findings(REVIEW.format(body=peek), "TP104") == []


def test_review_a_mask_moved_under_its_own_name_is_read_without_recursion() -> None:
    source = """
import torch

def step(model, optimizer, x, labels, device="cuda"):
    for i in range(1000):
        logits = model(x)
        mask = torch.zeros(logits.shape[0], dtype=torch.bool)
        mask = mask.to(device)
        loss = logits[mask].sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
    assert findings(source, "TP203") == [("TP203", 9)]


def test_review_host_data_built_just_before_its_move_is_not_tp207() -> None:
    source = """
import torch

def update(agent, buffer, device="cuda"):
    for step in range(100000):
        idx = buffer.sample_idx(256)
        obs = torch.as_tensor(buffer.obs[idx])
        obs = obs.to(device)
        loss = agent.loss(obs)
        agent.optimizer.zero_grad()
        loss.backward()
        agent.optimizer.step()
        obs = None
"""
    assert findings(source, "TP207") == []


def test_review_a_short_sanity_trainer_leaves_the_real_fit_reported() -> None:
    two = HOOK.format(epochs="100") + "\nsanity = pl.Trainer(max_epochs=1)\n"
    assert findings(two, "TP104") == [("TP104", 10)]


def test_review_a_restart_by_hand_in_a_cpu_only_script_is_not_reported() -> None:
    restart = (
        "        try:\n            x = next(it)\n        except StopIteration:\n"
        "            it = iter(loader)\n            x = next(it)"
    )
    on_gpu = REVIEW.format(body=restart)
    assert findings(on_gpu, "TP104") == [("TP104", 19)]
    on_cpu = on_gpu.replace('device="cuda"', 'device="cpu"').replace("x = x.to(device)", "")
    assert findings(on_cpu, "TP104") == []


# DALL-E's Attention.forward: the softmax is a local name chosen by a flag (listed as a TP307
# miss at change-45).
DALLE_ATTENTION = """
import torch
from torch import nn
from einops import rearrange

class Attention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=64, stable=False):
        super().__init__()
        self.heads, self.scale, self.stable = heads, dim_head ** -0.5, stable
        self.to_qkv = nn.Linear(dim, dim_head * heads * 3, bias=False)
        self.to_out = nn.Linear(dim_head * heads, dim)

    def forward(self, x, mask=None):
        softmax = {softmax}
        qkv = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=self.heads), qkv)
        q = q * self.scale
        dots = torch.einsum("b h i d, b h j d -> b h i j", q, k)
        attn = softmax(dots, dim=-1)
        out = torch.einsum("b h i j, b h j d -> b h i d", attn, v)
        out = rearrange(out, "b h n d -> b n (h d)")
        return self.to_out(out)
"""


def test_attention_whose_softmax_is_a_local_name_chosen_by_a_flag_is_found() -> None:
    chosen = "torch.softmax if not self.stable else stable_softmax"
    assert findings(DALLE_ATTENTION.format(softmax=chosen), "TP307") == [("TP307", 18)]
    # a name bound to something that is no softmax: no attention of this shape
    assert findings(DALLE_ATTENTION.format(softmax="torch.sigmoid"), "TP307") == []


# rasbt's chapter 13: a Lightning data module splits MNIST in `setup` and hands the split to its
# loader; its transform is `self.transform`, set once in `__init__`. MNIST batches are small:
# pinning them is negligible (judged debatable twice when a GPU Trainer made the file a CUDA run).
MNIST_MODULE = """
import torch
import pytorch_lightning as pl
from torch.utils.data import DataLoader, random_split
from torchvision import transforms
from torchvision.datasets import MNIST

class MnistDataModule(pl.LightningDataModule):
    def __init__(self, data_path="./"):
        super().__init__()
        self.transform = transforms.Compose([{transform}])

    def setup(self, stage=None):
        mnist_all = MNIST(root="./", train=True, transform=self.transform, download=False)
        self.train, self.val = random_split(mnist_all, [55000, 5000])

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=64, num_workers=4)

trainer = pl.Trainer(max_epochs=10, accelerator="gpu", devices=1)
trainer.fit(model, datamodule=MnistDataModule())
"""


def test_a_split_of_mnist_in_a_data_module_has_small_batches() -> None:
    assert findings(MNIST_MODULE.format(transform="transforms.ToTensor()"), "TP102") == []
    enlarged = "transforms.Resize(224), transforms.ToTensor()"
    assert findings(MNIST_MODULE.format(transform=enlarged), "TP102") == [("TP102", 18)]
