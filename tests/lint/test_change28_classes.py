"""Classes change-28 showed, fixed in general (issue 32, the twenty-third session). Each fixture
has the shape of the code a judge read, shortened and renamed; each test fails on the rules
before the change, and the controls hold on both."""

from __future__ import annotations

import textwrap

import pytest
from lint_findings import findings

from torchpace.lint import RULES, FileResult, lint_source

# parler-tts' training script encodes each split's audio into codec tokens before training:
# one loader a split, over that split's dataset, iterated once. Persistent workers would keep
# nothing: the next pass builds another loader over another dataset.
PER_SPLIT = """
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = Model().to(device)
opt = torch.optim.AdamW(model.parameters())
for split in raw_datasets:
    data_loader = DataLoader(raw_datasets[split], batch_size=8, num_workers=4, pin_memory=True)
    for batch in data_loader:
        loss = model(batch.to(device)).sum()
        loss.backward()
        opt.step()
"""


def test_a_loader_built_each_pass_over_that_passs_dataset_keeps_no_workers() -> None:
    assert findings(PER_SPLIT, "TP104") == []


def test_a_loader_built_each_epoch_over_the_same_dataset_is_still_reported() -> None:
    # each epoch starts its workers again: build it once, with persistent workers
    same = PER_SPLIT.replace("for split in raw_datasets:", "for epoch in range(10):")
    same = same.replace("DataLoader(raw_datasets[split],", "DataLoader(train_set,")
    assert findings(same, "TP104") == [("TP104", 9)]


def test_a_loader_of_each_pass_iterated_by_an_inner_epoch_loop_is_still_reported() -> None:
    inner = (
        PER_SPLIT.replace(
            "    for batch in data_loader:\n",
            "    for epoch in range(5):\n      for batch in data_loader:\n",
        )
        .replace("        loss", "          loss")
        .replace("        opt.step", "          opt.step")
    )
    assert findings(inner, "TP104") == [("TP104", 9)]


# deep-text-recognition-benchmark's attention decoder: its forward builds its hidden state and
# output buffers with the legacy typed constructors, given sizes, then copies them to the
# device, every step. Given more than one argument a typed constructor takes sizes (only the
# one-argument form takes data), so it is what torch.zeros(..., device=) makes on the device.
DECODER = """
import torch
import torch.nn as nn
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Attention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.cell = nn.LSTMCell(hidden_size, hidden_size)

    def forward(self, batch_H, obs, steps=26):
        b = batch_H.size(0)
        hidden = (torch.FloatTensor(b, self.hidden_size).fill_(0).to(device),
                  torch.FloatTensor(b, self.hidden_size).fill_(0).to(device))
        out = torch.FloatTensor(b, steps, self.hidden_size).to(device)
        seen = torch.FloatTensor(obs).to(device)
        return self.cell(batch_H[:, 0], hidden), out, seen
"""


def test_a_typed_constructor_given_sizes_then_moved_is_reported() -> None:
    # the three built from sizes (lines 15, 16, 17); not the one given the host's data (18)
    assert findings(DECODER, "TP207") == [("TP207", 15), ("TP207", 16), ("TP207", 17)]


# MAE's all_reduce_mean(x), copied into DeiT, ConvNeXt and LLaMA-Adapter's engines: x is the
# Python float the step read with .item(); the value reaches the device by a copy however the
# tensor is made.
REDUCE = """
import torch
import torch.distributed as dist


def all_reduce_mean(x):
    world_size = dist.get_world_size()
    if world_size > 1:
        x_reduce = torch.tensor(x).cuda()
        dist.all_reduce(x_reduce)
        x_reduce /= world_size
        return x_reduce.item()
    return x


def train_one_epoch(model, loader, optimizer, device):
    for samples, targets in loader:
        loss = model(samples.to(device), targets.to(device))
        loss.backward()
        optimizer.step()
        loss_value_reduce = all_reduce_mean(loss.item())
        zero = torch.tensor(0.0).cuda()
"""


def test_a_tensor_of_what_the_caller_hands_in_is_not_reported() -> None:
    # the scalar the step builds itself (line 22) is; the caller's value (line 9) is not
    assert findings(REDUCE, "TP207") == [("TP207", 22)]


# change-29. The tutorials' learning-rate finder (bentrevett's LRFinder.range_test): a short
# sweep, once, before the training run, that reads the loss each step to smooth it and to stop
# where it diverges. The notebook's training loop comes after it.
LR_FINDER = """
import torch

device = torch.device("cuda")
model = AlexNet().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-7)


class LRFinder:
    def __init__(self, model, optimizer, device):
        self.model, self.optimizer, self.device = model, optimizer, device

    def range_test(self, iterator, end_lr=10, num_iter=100):
        for iteration in range(num_iter):
            loss = self._train_batch(iterator)
            if loss > 5 * best_loss:
                break

    def _train_batch(self, iterator):
        x, y = iterator.get_batch()
        loss = criterion(self.model(x.to(self.device)), y.to(self.device))
        loss.backward()
        self.optimizer.step()
        return loss.item()


lr_finder = LRFinder(model, optimizer, device)
lr_finder.range_test(train_iterator)
for x, y in train_iterator:
    loss = criterion(model(x.to(device)), y.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    epoch_loss += loss.item()
"""


