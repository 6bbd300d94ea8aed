"""Classes issue 32's fourteenth change set showed (pytorch/torchtune's recipes; judged before any
rule changed against it). The fixture has the shape of the code it is cut from, shortened; the
test fails on the rules before the change."""

from __future__ import annotations

from lint_findings import findings

# The shape of torchtune's fine-tuning recipes (BSD-3-Clause): a recipe class builds its loader
# with torchdata's StatefulDataLoader in a setup method, over a dataset that tokenizes each
# sample as it is read, and its train() iterates it every epoch on the GPU.
RECIPE = """
import torch
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler


class FullFinetuneRecipeSingleDevice:
    def __init__(self, cfg):
        self._device = torch.device("cuda")

    def setup(self, cfg):
        self._model = build_model(cfg).to(self._device)
        self._optimizer = torch.optim.AdamW(self._model.parameters(), lr=2e-5)
        self._dataloader = self._setup_data(cfg.dataset, batch_size=cfg.batch_size)

    def _setup_data(self, ds, batch_size):
        sampler = StatefulDistributedSampler(ds, num_replicas=1, rank=0, shuffle=True)
        dataloader = StatefulDataLoader({args})
        return dataloader

    def train(self):
        for curr_epoch in range(3):
            for idx, batch in enumerate(self._dataloader):
                tokens = batch["tokens"].to(self._device)
                loss = self._model(tokens).mean()
                loss.backward()
                self._optimizer.step()
                self._optimizer.zero_grad(set_to_none=True)
"""


def test_torchdatas_stateful_loader_is_a_dataloader() -> None:
    # No workers: every sample is tokenized in the training process (TP101), as for a DataLoader.
    plain = "dataset=ds, batch_size=batch_size, sampler=sampler"
    line = RECIPE.splitlines().index("        dataloader = StatefulDataLoader({args})") + 1
    assert findings(RECIPE.format(args=plain), "TP101") == [("TP101", line)]
    # With workers and pinned memory it is left alone, as a DataLoader would be.
    good = plain + ", num_workers=4, pin_memory=True, persistent_workers=True"
    assert findings(RECIPE.format(args=good), "TP101") == []


# The shape of r9y9/wavenet_vocoder's train.py (MIT): a mask helper called every step builds a
# range on the host, transforms it under another name, and moves that name to the GPU.
MASK = """
import torch


def sequence_mask(sequence_length, max_len):
    batch_size = sequence_length.size(0)
    seq_range = torch.arange(0, max_len).long()
    seq_range_expand = seq_range.unsqueeze(0).expand(batch_size, max_len)
    if sequence_length.is_cuda:
        seq_range_expand = {move}
    return (seq_range_expand < sequence_length.unsqueeze(1)).float()


def train(model, loader, optimizer):
    model = model.cuda()
    for x, lengths in loader:
        x = x.cuda()
        mask = sequence_mask(lengths.cuda(), x.size(-1))
        loss = (model(x) * mask).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
"""


def test_a_host_range_transformed_under_another_name_then_moved_is_reported_at_its_factory():
    line = MASK.splitlines().index("    seq_range = torch.arange(0, max_len).long()") + 1
    assert findings(MASK.format(move="seq_range_expand.cuda()"), "TP207") == [("TP207", line)]
    # The chain moved at once, without the second name, is the same copy.
    inline = MASK.replace(
        "seq_range.unsqueeze(0).expand(batch_size, max_len)",
        "seq_range.unsqueeze(0).expand(batch_size, max_len).cuda()",
    )
    assert findings(inline.format(move="seq_range_expand"), "TP207") == [("TP207", line)]
    # A name also bound to something from the device is not known to be on the host.
    mixed = MASK.replace(
        "    if sequence_length.is_cuda:",
        "    if max_len > 4096:\n        seq_range_expand = sequence_length.new_ones(1, max_len)\n"
        "    if sequence_length.is_cuda:",
    )
    assert findings(mixed.format(move="seq_range_expand.cuda()"), "TP207") == []


# The shape of lucidrains/denoising-diffusion-pytorch's trainer (MIT): a conv U-Net of the file
# trained at a fixed image size on the device Accelerate picks; nothing names CUDA.
ACCELERATE_UNET = """
import torch
from torch import nn
from torch.utils.data import DataLoader
from accelerate import Accelerator


class Unet(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.init_conv = nn.Conv2d(3, dim, 7, padding=3)
        self.blocks = nn.ModuleList([nn.Conv2d(dim, dim, 3, padding=1) for _ in range(8)])
        self.final_conv = nn.Conv2d(dim, 3, 1)

    def forward(self, x):
        x = self.init_conv(x)
        for block in self.blocks:
            x = block(x).relu()
        return self.final_conv(x)


class Trainer:
    def __init__(self, dataset, dim=64):
        self.accelerator = Accelerator({cpu})
        self.model = Unet(dim)
        dl = DataLoader(dataset, batch_size=32, shuffle=True, pin_memory=True, num_workers=8)
        self.dl = self.accelerator.prepare(dl)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        self.model, self.opt = self.accelerator.prepare(self.model, self.opt)

    def train(self, steps):
        for _ in range(steps):
            for data in self.dl:
                loss = (self.model(data) - data).pow(2).mean()
                self.accelerator.backward(loss)
                self.opt.step()
                self.opt.zero_grad()
"""


def test_an_accelerate_trainers_conv_net_runs_on_the_gpu_without_the_autotuner() -> None:
    line = (
        ACCELERATE_UNET.splitlines().index(
            "        self.init_conv = nn.Conv2d(3, dim, 7, padding=3)"
        )
        + 1
    )
    assert findings(ACCELERATE_UNET.format(cpu=""), "TP303") == [("TP303", line)]
    # Put on the CPU by the file: no CUDA run, no cuDNN.
    assert findings(ACCELERATE_UNET.format(cpu="cpu=True"), "TP303") == []
