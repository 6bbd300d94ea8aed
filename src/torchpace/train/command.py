"""``torchpace fit RECIPE``: train a recipe under a plan, on one process or, with ``--nproc``,
on many through torchrun (``torch.distributed.run``), which re-runs this command per process."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from torchpace._args import positive_int


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "fit",
        help="train a recipe (built-in workload, file or module:attr) under a plan",
        description="Train a recipe with torchpace's loop, applying a plan or preset. "
        "Multi-node: run `torchrun ARGS -m torchpace fit RECIPE ...` with torchrun's usual "
        "arguments.",
    )
    p.add_argument("recipe", help="cnn, lm, seqcls, path/to/recipe.py or module:attr")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--plan", type=Path, help="a plan JSON (torchpace tune writes one)")
    how.add_argument("--preset", default="fast", help="none, safe or fast (default: fast)")
    length = p.add_mutually_exclusive_group()
    length.add_argument("--steps", type=positive_int, help="optimizer steps (default: 100)")
    length.add_argument("--epochs", type=positive_int, help="passes over the training set")
    p.add_argument("--batch-size", type=positive_int, help="override the plan's batch size")
    p.add_argument(
        "--eval-every", type=positive_int, help="evaluate on the val split every N steps"
    )
    p.add_argument("--checkpoint-dir", type=Path, help="write checkpoints here")
    p.add_argument("--checkpoint-every", type=positive_int, help="steps between checkpoints")
    p.add_argument(
        "--resume", help="a checkpoint to continue from, or 'latest' in --checkpoint-dir"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    p.add_argument(
        "--nproc", type=positive_int, default=1, help="processes on this machine (torchrun)"
    )
    p.add_argument("--json", type=Path, help="write the run's result (losses, throughput) here")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.nproc < 1:
        raise ValueError(f"--nproc must be at least 1, got {args.nproc}")
    from torchpace._files import output_dir, output_file

    # Checked before any training: an unwritable place failed at the first save (issue 17).
    if args.json:
        args.json = output_file(args.json, "--json")
    if args.checkpoint_dir is not None:
        args.checkpoint_dir = output_dir(args.checkpoint_dir, "--checkpoint-dir")
    from torchpace.speedups.distributed import launched_by_torchrun

    if args.nproc > 1 and not launched_by_torchrun():
        return _launch(args)
    return _train(args)


def _launch(args: argparse.Namespace) -> int:
    """Re-run this command under torchrun with ``--nproc-per-node``; no launcher of our own."""
    from torch.distributed.run import main as torchrun

    argv = list(sys.argv[1:]) if sys.argv[1:2] == ["fit"] else ["fit", *_argv_of(args)]
    argv = _without_nproc(argv)
    torchrun(["--standalone", f"--nproc-per-node={args.nproc}", "-m", "torchpace", *argv])
    return 0


def _without_nproc(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            out.append(a)
    return out


def _argv_of(args: argparse.Namespace) -> list[str]:
    out = [args.recipe]
    for name in (
        "plan",
        "preset",
        "steps",
        "epochs",
        "batch_size",
        "eval_every",
        "checkpoint_dir",
        "checkpoint_every",
        "resume",
        "seed",
        "device",
        "json",
    ):
        value = getattr(args, name)
        if value is not None:
            out += [f"--{name.replace('_', '-')}", str(value)]
    return out + (["--no-progress"] if args.no_progress else [])


def _train(args: argparse.Namespace) -> int:
    from torch.utils.data import DataLoader

    from torchpace.measure.clock import resolve_device
    from torchpace.recipes import load_recipe
    from torchpace.speedups.distributed import init_from_env, process_device, world
    from torchpace.train import Plan, fit
    from torchpace.train import checkpoint as ckpt
    from torchpace.train.build import build

    recipe = load_recipe(args.recipe)
    plan = Plan.load(args.plan) if args.plan else Plan.preset(args.preset)
    if args.batch_size is not None:
        plan = plan.replace(batch_size=args.batch_size)
    device = process_device(None if args.device == "auto" else resolve_device(args.device))
    init_from_env(device)
    model, optimizer, loader = build(recipe, args.seed)
    collate = getattr(recipe, "collate", None)
    eval_loader = None
    if args.eval_every:
        if getattr(recipe, "dataset", None) is None:
            raise ValueError(
                f"--eval-every needs the recipe's dataset('val', seed); {args.recipe} defines "
                "only loaders()"
            )
        # A few batches every eval_every steps: worker processes would cost more than they save.
        eval_loader = DataLoader(  # noqa: TP101
            recipe.dataset("val", seed=args.seed), batch_size=recipe.batch_size, collate_fn=collate
        )
    resume = args.resume
    if resume == "latest":
        if args.checkpoint_dir is None:
            raise ValueError("--resume latest needs --checkpoint-dir")
        found = ckpt.latest(args.checkpoint_dir)
        resume = str(found) if found else None
    result = fit(
        model,
        optimizer,
        loader,
        recipe.loss,
        plan=plan,
        steps=(args.steps or 100) if args.epochs is None else None,
        epochs=args.epochs,
        eval_loader=eval_loader,
        eval_every=args.eval_every,
        device=device,
        base_batch_size=recipe.batch_size,
        checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=args.checkpoint_every,
        resume=resume,
        progress=False if args.no_progress else None,
        count_samples=getattr(recipe, "count_samples", None),
    )
    w = world()
    _leave_group()
    if w.main:
        applied = sorted({a.technique for a in result.applied if a.changed})
        print(
            f"fit {args.recipe}: {result.steps} steps, {result.samples_per_s:,.1f} samples/s "
            f"(first steps and any compile included) on {w.size} process(es), final loss "
            f"{result.losses[-1]:.4f}; applied: {', '.join(applied) or 'nothing'}"
        )
        for a in result.applied:
            if not a.changed and a.reason and a.technique in plan.techniques():
                print(f"  not applied: {a}")
        if args.json:
            from torchpace._files import atomic_write_text

            out = {
                "recipe": args.recipe,
                "plan": plan.to_dict(),
                "steps": result.steps,
                "samples": result.samples,
                "seconds": result.seconds,
                "samples_per_s": result.samples_per_s,
                "losses": result.losses,
                "eval_losses": result.eval_losses,
                "applied": [dataclasses.asdict(a) for a in result.applied],
                "world_size": w.size,
            }
            atomic_write_text(args.json, json.dumps(out, indent=2) + "\n")
    return 0


def _leave_group() -> None:
    """Leave torchrun's process group together: every rank waits for the others first, so none
    tears it down while another still uses it."""
    import gc

    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        # fit()'s DistributedDataParallel sits in reference cycles; collected only at interpreter
        # exit, its gloo work objects aborted the process now and then ("terminate called
        # without an active exception"). Free it while the group and the interpreter are alive.
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()
