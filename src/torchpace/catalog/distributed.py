"""The catalogue entries of the distributed and schedule families, in catalogue order."""

from __future__ import annotations

from torchpace.catalog.schema import BOTH, Technique, code

ENTRIES: tuple[Technique, ...] = (
    # ------------------------------------------------------------ distributed
    Technique(
        id="ddp-not-dp",
        title="DistributedDataParallel instead of DataParallel",
        family="distributed",
        mechanism=(
            "nn.DataParallel is one process with a thread per GPU: every step it copies the "
            "parameters from the first GPU to the others, scatters the inputs, gathers the "
            "outputs back onto the first GPU and sums the gradients there, so that GPU carries "
            "extra work and memory and the threads contend for the GIL. DistributedDataParallel "
            "runs one process per device, copies the model once, and only all-reduces "
            "gradients, in buckets that overlap with the backward pass."
        ),
        helps_when=(
            "Any training on more than one GPU, on one machine or several; PyTorch's own "
            "documentation recommends DDP over DataParallel even on a single machine. On CPU, "
            "DDP with the gloo backend is the data-parallel route (DataParallel does nothing "
            "without GPUs). The faster-on-gpus article still shows DataParallel, which is why "
            "it is not cited here."
        ),
        hurts_when=(
            "It needs a launcher (torchrun), a process group, a DistributedSampler with "
            "set_epoch each epoch, and care that only one rank logs and saves checkpoints; each "
            "process has its own memory and loader. On a single CPU machine the processes share "
            "the cores that intra-op threads already use, so a speed-up is not assured."
        ),
        measured="",
        changes_numerics=False,
        devices=BOTH,
        guides=("tuning-guide", "seven-tips-zh"),
        how=code(
            """
            # launch: torchrun --nproc_per_node=4 train.py
            import os

            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel as DDP
            from torch.utils.data.distributed import DistributedSampler

            dist.init_process_group("nccl")  # "gloo" on CPU
            local_rank = int(os.environ["LOCAL_RANK"])
            torch.cuda.set_device(local_rank)
            model = DDP(model.to(local_rank), device_ids=[local_rank])
            sampler = DistributedSampler(train_set)  # call sampler.set_epoch(epoch) every epoch
            loader = DataLoader(train_set, batch_size=64, sampler=sampler)
            """
        ),
    ),
    Technique(
        id="ddp-no-sync",
        title="Skip the all-reduce on gradient-accumulation micro-batches",
        family="distributed",
        mechanism=(
            "DDP all-reduces gradients during every backward. With gradient accumulation over N "
            "micro-batches only the sum after the last one is needed, so running the first N-1 "
            "forward and backward passes inside model.no_sync() lets gradients accumulate "
            "locally and leaves one all-reduce per optimizer step."
        ),
        helps_when=(
            "DDP training with gradient accumulation, above all when communication is slow "
            "next to compute (many ranks, several nodes, gloo on CPU, large models)."
        ),
        hurts_when=(
            "Both the forward and the backward of a skipped micro-batch must run inside the "
            "context. Without accumulation there is nothing to skip. Under FSDP, no_sync keeps "
            "unsharded gradients and so raises memory use. The accumulated sum is reduced once "
            "instead of piecewise, which differs only in rounding order."
        ),
        measured="",
        changes_numerics=False,
        devices=BOTH,
        guides=("tuning-guide",),
        how=code(
            """
            import contextlib

            for i, (x, y) in enumerate(loader, start=1):
                last = i % accum_steps == 0
                with contextlib.nullcontext() if last else model.no_sync():  # model: the DDP
                    loss = loss_fn(model(x), y) / accum_steps
                    loss.backward()  # all-reduce only in the last micro-batch's backward
                if last:
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
            """
        ),
    ),
    Technique(
        id="ddp-unused-params",
        title="find_unused_parameters off, or layers defined in call order",
        family="distributed",
        mechanism=(
            "With find_unused_parameters=True, DDP walks the autograd graph after every forward "
            "to find parameters that will get no gradient, and it keeps buckets in the order "
            "the model's constructor created the parameters; when that differs from the order "
            "gradients arrive in backward, a bucket's all-reduce waits for its latest gradient "
            "and overlaps less with the backward pass. With the default False, DDP rebuilds its "
            "buckets from the order seen in the first backward, so no reordering is needed."
        ),
        helps_when=(
            "A DDP model passes find_unused_parameters=True although every parameter gets a "
            "gradient every step, or truly needs it but defines its layers in a different order "
            "from the one forward runs them in. If the set of used parameters is the same every "
            "step, static_graph=True is another option."
        ),
        hurts_when=(
            "If some parameters really get no gradient in a step, DDP with "
            "find_unused_parameters=False raises an error at the next iteration. Reordering "
            "layer definitions changes the order in which parameters draw their initial values, "
            "so the initial weights differ under the same seed."
        ),
        measured="",
        changes_numerics=False,
        devices=BOTH,
        guides=("tuning-guide",),
        how=code(
            """
            model = DDP(model, device_ids=[local_rank])  # find_unused_parameters=False: default
            # only if some parameters get no gradient in some steps; define layers in call order:
            # model = DDP(model, device_ids=[local_rank], find_unused_parameters=True)
            # or, when the parameters used are the same every step:
            # model = DDP(model, device_ids=[local_rank], static_graph=True)
            """
        ),
    ),
    Technique(
        id="sampler-set-epoch",
        title="Reshuffle a DistributedSampler every epoch",
        family="distributed",
        mechanism=(
            "DistributedSampler shuffles with a generator seeded by seed + epoch, and its epoch "
            "only changes when set_epoch(epoch) is called. Without it every epoch visits the "
            "same samples in the same order on every rank, so training sees less variety per "
            "step and usually needs more steps to reach the same loss."
        ),
        helps_when="A DistributedSampler with shuffle=True drives a loop over several epochs.",
        hurts_when=(
            "Nothing slows down; a run that relied on the fixed order to reproduce a result "
            "sees a different order."
        ),
        measured=(
            "Measured on torch 2.13.0 (CPU; DistributedSampler over 10,000 samples, 2 replicas, "
            "rank 0): without set_epoch, epoch 2 repeats epoch 1's order at 100% of positions; "
            "with set_epoch(1), 0.02% of positions match."
        ),
        changes_numerics=True,
        devices=BOTH,
        guides=(),
        how=code(
            """
            sampler = DistributedSampler(train_set, shuffle=True)
            loader = DataLoader(train_set, batch_size=64, sampler=sampler)
            for epoch in range(epochs):
                sampler.set_epoch(epoch)  # a new order each epoch, the same on every rank
                for x, y in loader:
                    ...
            """
        ),
    ),
    Technique(
        id="rank-load-balance",
        title="Balance the work across ranks",
        family="distributed",
        mechanism=(
            "In DDP the gradient all-reduce makes every rank wait for the slowest one at each "
            "step, so a rank whose batch holds much longer sequences keeps all the others idle. "
            "Forming each global step's batches so that every rank gets about the same amount "
            "of work (the same token budget, or samples of similar length) removes that wait."
        ),
        helps_when=(
            "Data-parallel training on variable-length data (text, speech, translation), where "
            "per-rank step times differ from step to step."
        ),
        hurts_when=(
            "As with length-bucketing, batch composition is no longer random and token-budget "
            "batches vary in sample count. Every rank must get the same number of steps, or the "
            "ranks with more batches wait forever in an all-reduce (trim the list, or use DDP's "
            "join() context). Fixed-shape inputs gain nothing."
        ),
        measured="",
        changes_numerics=True,
        devices=BOTH,
        guides=("tuning-guide",),
        how=code(
            """
            import random

            import torch.distributed as dist

            rank, world = dist.get_rank(), dist.get_world_size()
            random.seed(epoch)  # the same batch order on every rank
            batches = token_budget_batches(lengths, max_tokens=16_384)  # see length-bucketing
            batches = batches[: len(batches) // world * world]  # equal step counts everywhere
            loader = DataLoader(data, batch_sampler=batches[rank::world], collate_fn=pad_batch)
            """
        ),
    ),
    # --------------------------------------------------------------- schedule
    Technique(
        id="lr-schedule",
        title="One-cycle or cyclical learning-rate schedule",
        family="schedule",
        mechanism=(
            "OneCycleLR warms the learning rate up to a high peak and then anneals it far below "
            "the start (moving momentum the opposite way), and CyclicLR oscillates it between "
            "two bounds; both spend most steps at large learning rates, which for many models "
            "reaches a target accuracy in fewer epochs. The gain is in the number of epochs, "
            "not in the cost of a step."
        ),
        helps_when=(
            "Models trained with a constant or step-decayed learning rate for a known number of "
            "steps, with SGD or Adam-type optimizers."
        ),
        hurts_when=(
            "The peak rate has to be found (a learning-rate range test), and OneCycleLR needs "
            "the total number of steps up front and raises an error if stepped past it. It is "
            "stepped per batch, not per epoch. Gains depend on model and data; a recipe with a "
            "tuned warm-up and cosine decay may gain nothing."
        ),
        measured="",
        changes_numerics=True,
        devices=BOTH,
        guides=("faster-training-memo",),
        how=code(
            """
            scheduler = torch.optim.lr_scheduler.OneCycleLR(
                optimizer, max_lr=1e-2, total_steps=epochs * len(loader)
            )
            for x, y in loader:
                loss_fn(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()  # once per batch, not per epoch
            """
        ),
    ),
)
