"""Classes change-31 showed, fixed in general (issue 32, the twenty-fourth session). Each fixture
has the shape of the code a judge read, shortened and renamed; each test fails on the rules
before the change, and the controls hold on both."""

from __future__ import annotations

from lint_findings import findings as findings_in_a_script
from lint_findings import notebook_findings


def findings(source: str) -> list[tuple[str, int]]:
    """What lint reports on ``source`` as the one code cell of a notebook."""
    return [(code, line) for code, _, line in notebook_findings([source])]


# A handbook's DDP snippet, "to be saved as a .py file": it names a dataset, a loss function and
# an optimizer that nothing binds, so run as written it stops at a NameError on its first step.
# An exercise notebook whose ``optimizer = # TODO`` cell does not parse has the same loop.
TEMPLATE = """
import argparse
import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--node_rank", type=int)
args = parser.parse_args()
torch.distributed.init_process_group(backend="nccl")
device = torch.device("cuda", args.node_rank)
model = torchvision.models.resnet50().to(device)
distrib_model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.node_rank])
sampler = DistributedSampler(dataset)
dataloader = DataLoader(dataset, sampler=sampler)
for inputs, labels in dataloader:
    predictions = distrib_model(inputs.to(device))
    loss = loss_function(predictions, labels.to(device))
    loss.backward()
    optimizer.step()
"""


def test_a_loop_stepping_an_optimizer_nothing_binds_is_no_training_run() -> None:
    assert findings(TEMPLATE) == []


def test_the_same_loop_with_its_optimizer_built_is_reported() -> None:
    built = TEMPLATE.replace(
        "sampler = DistributedSampler",
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nsampler = DistributedSampler",
    )
    assert {"TP101", "TP302"} <= {code for code, _ in findings(built)}


def test_an_optimizer_a_star_import_may_bind_is_kept() -> None:
    starred = TEMPLATE.replace("import argparse", "import argparse\nfrom setup import *")
    assert {"TP101", "TP302"} <= {code for code, _ in findings(starred)}


def test_an_optimizer_handed_to_the_training_function_is_kept() -> None:
    handed = TEMPLATE.replace(
        "for inputs, labels in dataloader:",
        "def train(optimizer):\n  for inputs, labels in dataloader:",
    )
    handed = handed.replace("\n    ", "\n      ").replace(
        "      optimizer.step()",
        "      optimizer.step()\n\ntrain(torch.optim.SGD(model.parameters()))",
    )
    assert "TP302" in [code for code, _ in findings(handed)]


def test_a_script_that_steps_an_unbound_optimizer_is_still_read() -> None:
    # a .py file may be run with names bound for it (exec, runpy's init_globals, %run -i)
    assert {"TP101", "TP302"} <= {code for code, _ in findings_in_a_script(TEMPLATE)}


# PyTorch's CIFAR-10 tutorial, as a notebook: the loader keeps two workers, LeNet trains for two
# epochs on the CPU, and a later cell only prints the CUDA device, to show how one would move
# the net. A notebook's cells are separate runs (as TP302 reads them): no GPU run restarts the
# workers.
TUTORIAL_CELLS = [
    """
import torch
import torchvision
trainset = torchvision.datasets.CIFAR10(root="./data", train=True, download=True)
trainloader = torch.utils.data.DataLoader(trainset, batch_size=4, shuffle=True, num_workers=2)
""",
    """
net = torchvision.models.resnet18()
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
for epoch in range(2):
    for i, data in enumerate(trainloader, 0):
        inputs, labels = data
        optimizer.zero_grad()
        loss = criterion(net(inputs), labels)
        loss.backward()
        optimizer.step()
""",
    """
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
print(device)
""",
]


def test_workers_restarted_for_a_loop_that_trains_on_the_host_in_a_notebook() -> None:
    assert notebook_findings(TUTORIAL_CELLS, "TP104") == []


def test_workers_restarted_for_the_same_loop_on_the_gpu_are_reported() -> None:
    moved = [
        TUTORIAL_CELLS[0],
        TUTORIAL_CELLS[2],
        TUTORIAL_CELLS[1]
        .replace(
            "net = torchvision.models.resnet18()", "net = torchvision.models.resnet18().to(device)"
        )
        .replace(
            "inputs, labels = data", "inputs, labels = data[0].to(device), data[1].to(device)"
        ),
    ]
    assert notebook_findings(moved, "TP104") == [("TP104", 1, 5)]


