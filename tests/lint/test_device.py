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
    ],
)
def test_files_that_do_not_show_cuda(source: str) -> None:
    assert not uses_cuda(_ctx(source))
