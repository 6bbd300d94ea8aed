"""The catalogue entries of the loading and batching families, in catalogue order."""

from __future__ import annotations

from torchpace.catalog.schema import BOTH, CUDA, Technique, code

ENTRIES: tuple[Technique, ...] = (
    # ---------------------------------------------------------------- loading
    Technique(
        id="loader-workers",
        title="Load batches in DataLoader worker processes",
        family="loading",
        mechanism=(
            "With the default num_workers=0 the training process reads, decodes and collates "
            "every batch itself, and the device idles meanwhile. With num_workers > 0, separate "
            "worker processes (outside the main process's GIL) prepare the next batches while the "
            "current step runs, so the step only waits when the workers fall behind."
        ),
        helps_when=(
            "Reading or augmenting a batch is a visible share of the step (the doctor measures "
            "the time spent waiting on the loader) and the machine has cores to spare. The "
            "guides' starting points differ (four workers per GPU in two of them, one worker and "
            "then measure in another); the right count depends on the CPU, the storage and the "
            "cost per sample, so measure it."
        ),
        hurts_when=(
            "Every worker is a process with its own copy of the dataset object, so RAM grows "
            "with the count; reference-count updates make forked workers copy the pages of the "
            "Python objects they touch. On a CPU-only run or a machine with few cores, workers "
            "take cores from the step's own intra-op threads. For small in-memory tensor "
            "datasets, passing batches between processes can cost more than loading them, and "
            "without persistent_workers each epoch pays the start-up again. Random augmentation "
            "in workers draws from per-worker seeds, so augmented samples differ from a "
            "num_workers=0 run even though the sample order is the same."
        ),
        measured=(
            "cnn train step on CPU (bf16, channels_last, fused AdamW), one loader worker "
            "against none: 0.91x [0.89-0.94], slower: on 2 cores the worker takes a core from "
            "the step's own threads (2-core AMX Xeon VM, torch 2.13.0+cpu; `python "
            "benchmarks/cpu_techniques.py --only 'loader workers' --rounds 10`)."
        ),
        changes_numerics=False,
        changes_random_stream=True,
        devices=BOTH,
        guides=("tuning-guide", "faster-training-memo", "single-gpu-ru", "seven-tips-zh"),
        how=code(
            """
            loader = DataLoader(
                train_set,
                batch_size=64,
                shuffle=True,
                num_workers=4,  # a starting point: measure the loader wait, then adjust
            )
            """
        ),
    ),
    Technique(
        id="pinned-memory",
        title="Pinned host memory and non-blocking copies",
        family="loading",
        mechanism=(
            "The GPU copies from host memory by DMA, which needs page-locked memory; a copy from "
            "ordinary pageable memory is first staged through a pinned buffer by the driver and "
            "blocks the host. With pin_memory=True the DataLoader hands out batches already in "
            "pinned memory, so the transfer is a single DMA, and .to(device, non_blocking=True) "
            "queues it and returns at once instead of waiting for it."
        ),
        helps_when=(
            "CUDA training with batches large enough for the host-to-device copy to show in the "
            "step, above all when the host has other work (queueing kernels, logging) between "
            "issuing the copy and the kernels that use the batch."
        ),
        hurts_when=(
            "Page-locked memory cannot be swapped out, so large or many pinned buffers shrink the "
            "RAM left to everything else. Pinning is itself a copy, done by one thread of the "
            "main process, and can become the limit for very large batches on a slow CPU. It "
            "does nothing for CPU-only training. non_blocking=True on a device-to-host copy is a "
            "hazard: the CPU tensor can be read before the copy has landed unless the stream is "
            "synchronised first."
        ),
        measured="",
        changes_numerics=False,
        devices=CUDA,
        guides=(
            "tuning-guide",
            "faster-training-memo",
            "single-gpu-ru",
            "seven-tips-zh",
            "faster-on-gpus",
        ),
        how=code(
            """
            loader = DataLoader(train_set, batch_size=64, num_workers=4, pin_memory=True)
            for x, y in loader:
                # from pinned memory the copy is asynchronous: the host goes on queueing work
                x = x.to("cuda", non_blocking=True)
                y = y.to("cuda", non_blocking=True)
                loss = loss_fn(model(x), y)
            """
        ),
    ),
    Technique(
        id="async-prefetch",
        title="Prefetch the next batch to the device on a side stream",
        family="loading",
        mechanism=(
            "A non-blocking copy issued on the default stream still runs in order with that "
            "stream's kernels, so the GPU computes nothing while a batch is transferred. Issuing "
            "the copy of batch n+1 on a second CUDA stream while batch n trains lets the GPU's "
            "copy engine run at the same time as the compute kernels; the compute stream then "
            "waits only for an event that marks the end of that copy."
        ),
        helps_when=(
            "The host-to-device transfer is a visible share of the step (large inputs such as "
            "images, video or long sequences, or a fast model), and the loader already uses "
            "pinned memory, without which the copy cannot be asynchronous."
        ),
        hurts_when=(
            "One extra batch lives in device memory. The stream handling is easy to get wrong: "
            "without the wait the step reads a half-copied batch, and without record_stream the "
            "caching allocator may hand the batch's memory to another tensor while the compute "
            "stream still reads it. When the copy is small next to the step the gain is "
            "negligible, and there is nothing to overlap on CPU-only training."
        ),
        measured="",
        changes_numerics=False,
        changes_random_stream=True,
        devices=CUDA,
        guides=("faster-training-memo",),
        how=code(
            """
            copy_stream = torch.cuda.Stream()

            def prefetch(loader):  # loader built with pin_memory=True
                pending = None
                for batch in loader:
                    with torch.cuda.stream(copy_stream):  # overlaps the step running now
                        nxt = [t.to("cuda", non_blocking=True) for t in batch]
                        copied = torch.cuda.Event()
                        copied.record()
                    if pending is not None:
                        yield ready(*pending)
                    pending = (nxt, copied)
                if pending is not None:
                    yield ready(*pending)

            def ready(batch, copied):
                compute = torch.cuda.current_stream()
                compute.wait_event(copied)  # kernels must not read the batch before it lands
                for t in batch:
                    t.record_stream(compute)  # allocated on copy_stream, used on compute
                return batch
            """
        ),
    ),
    Technique(
        id="fast-input-format",
        title="Faster storage formats and decoders for the input data",
        family="loading",
        mechanism=(
            "When the loader is the bottleneck, the time usually goes to opening many small "
            "files, decoding compressed images, or parsing and tokenising text again every "
            "epoch. Doing that work once and storing the result in a form that is cheap to read "
            "(a contiguous binary array that can be memory-mapped, or large sequential shards), "
            "or switching to a faster decoder, removes the repeated per-sample CPU work."
        ),
        helps_when=(
            "The step still waits on the loader with workers enabled, and the cost per sample "
            "is decoding, parsing or file-system overhead rather than augmentation that has to "
            "change every epoch."
        ),
        hurts_when=(
            "It needs a conversion step and disk space: decoded data (raw pixels instead of "
            "JPEG) is several times larger and can move the bottleneck to storage bandwidth. "
            "Whatever is precomputed is frozen, so random augmentation still has to run per "
            "sample. If the loader is not the bottleneck there is nothing to gain."
        ),
        measured="",
        changes_numerics=False,
        devices=BOTH,
        guides=("single-gpu-ru",),
        how=code(
            """
            import numpy as np

            # once: tokenise the corpus and store it as one flat array (vocabulary < 65536)
            np.asarray(token_ids, dtype=np.uint16).tofile("train.bin")

            # every run: memory-map it; a sample is a slice, with no parsing and no file opens
            data = np.memmap("train.bin", dtype=np.uint16, mode="r")
            starts = torch.randint(len(data) - T - 1, (batch_size,)).tolist()
            x = torch.stack([torch.from_numpy(data[s : s + T].astype(np.int64)) for s in starts])
            """
        ),
    ),
    Technique(
        id="persistent-workers",
        title="Keep DataLoader workers alive between epochs",
        family="loading",
        mechanism=(
            "By default the DataLoader shuts its worker processes down at the end of each epoch "
            "and starts fresh ones, each rebuilding its copy of the dataset, when the next "
            "epoch's iterator is created. persistent_workers=True keeps the same workers for the "
            "whole run, so that start-up is paid once. The guides do not name the flag; it "
            "belongs to the worker processes of the tuning guide's data-loading advice."
        ),
        helps_when=(
            "Epochs are short, or workers are slow to start: many workers, the spawn start "
            "method (the default on macOS and Windows), or a dataset that is slow to construct "
            "or to pickle. A validation loader iterated every epoch benefits in the same way."
        ),
        hurts_when=(
            "The workers and their memory stay resident for the whole run, including while "
            "another loader's workers are running. Changes the main process makes to the "
            "dataset object after the workers started (a curriculum that edits dataset "
            "attributes, say) are not seen by them. It requires num_workers > 0."
        ),
        measured="",
        changes_numerics=False,
        changes_random_stream=True,
        devices=BOTH,
        guides=("tuning-guide",),
        how=code(
            """
            loader = DataLoader(
                train_set,
                batch_size=64,
                shuffle=True,
                num_workers=4,
                persistent_workers=True,  # workers outlive the epoch; needs num_workers > 0
            )
            """
        ),
    ),
    # --------------------------------------------------------------- batching
    Technique(
        id="max-batch-size",
        title="The largest useful batch, with the learning rate scaled",
        family="batching",
        mechanism=(
            "Every step pays costs that do not grow with the batch: Python and kernel-launch "
            "overhead, the optimizer update and, in data-parallel runs, the gradient all-reduce. "
            "A larger batch spreads them over more samples and gives each kernel bigger "
            "matrices that keep more of the device busy, so samples per second rise until the "
            "device saturates."
        ),
        helps_when=(
            "The device is under-used at the current batch size (small model, low utilisation, "
            "launch-bound steps) and memory is left over. The learning rate must follow: the "
            "linear rule (scale it with the batch, with warm-up), which is the guides' 'double "
            "the batch, double the rate' heuristic and suits SGD, or the square-root rule, "
            "often the better start for Adam-type optimizers."
        ),
        hurts_when=(
            "It changes the optimisation: fewer updates per epoch and less gradient noise, and "
            "one of the guides warns of worse generalisation, so time to a target loss can grow "
            "while samples per second rise. Past saturation it only costs memory. BatchNorm "
            "statistics change with the per-device batch, and a scaled-up learning rate can "
            "diverge without warm-up."
        ),
        measured="",
        changes_numerics=True,
        devices=BOTH,
        guides=("faster-training-memo", "single-gpu-ru"),
        how=code(
            """
            base_batch, base_lr = 64, 0.1
            batch = 256  # the largest size that still raises samples/s and fits in memory
            lr = base_lr * batch / base_batch  # linear rule, for SGD
            # lr = base_lr * (batch / base_batch) ** 0.5  # square-root rule, for Adam-type
            loader = DataLoader(train_set, batch_size=batch, shuffle=True, drop_last=True)
            optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
            """
        ),
    ),
    Technique(
        id="fixed-shapes",
        title="Fixed batch shapes, or memory reserved at the worst-case shape",
        family="batching",
        mechanism=(
            "PyTorch's CUDA caching allocator reuses freed blocks of the sizes it has already "
            "seen; when shapes change from step to step it has to split blocks and go back to "
            "the driver (cudaMalloc is slow, cudaFree synchronises), and fragmentation can end "
            "in out-of-memory errors. Keeping every batch the same shape lets each step reuse "
            "the same blocks and spares cudnn.benchmark and torch.compile a re-tune or recompile "
            "per new shape; where shapes must vary, one forward and backward pass at the largest "
            "shape before training makes the allocator reserve the biggest blocks first."
        ),
        helps_when=(
            "Inputs vary in length (text, speech) or the last batch of an epoch is partial, and "
            "the step shows allocator churn, recompiles or re-tuning; always worth it together "
            "with cudnn.benchmark or torch.compile. On CPU the allocator part does not apply, "
            "but recompiles do."
        ),
        hurts_when=(
            "Padding everything to one length wastes compute on padding when lengths are "
            "long-tailed (length-bucketing addresses that), and drop_last=True skips up to one "
            "batch of samples per epoch. The warm-up pass costs one step, and run in train mode "
            "it updates BatchNorm running statistics with synthetic data: restore them, or use "
            "a real batch of maximum length."
        ),
        measured="",
        changes_numerics=False,
        devices=BOTH,
        guides=("tuning-guide", "single-gpu-ru"),
        how=code(
            """
            # fixed shapes: only full batches, each padded to one length
            loader = DataLoader(data, batch_size=B, drop_last=True, collate_fn=pad_to(max_len))

            # variable shapes: reserve memory at the worst case once, before training
            worst = torch.randint(0, vocab_size, (B, max_len), device="cuda")
            model(worst).float().mean().backward()  # forward + backward only: no optimizer step
            optimizer.zero_grad(set_to_none=True)
            """
        ),
    ),
    Technique(
        id="length-bucketing",
        title="Length bucketing and token-budget batches",
        family="batching",
        mechanism=(
            "Randomly drawn variable-length samples are padded to the longest member of their "
            "batch, so much of the compute goes to padding. Grouping samples of similar length, "
            "or filling each batch up to a fixed number of tokens instead of a fixed number of "
            "samples, cuts the padding and keeps the work per step about constant."
        ),
        helps_when=(
            "Sequence lengths vary widely and are long-tailed (classification of texts, "
            "translation, speech), so random batches are mostly padding."
        ),
        hurts_when=(
            "Batches are no longer random draws: length correlates with content, so shuffle "
            "whole batches and check convergence. Token-budget batches hold varying numbers of "
            "samples, which changes how a per-sample mean loss weights each example. Many "
            "distinct shapes make cudnn.benchmark re-tune and torch.compile recompile; pad to a "
            "few bucket lengths to bound them. Fixed-length data gains nothing."
        ),
        measured=(
            "seqcls, batches of 16: 90.6% of tokens useful with LengthBucketBatchSampler against "
            "13.6% for random batches, 7.16x [5.73-7.95] the useful tokens/s; a 1024-token "
            "budget: 98.3% useful, 7.56x [6.90-7.89] (2-core AMX Xeon VM, torch 2.13.0+cpu; "
            "`python benchmarks/speedups.py --part all` (benchmarks/results/2026-11-23-cpu-"
            "speedups.json))."
        ),
        changes_numerics=True,
        devices=BOTH,
        guides=("tuning-guide",),
        how=code(
            """
            import random

            def token_budget_batches(lengths: list[int], max_tokens: int) -> list[list[int]]:
                order = sorted(range(len(lengths)), key=lengths.__getitem__)
                batches: list[list[int]] = [[]]
                for i in order:  # ascending: lengths[i] is the batch's padded length
                    if batches[-1] and (len(batches[-1]) + 1) * lengths[i] > max_tokens:
                        batches.append([])
                    batches[-1].append(i)
                random.shuffle(batches)  # keep the order of steps random; rebuild each epoch
                return batches

            sampler = token_budget_batches(lengths, max_tokens=16_384)
            loader = DataLoader(data, batch_sampler=sampler, collate_fn=pad_batch)
            """
        ),
    ),
)


