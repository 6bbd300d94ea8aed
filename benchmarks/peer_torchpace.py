"""Contestant "torchpace": the plan `torchpace tune` wrote for the workload, run with ``fit()``.

Built as ``torchpace fit RECIPE --plan PLAN`` builds it (``torchpace.train.build.build``: the
model after seeding, the recipe's optimizer, its shuffled loader), without evaluation or
checkpoints, the progress bar off.
"""

from __future__ import annotations

from _peers_job import Job, Trained

from torchpace.measure.clock import resolve_device
from torchpace.recipes import load_recipe
from torchpace.train import Plan, fit
from torchpace.train.build import build


def train(job: Job) -> Trained:
    if job.plan is None:
        raise ValueError("the torchpace contestant needs job.plan, the plan `torchpace tune` wrote")
    recipe = load_recipe(job.recipe)
    plan = Plan.load(job.plan)
    device = resolve_device(job.device)
    model, optimizer, loader = build(recipe, job.seed)
    result = fit(
        model,
        optimizer,
        loader,
        recipe.loss,
        plan=plan,
        steps=job.steps,
        device=device,
        base_batch_size=recipe.batch_size,
        progress=False,
        count_samples=getattr(recipe, "count_samples", None),
    )
    applied = [a.technique for a in result.applied if a.changed]
    # fit() itself frees gradients (plan.grad_set_to_none) and reads losses only every
    # plan.log_every steps: no Applied record says so
    always = ["grad-set-to-none"] if plan.grad_set_to_none else []
    techniques = tuple(dict.fromkeys([*applied, *always, "avoid-syncs"]))
    return Trained(
        model=model,  # prepare() changed it in place; its forward autocasts by itself
        amp="off",
        techniques=techniques,
        settings={
            "plan": job.plan,
            "plan_fields": plan.to_dict(),
            "applied": [str(a) for a in result.applied],
        },
    )
