"""`uses_cuda`: which files train on CUDA, the gate of the CUDA-only rules (TP102, TP302, ...)."""

from __future__ import annotations

import pytest

from torchpace.lint.device import uses_cuda
from torchpace.lint.engine import parse
from torchpace.lint.rule import FileContext


def _ctx(source: str) -> FileContext:
    ctx = parse("t.py", source.encode())
    assert isinstance(ctx, FileContext)
    return ctx


@pytest.mark.parametrize(
    "source",
    [
        "model.cuda()",
        "x = x.to('cuda')",
        "x = x.to('cuda:1', non_blocking=True)",
        "import torch\nd = torch.device('cuda')",
        "import torch\nz = torch.zeros(3, device='cuda:0')",
        "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'",
        "device = f'cuda:{rank}'",
        "parser.add_argument('--device', default='cuda')",
        "import torch\ntorch.cuda.set_device(rank)",
        "import torch.distributed as dist\ndist.init_process_group('nccl')",
        "if device.type == 'cuda':\n    pass",
        # pytorch/examples (mnist, vae, dcgan...): the accelerator idiom of torch 2.6+
        "import torch\nuse_accel = torch.accelerator.is_available()\n"
        "device = torch.accelerator.current_accelerator() if use_accel else torch.device('cpu')",
        "import torch\ntorch.accelerator.set_device_index(rank)",
        # detectron2's plain_train_net.py: the model's device comes from a config; DDP's
        # device_ids are CUDA devices (a CPU module must leave them None)
        "from torch.nn.parallel import DistributedDataParallel\n"
        "model = DistributedDataParallel(model, device_ids=[comm.get_local_rank()])",
        "import torch\nm = torch.nn.parallel.DistributedDataParallel(m, [rank])",
    ],
)
def test_cuda_files(source: str) -> None:
    assert uses_cuda(_ctx(source))


@pytest.mark.parametrize(
    "source",
    [
        "",
        "import torch\nok = torch.cuda.is_available()",
        "x = x.to('cpu')",
        "x = x.to(device)",  # cannot tell what device holds
        "name = 'cudaq'",
        "import torch\nd = torch.device('mps')",
        "import torch.distributed as dist\ndist.init_process_group('gloo')",
        "import torch\nok = torch.accelerator.is_available()",  # checks, never places
        "import torch\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=None)",
        "import torch\nm = torch.nn.parallel.DistributedDataParallel(m)",  # CPU and gloo too
    ],
)
def test_files_that_do_not_show_cuda(source: str) -> None:
    assert not uses_cuda(_ctx(source))


def test_tp302_points_at_the_loop_that_trains_on_the_device_not_a_cpu_one_before_it() -> None:
    # Cut from a tutorial notebook (issue 32): the first loop trains model_0 on the CPU, a later
    # one model_1 on CUDA. The finding was on the CPU loop; it belongs to the CUDA one.
    from torchpace.lint import RULES, FileResult, lint_source

    source = b"""import torch
device = "cuda" if torch.cuda.is_available() else "cpu"
model_0 = LinearRegressionModel()
opt_0 = torch.optim.SGD(model_0.parameters(), lr=0.01)
for epoch in range(100):
    loss = loss_fn(model_0(X_train), y_train)
    opt_0.zero_grad()
    loss.backward()
    opt_0.step()
model_1 = LinearRegressionModelV2()
model_1.to(device)
opt_1 = torch.optim.SGD(model_1.parameters(), lr=0.01)
for epoch in range(100):
    loss = loss_fn(model_1(X_train), y_train)
    opt_1.zero_grad()
    loss.backward()
    opt_1.step()
"""
    rules = [r for r in RULES if r.code == "TP302"]
    result = lint_source("nb.py", source, rules)
    assert isinstance(result, FileResult)
    assert [f.location.line for f in result.findings] == [13]
    # no loop shows a device (the model comes from a helper): the first training loop, as before
    hidden = source.replace(b"model_1.to(device)\n", b"").replace(
        b"model_0 = LinearRegressionModel()", b"model_0 = build(device)"
    )
    result = lint_source("nb.py", hidden, rules)
    assert isinstance(result, FileResult)
    assert [f.location.line for f in result.findings] == [5]