# GCNII's PPI script: a loader over the 20 training graphs' indices, one a batch, each step
# indexing the graphs the script holds on the GPU. The indices are a legacy typed constructor of
# a range, what torch.arange makes; an index costs nothing to make.
INDICES = """
import torch
import torch.utils.data as Data

device = torch.device("cuda")
model = GCNII(nfeat=50, nlayers=9, nhidden=2048).to(device)
optimizer = torch.optim.Adam(model.parameters())
idx = torch.LongTensor(range(20))
loader = Data.DataLoader(dataset=idx, batch_size=1, shuffle=True, num_workers=0)
for epoch in range(8000):
    for step, batch in enumerate(loader):
        feats, graph, labels = train_feats[batch].to(device), train_adj[batch], train_labels[batch]
        loss = loss_fcn(model(feats, graph), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_loader_of_a_typed_range_batches_indices() -> None:
    assert findings_in_a_script(INDICES, "TP101") == []


def test_a_loader_of_a_typed_tensor_of_data_is_still_reported() -> None:
    data = INDICES.replace("torch.LongTensor(range(20))", "torch.LongTensor(token_ids)")
    assert findings_in_a_script(data, "TP101") == [("TP101", 9)]


# A Fashion-MNIST handbook notebook copies each step's loss to the host (``.cpu()``, the step's
# one wait), then reads it two lines on; other cells bind ``loss`` to losses on the device. The
# binding that reaches the read is the one two lines up, in the same block: a host tensor.
HOST_LOSS = """
import torch

model = torchvision.models.resnet18().to("cuda")
optimizer = torch.optim.Adam(model.parameters())
criterion = torch.nn.CrossEntropyLoss()
losses = []
for epoch in range(10):
    for images, labels in train_loader:
        images, labels = images.to("cuda"), labels.to("cuda")
        optimizer.zero_grad()
        loss = criterion(model(images), labels).cpu()
        loss.backward()
        optimizer.step()
        losses.append(loss.data.item())
with torch.no_grad():
    for images, labels in test_loader:
        loss = criterion(model(images.to("cuda")), labels.to("cuda"))
"""


def test_a_read_of_the_loss_copied_to_the_host_two_lines_up_waits_for_nothing() -> None:
    assert findings_in_a_script(HOST_LOSS, "TP201") == [("TP201", 12)]


def test_a_read_of_the_loss_on_the_device_is_still_reported() -> None:
    on_device = HOST_LOSS.replace(
        "criterion(model(images), labels).cpu()", "criterion(model(images), labels)"
    )
    assert findings_in_a_script(on_device, "TP201") == [("TP201", 15)]


def test_a_binding_only_some_paths_take_is_not_read_as_the_reaching_one() -> None:
    branch = HOST_LOSS.replace(
        "        loss.backward()\n",
        "        loss.backward()\n"
        "        if epoch > 5:\n"
        "            loss = criterion(model(images), labels)\n",
    )
    assert ("TP201", 17) in findings_in_a_script(branch, "TP201")


# A detection chapter's loop reads its batch's labels, host tensors the collate builds, into
# lists, before it moves the images; the loader's batch is the binding that reaches that read
# (the loop's target at the start of each pass), though the body later rebinds names.
BATCH_LABELS = """
import torch

model = Detector().to("cuda")
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(20):
    for ii, (image, target) in enumerate(dataloader):
        optimizer.zero_grad()
        labels = [label.tolist() for label in target]
        image = image.to("cuda")
        target = encode(labels).to("cuda")
        loss = model(image, target)
        loss.backward()
        optimizer.step()
"""


def test_a_read_of_the_loaders_batch_before_the_body_moves_it_waits_for_nothing() -> None:
    assert findings_in_a_script(BATCH_LABELS, "TP201") == []


def test_a_read_after_the_body_moves_the_batch_is_still_reported() -> None:
    after = BATCH_LABELS.replace(
        "        labels = [label.tolist() for label in target]\n",
        "        target = target.to('cuda')\n"
        "        labels = [label.tolist() for label in target]\n",
    )
    assert findings_in_a_script(after, "TP201") == [("TP201", 10)]
