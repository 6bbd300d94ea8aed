"""Many processes on torch.distributed, launched by torchrun (``torch.distributed.run``).

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK and the rendezvous variables; this module only reads
them. gloo on CPU, nccl on CUDA. There is no launcher of our own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from torchpace.speedups.applied import Applied, done


@dataclass(frozen=True)
class World:
    rank: int
    size: int
    local_rank: int

    @property
    def main(self) -> bool:
        return self.rank == 0


def world() -> World:
    """This process's place: from the process group if there is one, else torchrun's variables."""
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if dist.is_available() and dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size(), local)
    return World(int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")), local)


def launched_by_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ or int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_from_env(device: torch.device | str | None = None) -> World:
    """Join the process group torchrun describes (no-op for a single process or when joined).

    On CUDA each process takes the GPU of its LOCAL_RANK and uses nccl; on CPU, gloo.
    """
    w = world()
    if w.size <= 1 or dist.is_initialized():
        return w
    cuda = torch.device(device).type == "cuda" if device is not None else torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(w.local_rank)
        # device_id binds the process group to this GPU: NCCL connects at once instead of
        # guessing the device at the first collective (torch warns without it, and a barrier()
        # before any collective may pick the wrong GPU).
        dist.init_process_group(backend="nccl", device_id=torch.device("cuda", w.local_rank))
    else:
        dist.init_process_group(backend="gloo")
    return world()


def process_device(device: torch.device | str | None = None) -> torch.device:
    """The device this process trains on: ``device``, or its local GPU, or the CPU."""
    if device is not None:
        d = torch.device(device)
        if d.type == "cuda" and d.index is None:
            return torch.device("cuda", world().local_rank)
        return d
    if torch.cuda.is_available():
        return torch.device("cuda", world().local_rank)
    return torch.device("cpu")


def wrap_ddp(model: nn.Module, *, device: torch.device) -> tuple[nn.Module, Applied]:
    """``DistributedDataParallel(model)`` when a process group of more than one process is up."""
    w = world()
    if w.size <= 1 or not dist.is_initialized():
        return model, Applied("ddp-not-dp", False, (), "a single process: nothing to replicate")
    if isinstance(model, DistributedDataParallel):
        return model, done("ddp-not-dp", [], reason="already DistributedDataParallel")
    ids = [device.index] if device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=ids)
    backend = dist.get_backend()
    return ddp, done("ddp-not-dp", [f"DistributedDataParallel over {w.size} processes ({backend})"])


def unwrap(model: nn.Module) -> nn.Module:
    """The user's module inside DDP (whose state_dict keys carry no ``module.`` prefix)."""
    return model.module if isinstance(model, DistributedDataParallel) else model