APEX = """\
import torch

model = Tacotron2(hparams).cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
if hparams.fp16_run:
    from apex import amp
    model, optimizer = amp.initialize(model, optimizer, opt_level="O2")
for batch in train_loader:
    x, y = model.parse_batch(batch)
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""


def test_apex_amp_manages_precision_so_no_autocast_advice() -> None:
    # NVIDIA/tacotron2 (change-4): --fp16_run casts the model with apex's amp.initialize; TP302
    # was judged false (already done) there
    from torchpace.lint import RULES, FileResult, lint_source

    rules = [r for r in RULES if r.code == "TP302"]
    result = lint_source("train.py", APEX.encode(), rules)
    assert isinstance(result, FileResult)
    assert not result.findings
    lines = APEX.splitlines(keepends=True)
    without = "".join([*lines[:5], "    pass\n", *lines[7:]])  # no apex: float32 throughout
    result = lint_source("train.py", without.encode(), rules)
    assert isinstance(result, FileResult)
    assert [f.location.line for f in result.findings] == [7]


# kohya's finetune/make_captions.py: a loader feeding captioning under no_grad, in a file with no
# training loop.
CAPTIONS = (
    "import torch\n"
    "device = torch.device('cuda')\n"
    "data = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=4)\n"
    "for batch in data:\n"
    "    with torch.no_grad():\n"
    "        captions = model.generate(batch.to(device))\n"
)


def _tp102(source: str) -> list[str]:
    from torchpace.lint import RULES, FileResult, lint_source

    result = lint_source("t.py", source.encode(), [r for r in RULES if r.code == "TP102"])
    assert isinstance(result, FileResult)
    return [f.code for f in result.findings]


def test_a_loader_iterated_by_a_file_that_trains_nothing_is_not_a_training_loader() -> None:
    assert _tp102(CAPTIONS) == []
    assert _tp102(CAPTIONS + "print(len(data))\n") == []  # only measured: still no training
    # The same loader in a file whose loop trains is reported.
    trains = CAPTIONS.replace(
        "    with torch.no_grad():\n        captions = model.generate(batch.to(device))\n",
        "    loss = model(batch.to(device)).mean()\n    loss.backward()\n    optimizer.step()\n",
    )
    assert _tp102(trains) == ["TP102"]


def test_a_loader_handed_to_a_trainer_is_a_training_loader_though_the_file_loops_it() -> None:
    # Lightning: no training loop in the file; `trainer.fit(model, data)` trains from it.
    assert _tp102(CAPTIONS + "trainer.fit(model, data)\n") == ["TP102"]


COURSE = """\
import torch
from torch.utils.data import DataLoader
device = torch.device("cuda")
show = DataLoader(train_data, batch_size=1, num_workers=1, shuffle=True)
img, label = next(iter(show))


def train(model, show, epochs):
    for epoch in range(epochs):
        for X, y in show:
            loss = model(X.to(device)).mean()
            loss.backward()
            optimizer.step()


simple = DataLoader(train_data, batch_size=32)
train(model, show=simple, epochs=5)
"""


def test_a_functions_parameter_is_not_the_global_loader_of_the_same_name() -> None:
    # mrdbourke's course: the global `train_dataloader` (batch 1) is only peeked at; the
    # `train(model, train_dataloader, ...)` function's parameter of that name is another loader.
    from torchpace.lint import RULES, FileResult, lint_source

    result = lint_source("course.py", COURSE.encode(), [r for r in RULES if r.code < "TP200"])
    assert isinstance(result, FileResult)
    assert [(f.code, f.location.line) for f in result.findings] == [("TP101", 16)]


def test_a_loader_cycled_through_a_generator_of_the_same_parameter_name_is_re_iterated() -> None:
    # lucidrains' denoising-diffusion Trainer: `dl = cycle(dl)` with `def cycle(dl): for data
    # in dl: yield data`, workers restarted at every pass (TP104, judged true four times).
    from torchpace.lint import RULES, FileResult, lint_source

    source = (
        "import torch\nfrom torch.utils.data import DataLoader\n\n\n"
        "def cycle(dl):\n    while True:\n        for data in dl:\n            yield data\n\n\n"
        "dl = DataLoader(ds, batch_size=16, shuffle=True, num_workers=4, pin_memory=True)\n"
        "dl = cycle(dl)\n"
        "for step in range(1000):\n"
        "    loss = model(next(dl).cuda()).mean()\n    loss.backward()\n    optimizer.step()\n"
    )
    result = lint_source("train.py", source.encode(), [r for r in RULES if r.code == "TP104"])
    assert isinstance(result, FileResult)
    assert [(f.code, f.location.line) for f in result.findings] == [("TP104", 11)]
