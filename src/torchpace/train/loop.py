"""``fit()``: a lean training loop that applies a ``Plan``, and reads top to bottom.

No host-device syncs outside the log cadence: each step's loss stays on the device and the
losses are read together every ``plan.log_every`` steps (and at evaluation and checkpoints).
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from torchpace.speedups.applied import Applied
from torchpace.speedups.distributed import init_from_env, process_device, unwrap, world
from torchpace.speedups.loading import DevicePrefetcher, to_device
from torchpace.speedups.precision import choose_precision
from torchpace.train import checkpoint
from torchpace.train.apply_plan import PREPARED, prepare
from torchpace.train.lr import scale_lr
from torchpace.train.plan import Plan
from torchpace.train.progress import StepProgress

LossFn = Callable[[nn.Module, Any], torch.Tensor]


@dataclass
class FitResult:
    steps: int  # optimizer steps taken in this call
    samples: int
    seconds: float  # training time, evaluation and checkpoint writing excluded
    losses: list[float]  # mean training loss of every optimizer step of the run, from step 0
    eval_losses: list[tuple[int, float]] = field(default_factory=list)  # (step, mean loss)
    checkpoints: list[str] = field(default_factory=list)  # written by this process
    applied: list[Applied] = field(default_factory=list)

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0


def fit(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: Any,
    loss_fn: LossFn,
    *,
    plan: Plan | None = None,
    steps: int | None = None,
    epochs: int | None = None,
    eval_loader: Any = None,
    eval_every: int | None = None,
    device: torch.device | str | None = None,
    base_batch_size: int | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int | None = None,
    resume: str | Path | None = None,
    progress: bool | None = None,
    count_samples: Callable[[Any], int] | None = None,
) -> FitResult:
    """Train ``steps`` optimizer steps (or ``epochs`` passes) of ``loss_fn(model, batch)``.

    ``plan`` is applied with ``prepare()`` unless the model was prepared already. When
    ``base_batch_size`` (the batch the optimizer's LR was set for) differs from the loader's,
    the LR is scaled by ``plan.lr_scaling``. ``resume`` (a checkpoint path) continues exactly.
    """
    plan = plan or Plan()
    if (steps is None) == (epochs is None):
        raise ValueError("pass exactly one of steps= or epochs=")
    if (checkpoint_every is None) != (checkpoint_dir is None):
        raise ValueError("checkpoint_every= and checkpoint_dir= go together")
    init_from_env(device)
    w = world()
    dev = process_device(device if device is not None else next(model.parameters()).device)
    applied: list[Applied] = []
    if getattr(model, PREPARED, None) is None:
        model, optimizer, loader = prepare(
            model, optimizer, loader, plan=plan, device=dev, applied=applied
        )
    with warnings.catch_warnings():  # prepare() already warned about an unusable choice
        warnings.simplefilter("ignore")
        precision, _ = choose_precision(dev, plan.amp)
    scaler = precision.make_scaler()  # fp16 only; bf16 has float32's range
    batch_size = _batch_size(loader)
    if base_batch_size is not None and batch_size is not None and batch_size != base_batch_size:
        for group in optimizer.param_groups:
            group["lr"] = scale_lr(group["lr"], base_batch_size, batch_size, rule=plan.lr_scaling)
    total = steps if steps is not None else (epochs or 0) * (len(loader) // plan.accumulate)
    scheduler = None
    if plan.schedule == "onecycle":
        peaks = [g["lr"] for g in optimizer.param_groups]
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=peaks, total_steps=total)
    count = count_samples or _count_samples
    result = FitResult(steps=0, samples=0, seconds=0.0, losses=[], applied=applied)

    start, epoch, next_batch, epoch_rng, rng_now = 0, 0, 0, None, None
    if resume is not None:  # load every state, then continue at the step after the checkpoint
        state = checkpoint.load(resume)  # onto the CPU: load_state_dict places each tensor
        unwrap(model).load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if scaler is not None and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        if scheduler is not None and state.get("scheduler"):
            scheduler.load_state_dict(state["scheduler"])
        _say_what_changed(state, plan, getattr(loader, "batch_size", None), resume)
        start, epoch, next_batch = state["step"], state["epoch"], state["next_batch"]
        mine = _this_ranks(state, resume)
        epoch_rng, rng_now, result.losses = mine["epoch_rng"], mine["rng"], list(mine["losses"])
        result.eval_losses = [tuple(e) for e in state["eval_losses"]]  # type: ignore[misc]
    batches = _Batches(loader, epoch, next_batch, epoch_rng, rng_now)
    pending: list[torch.Tensor] = []  # this log window's step losses, still on the device
    no_sync = getattr(model, "no_sync", None)  # DDP: all-reduce on the last micro-batch only
    bar = StepProgress(total, start=start, enabled=w.main if progress is None else progress)
    model.train()
    t0 = time.perf_counter()
    paused = 0.0  # evaluation and checkpoint time, kept out of the training figures
    with bar:
        # autocast is on the model's forward (prepare() wrapped it), which lint cannot see.
        for step in range(start, total):  # noqa: TP302
            step_loss = torch.zeros((), device=dev)
            for micro in range(plan.accumulate):
                _, _, batch = batches.next()
                result.samples += count(batch)
                if not isinstance(loader, DevicePrefetcher):
                    batch = to_device(batch, dev, non_blocking=_pinned(loader))
                last = micro == plan.accumulate - 1
                with no_sync() if (no_sync and not last) else contextlib.nullcontext():
                    loss = loss_fn(model, batch)  # forward under autocast: prepare() wrapped it
                    scaled = loss / plan.accumulate
                    (scaler.scale(scaled) if scaler else scaled).backward()
                step_loss += loss.detach() / plan.accumulate
            if scaler is not None:
                scaler.step(optimizer)  # skips the step if gradients overflowed
                scaler.update()
            else:
                optimizer.step()
            optimizer.zero_grad(set_to_none=plan.grad_set_to_none)
            if scheduler is not None:
                scheduler.step()
            pending.append(step_loss)
            done = step + 1
            bar.advance(result.samples / max(time.perf_counter() - t0 - paused, 1e-9))
            if done % plan.log_every == 0 or done == total:
                result.losses += _read(pending, first_step=done - len(pending))  # a sync
                pending = []
                bar.show_loss(result.losses[-1])
            t_pause = time.perf_counter()
            if eval_loader is not None and eval_every and (done % eval_every == 0 or done == total):
                value = evaluate(model, eval_loader, loss_fn, device=dev, plan=plan)
                result.eval_losses.append((done, value))
                bar.show_eval(value)
            if checkpoint_dir is not None and checkpoint_every and done % checkpoint_every == 0:
                result.losses += _read(pending, first_step=done - len(pending))
                pending = []
                position = batches.position()
                state = {
                    "model": unwrap(model).state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scaler": scaler.state_dict() if scaler is not None else {},
                    "scheduler": scheduler.state_dict() if scheduler is not None else {},
                    "step": done,
                    **position,
                    "per_rank": _gather_per_rank(position, result.losses),
                    "losses": result.losses,
                    "eval_losses": [list(e) for e in result.eval_losses],
                    "plan": plan.to_dict(),
                    "batch_size": getattr(loader, "batch_size", None),
                    "writer_rank": w.rank,
                }
                if w.main:  # one writer; the others wait so nobody reads a half-written file
                    path = Path(checkpoint_dir) / f"step-{done}.pt"
                    result.checkpoints.append(str(checkpoint.save(path, state)))
                _barrier()
            paused += time.perf_counter() - t_pause
            result.steps += 1
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)  # note: queued GPU work belongs in the training time
    result.seconds = time.perf_counter() - t0 - paused
    return result


def evaluate(
    model: nn.Module, loader: Any, loss_fn: LossFn, *, device: torch.device, plan: Plan
) -> float:
    """Mean ``loss_fn`` over ``loader`` under ``inference_mode``, the model in eval mode."""
    was_training = model.training
    model.eval()
    total, n = torch.zeros((), device=device), 0
    with torch.inference_mode():
        for batch in loader:
            batch = to_device(batch, device, channels_last=plan.channels_last)
            total += loss_fn(model, batch).float()
            n += 1
    model.train(was_training)
    if n == 0:
        raise ValueError("the evaluation loader yielded no batches")
    # note: one sync per evaluation, which fit() runs every eval_every steps only
    return float(total / n)  # noqa: TP201


class _Batches:
    """The loader's batches across epochs, with where they stand: ``next()`` gives
    ``(epoch, index in epoch, batch)``; ``position()`` what a checkpoint needs to come back.

    On resume, the epoch's start RNG is restored (so its shuffle and workers' seeds repeat),
    its first ``next_batch`` batches are fetched and dropped, then the RNG of the moment of the
    checkpoint is restored, before the next batch is fetched. Not exact: a CUDA DevicePrefetcher
    fetches one batch ahead, so a dataset drawing from the global RNG in the main process
    (augmentation with 0 workers) draws in another order around a resumed step.
    """

    def __init__(
        self, loader: Any, epoch: int, next_batch: int, epoch_rng: Any, rng_now: Any
    ) -> None:
        self.loader, self.epoch, self.index = loader, epoch, next_batch - 1
        self.gens = _generators(loader)
        self.it: Iterator[Any] | None
        if next_batch > 0:
            checkpoint.set_rng_state(epoch_rng, self.gens)
        elif rng_now is not None:
            checkpoint.set_rng_state(rng_now, self.gens)
        self.it = self._start()
        for _ in range(next_batch):
            next(self.it)
        if next_batch > 0:
            checkpoint.set_rng_state(rng_now, self.gens)

    def _start(self) -> Iterator[Any]:
        self.epoch_rng = checkpoint.rng_state(self.gens)
        _set_epoch(self.loader, self.epoch)
        return iter(self.loader)

    def next(self) -> tuple[int, int, Any]:
        batch = next(self.it, _END) if self.it is not None else _END
        if batch is _END:  # the epoch is over: the next one reshuffles
            if self.it is not None:
                self.epoch, self.index = self.epoch + 1, -1
            self.it = self._start()
            batch = next(self.it)
        self.index += 1
        return self.epoch, self.index, batch

    def position(self) -> dict[str, Any]:
        """Where the next batch comes from, and the RNG states to get there again."""
        if self.index + 1 == _len(self.loader):
            # Finish the epoch now: a sampler draws from its generator once more when it runs
            # out, and that draw must be in the saved state, as it is in the run that goes on.
            if self.it is not None and next(self.it, _END) is not _END:
                raise RuntimeError("the loader yielded more batches than its len()")
            if self.it is not None:
                self.epoch, self.index = self.epoch + 1, -1
            self.it = None  # the next epoch starts at the next fetch, as it does on resume
        return {
            "epoch": self.epoch,
            "next_batch": self.index + 1,
            "epoch_rng": self.epoch_rng,
            "rng": checkpoint.rng_state(self.gens),
        }


_END = object()


def _generators(loader: Any) -> list[torch.Generator]:
    """The loader's own generators (shuffle, workers' base seed), each once, in a fixed order."""
    inner = loader.loader if isinstance(loader, DevicePrefetcher) else loader
    found = (
        getattr(inner, "generator", None),
        getattr(getattr(inner, "sampler", None), "generator", None),
    )
    return list({id(g): g for g in found if isinstance(g, torch.Generator)}.values())


def _set_epoch(loader: Any, epoch: int) -> None:
    """Tell the sampler (DistributedSampler, our batch samplers) which epoch it is, if it asks."""
    inner = loader.loader if isinstance(loader, DevicePrefetcher) else loader
    samplers: tuple[Any, ...] = (
        getattr(inner, "batch_sampler", None),
        getattr(inner, "sampler", None),
    )
    for obj in {id(s): s for s in samplers if hasattr(s, "set_epoch")}.values():
        obj.set_epoch(epoch)


def _read(pending: list[torch.Tensor], *, first_step: int) -> list[float]:
    if not pending:
        return []
    # note: a host-device sync, once per log window (fit() calls this at the log cadence only)
    values: list[float] = torch.stack(pending).float().tolist()  # noqa: TP201
    for i, v in enumerate(values):
        if not math.isfinite(v):
            raise FloatingPointError(
                f"the training loss is {v} at step {first_step + i + 1}: lower the learning rate, "
                "or train with amp='off' to see whether reduced precision causes it"
            )
    return values


def _count_samples(batch: Any) -> int:
    """The batch's leading dimension (from its shape: no sync)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.ndim else 1
    if isinstance(batch, (list, tuple)) and batch:
        return _count_samples(batch[0])
    if isinstance(batch, dict) and batch:
        return _count_samples(next(iter(batch.values())))
    return 1