# How many loader workers a training run starts from: the one home of this rule, read by
# prepare()'s verb (loader_settings), apply's edit, the script tune's trial and the bench (issue
# 31: each wrote it, and the tune tried one worker a core where the verb and the edit took at
# most four). On CUDA, 4: "num_workers = 4 * num_GPU", the rule of thumb of the faster-training
# memo and seven-tips-zh guides, one process driving one GPU; fewer where the cores are fewer,
# the main process keeping one to run the step's Python, queue kernels and pin batches. On CPU,
# none: the workers take cores from the step's intra-op threads (one worker measured 0.91x on
# cnn, 2-core AMX Xeon, torch 2.13; "loader-workers" above).
MOST_WORKERS = 4


def loader_workers(device: str, cores: int) -> int:
    """The loader workers to start from on ``device`` ("cpu", "cuda", "cuda:1"), with ``cores``
    usable by this process (under torchrun, its share of the machine's)."""
    if cores < 1:
        raise ValueError(f"cores must be >= 1, got {cores}")
    return max(0, min(MOST_WORKERS, cores - 1)) if device.split(":")[0] == "cuda" else 0


def trial_workers(cores: int) -> int:
    """The workers a trial of loader workers tries where no count was measured: the CUDA
    starting count, and at least one, on any device (the trial measures whether they pay)."""
    return max(1, loader_workers("cuda", cores))