@pytest.mark.parametrize(
    "finder",
    ["LRFinder", "LearningRateFinder", "lr_range_finder", "FindLR"],
)
def test_a_method_of_a_class_named_for_a_finder_is_a_sweep(finder: str) -> None:
    source = LR_FINDER.replace("LRFinder", finder).replace("range_test", "sweep")
    found = [f for f in findings(source) if f[0] in ("TP201", "TP302")]
    assert found == [("TP302", 29), ("TP201", 34)]


def test_a_learning_rate_finders_sweep_is_not_the_training_run() -> None:
    # the float32 finding is placed at the training loop (line 29), not the sweep's (line 14);
    # the sweep's read of the loss (line 24) is left alone, the training loop's (34) is not
    found = [f for f in findings(LR_FINDER) if f[0] in ("TP201", "TP302")]
    assert found == [("TP302", 29), ("TP201", 34)]


# MAPPO's HATRPO update: a conjugate-gradient loop and a backtracking line search inside the
# step, each ending on a value the host must read to know when to stop.
TRPO = """
import torch

device = torch.device("cuda")
policy = Policy().to(device)
optimizer = torch.optim.Adam(policy.parameters())


def conjugate_gradient(Avp, b, nsteps, residual_tol=1e-10):
    x = torch.zeros(b.size(), device=b.device)
    r, p = b.clone(), b.clone()
    rdotr = torch.dot(r, r)
    for i in range(nsteps):
        _Avp = Avp(p)
        alpha = rdotr / torch.dot(p, _Avp)
        x += alpha * p
        r -= alpha * _Avp
        new_rdotr = torch.dot(r, r)
        p = r + new_rdotr / rdotr * p
        rdotr = new_rdotr
        if rdotr < residual_tol:
            break
    return x


for sample in buffer:
    loss = policy.surrogate(sample.to(device))
    step = conjugate_gradient(policy.fvp, loss, 10)
    accepted = False
    for fraction in 0.5 ** torch.arange(10):
        new_logp = torch.log_softmax(policy.apply_step(step * fraction), 0)
        kl = (new_logp.exp() * new_logp).sum()
        if kl < max_kl:
            accepted = True
            break
    if loss > 100:
        print("large loss")
    loss.backward()
    optimizer.step()
"""


def test_a_branch_that_ends_a_loop_inside_the_step_is_left_alone() -> None:
    # the conjugate gradient's stop (line 21) and the line search's acceptance (line 33) decide
    # when a loop inside the step ends; the training loop's own branch on the loss (36) is read
    assert findings(TRPO, "TP204") == [("TP204", 36)]


# kospeech's trainer: the lengths its collate function returns, a Python list, made a tensor and
# moved each step; the data is new each step and reaches the device by a copy however it is made.
LENGTHS = """
import torch

device = torch.device("cuda")
model = Model().to(device)
optimizer = torch.optim.Adam(model.parameters())
scale = [1.0, 0.5]
for batch in loader:
    inputs, targets, input_lengths, target_lengths = batch
    target_lengths = torch.as_tensor(target_lengths).to(device)
    weights = torch.tensor(scale).to(device)
    loss = model(inputs.to(device), targets.to(device), target_lengths).sum() * weights.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_tensor_of_each_batchs_host_data_is_not_reported() -> None:
    # the batch's lengths (line 10) are not; the same list every step (line 11) is
    assert findings(LENGTHS, "TP207") == [("TP207", 11)]


# change-29: VGG's layer lists. torchvision's make_layers binds the conv to a name and adds it
# with its BatchNorm in one list (`layers += [conv2d, nn.BatchNorm2d(v), ...]`);
# pytorch-cifar100's adds the conv, then the BatchNorm under `if batch_norm:`. Both build the
# `*_bn` models with the conv's bias cancelled by the norm.
VGG = """
import torch.nn as nn


def make_layers(cfg, batch_norm=False):
    layers = []
    in_channels = 3
    for v in cfg:
        if v == "M":
            layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
        else:
            conv2d = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
            if batch_norm:
                layers += [conv2d, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            else:
                layers += [conv2d, nn.ReLU(inplace=True)]
            in_channels = v
    return nn.Sequential(*layers)


def make_layers_cifar(cfg, batch_norm=False):
    layers = []
    input_channel = 3
    for l in cfg:
        if l == "M":
            layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            continue
        layers += [nn.Conv2d(input_channel, l, kernel_size=3, padding=1)]
        if batch_norm:
            layers += [nn.BatchNorm2d(l)]
        layers += [nn.ReLU(inplace=True)]
        layers.extend([nn.Conv2d(l, l, 1, bias=False), nn.BatchNorm2d(l)])
        input_channel = l
    return nn.Sequential(*layers)


def make_head(cfg):
    layers = []
    conv = nn.Conv2d(512, 512, 3)
    conv = nn.utils.spectral_norm(conv)
    layers += [conv, nn.BatchNorm2d(512)]
    return nn.Sequential(*layers)


features = nn.Sequential(make_layers([64, "M"], True), make_layers_cifar([64, "M"], True))
"""


def test_a_vgg_layer_list_with_its_batchnorm_is_read() -> None:
    # the named conv (line 12) and the conv followed by a BatchNorm under `if batch_norm:`
    # (line 28); not a conv built without a bias (line 32), nor a name bound twice (line 39)
    assert findings(VGG, "TP401") == [("TP401", 12), ("TP401", 28)]
    # no `bias=False` fix: the same line builds the convs of the models without BatchNorm too
    result = lint_source("vgg.py", textwrap.dedent(VGG).encode(), RULES)
    assert isinstance(result, FileResult)
    assert [f.fix for f in result.findings if f.code == "TP401"] == [None, None]