def _len(loader: Any) -> int:
    try:
        return len(loader)
    except TypeError:
        return 1 << 62  # an iterable without a length: it never ends an epoch by count


def _batch_size(loader: Any) -> int | None:
    inner = getattr(loader, "loader", loader)
    size = getattr(inner, "batch_size", None)
    return size if isinstance(size, int) else None


def _pinned(loader: Any) -> bool:
    return bool(getattr(loader, "pin_memory", False))


def _say_what_changed(
    state: dict[str, Any], plan: Plan, batch_size: int | None, path: str | Path
) -> None:
    """Warn when a run resumes under another plan or batch size than its checkpoint's: it goes
    on (the user may mean it), but not silently, since the losses then differ from the run that
    was interrupted (issue 17)."""
    changes = []
    saved_plan = state.get("plan")
    if isinstance(saved_plan, dict):
        now = plan.to_dict()
        for key in sorted(set(saved_plan) | set(now)):
            if saved_plan.get(key) != now.get(key):
                changes.append(f"plan {key}: {saved_plan.get(key)!r} -> {now.get(key)!r}")
    saved_batch = state.get("batch_size")
    if saved_batch is not None and batch_size is not None and saved_batch != batch_size:
        changes.append(f"batch size: {saved_batch} -> {batch_size}")
    if changes:
        warnings.warn(
            f"resuming {path} under other settings than it was written with ("
            + "; ".join(changes)
            + "): training continues, but not as the interrupted run would have",
            stacklevel=3,
        )


def _this_ranks(state: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """This rank's RNG states and losses from a checkpoint (rank 0's own on one process)."""
    w = world()
    per_rank = state.get("per_rank")
    if not per_rank:
        return state
    if len(per_rank) != w.size:
        raise ValueError(
            f"{path} was written by {len(per_rank)} processes; resume it with as many, not {w.size}"
        )
    mine: dict[str, Any] = per_rank[w.rank]
    return mine


def _gather_per_rank(position: dict[str, Any], losses: list[float]) -> list[dict[str, Any]] | None:
    """Every rank's RNG states (dropout masks differ per rank) and losses (of its own shard),
    or None on one process."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return None
    mine = {"epoch_rng": position["epoch_rng"], "rng": position["rng"], "losses": losses}
    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    return every


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
