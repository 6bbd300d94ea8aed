"""The technique catalogue: every technique of the guides, as data.

Every lint rule, doctor finding, tune trial and plan entry names one of these ids. This module
must stay importable without torch (``torchpace lint`` imports it).

The entries explain each technique in this project's own words and cite the guides where it
appears. ``measured`` stays empty until a figure has been measured on named hardware; no entry
states a speed-up that a guide or a measurement does not back.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Device = Literal["cpu", "cuda"]
Family = Literal[
    "loading",
    "batching",
    "precision",
    "optimizer",
    "compute",
    "syncs",
    "memory",
    "evaluation",
    "debug",
    "distributed",
    "schedule",
]


@dataclass(frozen=True)
class Guide:
    """One of the five guides the catalogue is built from (../shared/guides)."""

    key: str
    title: str
    author: str
    language: str


GUIDES: dict[str, Guide] = {
    g.key: g
    for g in (
        Guide("tuning-guide", "PyTorch Performance Tuning Guide", "Szymon Migacz", "en"),
        Guide(
            "faster-training-memo",
            "PyTorch | Tricks for Faster Training (after Lorenz Kuhn's 2021 guide)",
            "memo",
            "en",
        ),
        Guide("single-gpu-ru", "Рекомендации по ускорению тренировок на одной GPU", "—", "ru"),
        Guide("seven-tips-zh", "7個提升PyTorch性能的技巧 (PyTorch Lightning team)", "—", "zh"),
        Guide("faster-on-gpus", "Techniques to make PyTorch code run faster on GPUs", "—", "en"),
    )
}


@dataclass(frozen=True)
class Technique:
    """One speed technique. ``id`` is stable: it is stored in plans, results and rule metadata."""

    id: str
    title: str
    family: Family
    mechanism: str  # why it is faster
    helps_when: str
    hurts_when: str
    measured: str  # what was measured on this project's hardware, naming it; "" if not yet
    changes_numerics: bool
    devices: tuple[Device, ...]
    guides: tuple[str, ...]  # keys of GUIDES
    how: str  # a minimal code example of the technique applied


def get(technique_id: str) -> Technique:
    """Return the technique with this id, or raise KeyError naming the known ids."""
    for t in TECHNIQUES:
        if t.id == technique_id:
            return t
    known = ", ".join(t.id for t in TECHNIQUES)
    raise KeyError(f"unknown technique id {technique_id!r}; known ids: {known}")


def ids() -> tuple[str, ...]:
    """All technique ids, in catalogue order."""
    return tuple(t.id for t in TECHNIQUES)


def for_device(device: Device) -> Iterable[Technique]:
    """The techniques that apply to ``device``, in catalogue order."""
    return (t for t in TECHNIQUES if device in t.devices)


def _code(text: str) -> str:
    """A code example written indented inside this file, returned flush left."""
    return textwrap.dedent(text).strip("\n")


_BOTH: tuple[Device, ...] = ("cpu", "cuda")
_CUDA: tuple[Device, ...] = ("cuda",)

# Ordered by family (in the order of ``Family``), then from the most to the least common case.
TECHNIQUES: tuple[Technique, ...] = (
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
            "cnn train step on CPU, one worker against none (bf16 + channels_last + fused AdamW "
            "both): 2.40x against 2.59x over naive, i.e. slightly slower: on 2 cores the worker "
            "takes a core from the step (2-core AMX Xeon VM, torch 2.13.0+cpu; paired, 6 rounds of"
            " 4 steps)."
        ),
        changes_numerics=False,
        devices=_BOTH,
        guides=("tuning-guide", "faster-training-memo", "single-gpu-ru", "seven-tips-zh"),
        how=_code(
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
        devices=_CUDA,
        guides=(
            "tuning-guide",
            "faster-training-memo",
            "single-gpu-ru",
            "seven-tips-zh",
            "faster-on-gpus",
        ),
        how=_code(
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
        devices=_CUDA,
        guides=("faster-training-memo",),
        how=_code(
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
        devices=_BOTH,
        guides=("single-gpu-ru",),
        how=_code(
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
        devices=_BOTH,
        guides=("tuning-guide",),
        how=_code(
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
        devices=_BOTH,
        guides=("faster-training-memo", "single-gpu-ru"),
        how=_code(
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
        devices=_BOTH,
        guides=("tuning-guide", "single-gpu-ru"),
        how=_code(
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
        measured="",
        changes_numerics=True,
        devices=_BOTH,
        guides=("tuning-guide",),
        how=_code(
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
    # -------------------------------------------------------------- precision
    Technique(
        id="amp-fp16",
        title="Automatic mixed precision in float16, with GradScaler",
        family="precision",
        mechanism=(
            "Inside torch.autocast, matrix multiplications and convolutions run in float16 on "
            "Tensor Cores, at a far higher peak rate than float32 math, while ops that need "
            "range or precision (reductions, softmax, losses) stay in float32; activations "
            "kept in float16 also halve memory traffic. Small float16 gradients would underflow "
            "to zero, so GradScaler multiplies the loss before backward, unscales the gradients "
            "before the step, and skips steps whose gradients overflowed."
        ),
        helps_when=(
            "A GPU with Tensor Cores (Volta or newer) and a step dominated by matmuls and "
            "convolutions, with dimensions that are multiples of 8. The tuning guide reports up "
            "to 3x overall on Volta and newer GPUs; the Lightning team's tips claim 3-8x on "
            "V100 and 2080 Ti. On Ampere and newer, amp-bf16 usually gives the same speed "
            "without a scaler."
        ),
        hurts_when=(
            "float16 tops out at 65504 and loses small values: the scaler protects gradients, "
            "but activations beyond that range or custom ops autocast does not know can still "
            "produce inf or NaN. GPUs without Tensor Cores and small launch-bound models gain "
            "little. Gradient clipping, several losses or several optimizers need the scaler's "
            "documented recipe (unscale_ before clipping), as the Russian guide warns."
        ),
        measured="",
        changes_numerics=True,
        devices=_CUDA,
        guides=(
            "tuning-guide",
            "faster-training-memo",
            "single-gpu-ru",
            "seven-tips-zh",
            "faster-on-gpus",
        ),
        how=_code(
            """
            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                optimizer.zero_grad(set_to_none=True)
                with torch.autocast(device_type="cuda", dtype=torch.float16):
                    loss = loss_fn(model(x), y)
                scaler.scale(loss).backward()  # scaled so small gradients do not flush to zero
                scaler.step(optimizer)  # unscales; skips the step if a gradient is inf or NaN
                scaler.update()
            """
        ),
    ),
    Technique(
        id="amp-bf16",
        title="Automatic mixed precision in bfloat16",
        family="precision",
        mechanism=(
            "bfloat16 keeps float32's 8-bit exponent, and so its range, which lets autocast run "
            "matmuls and convolutions in 16 bits without loss scaling. GPUs from Ampere on run "
            "it on Tensor Cores, and CPUs with AVX512-BF16 or AMX run bfloat16 matmuls and "
            "convolutions through oneDNN faster than float32 ones. The guides speak of 16-bit "
            "mixed precision in general; this is the form that needs no GradScaler and also "
            "pays off on CPUs."
        ),
        helps_when=(
            "Matmul- or convolution-heavy steps on an Ampere or newer GPU, or on a CPU with "
            "native bfloat16 instructions (lscpu lists amx_bf16 or avx512_bf16)."
        ),
        hurts_when=(
            "Its 8-bit mantissa (7 bits stored) is coarser than float16's, so precision-"
            "sensitive code can drift; autocast keeps the known-sensitive ops in float32. "
            "Without hardware support (GPUs before Ampere, CPUs without AVX512-BF16 or AMX) "
            "bfloat16 is emulated or converted back and forth and can be slower than float32. "
            "Small models pay for the casts and gain little, and some kernels are slower in "
            "bfloat16 than in float32 on some backends, so measure per workload."
        ),
        measured=(
            "Train step against fp32: cnn 1.95x [1.92-2.00] (2.42x [2.37-2.48] with "
            "channels_last); lm (1m preset) 0.75x [0.74-0.77], because the CPU flash-attention "
            "backward runs about 4.5x slower in bf16 than in fp32 (53 vs 12 ms at 32x4x128x32); lm"
            " with the math attention backend 1.25x [1.23-1.28]; seqcls 0.74x [0.49-0.81], its "
            "spread following the batch lengths (2-core AMX Xeon VM, torch 2.13.0+cpu; `python "
            "benchmarks/cpu_techniques.py` (benchmarks/results/2026-11-21-cpu-techniques.json))."
        ),
        changes_numerics=True,
        devices=_BOTH,
        guides=("tuning-guide", "single-gpu-ru"),
        how=_code(
            """
            device_type = "cuda"  # or "cpu" on a CPU with AMX or AVX512-BF16
            for x, y in loader:
                with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
                    loss = loss_fn(model(x), y)
                loss.backward()  # no GradScaler: bfloat16 has float32's exponent range
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            """
        ),
    ),
    Technique(
        id="tf32",
        title="TensorFloat-32 for float32 matmuls and convolutions",
        family="precision",
        mechanism=(
            "On Ampere and newer GPUs, Tensor Cores can compute float32 matrix products in TF32: "
            "inputs rounded to a 10-bit mantissa, products accumulated in float32, tensors still "
            "stored as float32, so the speed-up needs no change to the model. PyTorch allows it "
            "for cuDNN convolutions by default but not for matmuls, which "
            "torch.set_float32_matmul_precision('high') turns on. The guides predate TF32; it "
            "is the no-code route to the Tensor Cores the tuning guide's precision advice is "
            "about."
        ),
        helps_when=(
            "float32 training on an Ampere or newer GPU, dominated by matmuls (linear layers, "
            "attention), where mixed precision is not used or not yet trusted."
        ),
        hurts_when=(
            "Matmul inputs keep about three significant decimal digits instead of about seven, "
            "which matters for numerically sensitive work (ill-conditioned linear algebra, some "
            "scientific models) and ends bit-for-bit agreement with float32 runs. GPUs before "
            "Ampere ignore the setting, and when autocast already runs matmuls in 16 bits it "
            "adds nothing."
        ),
        measured="",
        changes_numerics=True,
        devices=_CUDA,
        guides=("tuning-guide",),
        how=_code(
            """
            torch.set_float32_matmul_precision("high")  # float32 matmuls may use TF32
            torch.backends.cudnn.allow_tf32 = True  # convolutions: already PyTorch's default
            """
        ),
    ),
    # -------------------------------------------------------------- optimizer
    Technique(
        id="adamw",
        title="AdamW (decoupled weight decay) instead of Adam with L2",
        family="optimizer",
        mechanism=(
            "Adam's weight_decay adds an L2 term to the gradient, which the adaptive denominator "
            "then rescales, so parameters with a large gradient history are hardly regularised. "
            "AdamW shrinks the weights directly, apart from the gradient statistics, which "
            "regularises as intended and often reaches a given accuracy in fewer epochs. The "
            "gain is in time to accuracy; a step costs the same."
        ),
        helps_when=(
            "A model trained with Adam and weight_decay > 0 (with no weight decay the two "
            "optimizers are identical), typically transformers and other Adam-trained networks."
        ),
        hurts_when=(
            "The decay coefficient does not carry over: a value tuned as Adam's L2 term means "
            "something else in AdamW, so it needs retuning (AdamW defaults to 0.01, Adam to 0). "
            "Decaying biases and normalisation weights is usually unwanted; give them a "
            "parameter group with weight_decay=0."
        ),
        measured="",
        changes_numerics=True,
        devices=_BOTH,
        guides=("faster-training-memo",),
        how=_code(
            """
            # was: torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
            params = [p for p in model.parameters() if p.requires_grad]
            decay = [p for p in params if p.ndim >= 2]  # weights of linear and conv layers
            no_decay = [p for p in params if p.ndim < 2]  # biases and normalisation weights
            groups = [
                {"params": decay, "weight_decay": 0.05},
                {"params": no_decay, "weight_decay": 0.0},
            ]
            optimizer = torch.optim.AdamW(groups, lr=1e-3)
            """
        ),
    ),
    Technique(
        id="fused-optimizer",
        title="Fused or multi-tensor (foreach) optimizer kernels",
        family="optimizer",
        mechanism=(
            "The plain for-loop implementation updates one parameter tensor at a time, launching "
            "several small kernels for each and reading and writing the optimizer state several "
            "times. foreach=True runs each elementwise op over all parameters in a few "
            "multi-tensor kernels, and fused=True performs the whole update in one pass over "
            "many tensors, on CUDA and, for Adam, AdamW, SGD and Adagrad in current releases, on "
            "CPU. Results match the for-loop version up to floating-point rounding, which is why "
            "the catalogue counts it as numerics-preserving."
        ),
        helps_when=(
            "Models with many parameter tensors, where the optimizer step is a visible share of "
            "the step (small and medium models, short steps); fused AdamW pays off on CPU as "
            "well. The Russian guide points to apex's FusedAdam, which the built-in fused=True "
            "now replaces."
        ),
        hurts_when=(
            "foreach materialises intermediates for all parameters at once, raising peak memory, "
            "and on some CPUs it is slower than the plain loop, which is why it is the default "
            "only on accelerators. fused=True needs floating-point parameters on a supported "
            "device and cannot be combined with foreach=True or differentiable=True. When "
            "forward and backward dominate the step the saving is small."
        ),
        measured=(
            "AdamW step over the 20M-parameter lm preset, paired against the for-loop default: "
            "fused 5.6x [5.4-6.0], foreach 1.09x [1.07-1.11] (2-core AMX Xeon VM, torch "
            "2.13.0+cpu; `python benchmarks/cpu_techniques.py` "
            "(benchmarks/results/2026-11-21-cpu-techniques.json)). On the cnn workload (0.3M "
            "parameters) the optimizer is a small share of the step and fused AdamW measured 0.98x"
            " [0.92-1.00]."
        ),
        changes_numerics=False,
        devices=_BOTH,
        guides=("single-gpu-ru", "tuning-guide"),
        how=_code(
            """
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
            # or the multi-tensor path (the default on CUDA when neither flag is given):
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
            """
        ),
    ),
    Technique(
        id="grad-set-to-none",
        title="Free gradients instead of zeroing them",
        family="optimizer",
        mechanism=(
            "Zeroing gradients writes zeros into every gradient tensor, and the next backward "
            "reads them back to add into. zero_grad(set_to_none=True) drops the tensors instead: "
            "backward then writes the first gradient directly, and the memory is free between "
            "the optimizer step and the next backward. It is the default of optimizer.zero_grad() "
            "and module.zero_grad() since PyTorch 2.0."
        ),
        helps_when=(
            "Code calls zero_grad(set_to_none=False) or zeroes gradients by hand (p.grad.zero_(), "
            "p.grad.fill_(0)), as older scripts do; models with many parameter tensors gain the "
            "most."
        ),
        hurts_when=(
            "Code that reads .grad after zeroing and expects a tensor (gradient logging, "
            "clipping or custom update code looping over p.grad) gets None. The optimizer skips "
            "a parameter whose grad is None, whereas a zero gradient still lets momentum and "
            "weight decay move it; numerics change only for parameters that get no gradient in "
            "some steps, which is why the catalogue counts it as numerics-preserving."
        ),
        measured=(
            "cnn train step with set_to_none=True and no per-step loss.item(), against zeroing and"
            " reading every step: 0.95x [0.88-0.99], i.e. no gain on CPU at 0.3M parameters "
            "(2-core AMX Xeon VM, torch 2.13.0+cpu; `python benchmarks/cpu_techniques.py` "
            "(benchmarks/results/2026-11-21-cpu-techniques.json))."
        ),
        changes_numerics=False,
        devices=_BOTH,
        guides=("tuning-guide",),
        how=_code(
            """
            optimizer.zero_grad(set_to_none=True)  # the default since PyTorch 2.0
            # instead of optimizer.zero_grad(set_to_none=False), or p.grad.zero_() per parameter
            """
        ),
    ),
    # ---------------------------------------------------------------- compute
    Technique(
        id="attention-backend",
        title="Choose the scaled-dot-product-attention backend per device and dtype",
        family="compute",
        mechanism=(
            "F.scaled_dot_product_attention dispatches to one of several kernels (flash, "
            "memory-efficient, cuDNN, or the plain math composition). Their speed differs by "
            "device, dtype, head size and sequence length, and the default choice is not always "
            "the fastest: torch.nn.attention.sdpa_kernel pins the backend for a region."
        ),
        helps_when=(
            "A transformer under bf16 autocast on a CPU, with short sequences, where the fused "
            "CPU flash-attention backward is slower in bf16 than the math backend."
        ),
        hurts_when=(
            "Long sequences: the math backend materialises the full attention matrix, so its "
            "memory and time grow with the square of the length (seqcls with up to 1024 padded "
            "tokens ran 0.37x as fast with it). On GPUs the fused kernels usually win; measure "
            "before pinning a backend."
        ),
        measured=(
            "lm (1m preset, 128-token windows) train step against fp32: bf16 with the default "
            "backend 0.75x [0.74-0.77], bf16 with the math backend 1.25x [1.23-1.28]; seqcls "
            "fp32 with the math backend 0.37x [0.35-0.51] (2-core AMX Xeon VM, torch "
            "2.13.0+cpu; `python benchmarks/cpu_techniques.py`)."
        ),
        changes_numerics=False,
        devices=_BOTH,
        guides=(),
        how=_code(
            """
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with torch.autocast("cpu", dtype=torch.bfloat16), sdpa_kernel(SDPBackend.MATH):
                loss = loss_fn(model(x), y)
            """
        ),
    ),
    Technique(
        id="cudnn-benchmark",
        title="cuDNN convolution auto-tuner",
        family="compute",
        mechanism=(
            "cuDNN has several algorithms for each convolution, and by default PyTorch picks one "
            "by heuristics. With torch.backends.cudnn.benchmark = True, the first call for each "
            "new input configuration (shapes, dtype, layout) times the candidates and caches the "
            "fastest, so later calls with that configuration run the best kernel for this GPU."
        ),
        helps_when=(
            "Convolutional networks on CUDA whose input shapes repeat (fixed image and batch "
            "size). Other layer types are unaffected."
        ),
        hurts_when=(
            "Each new shape pays a round of benchmarking, so with highly variable input sizes "
            "the tuning can cost more than it saves. The chosen algorithm may differ between "
            "runs, so results are not bit-reproducible (PyTorch's reproducibility notes ask for "
            "it to be off), and trial algorithms can need large workspaces that raise peak "
            "memory. The algorithms compute the same convolution and differ only in rounding, "
            "which is why the catalogue counts it as numerics-preserving."
        ),
        measured="",
        changes_numerics=False,
        devices=_CUDA,
        guides=("tuning-guide", "faster-training-memo", "single-gpu-ru", "faster-on-gpus"),
        how=_code(
            """
            torch.backends.cudnn.benchmark = True  # once, before the training loop
            """
        ),
    ),
    Technique(
        id="torch-compile",
        title="Compile the model with torch.compile",
        family="compute",
        mechanism=(
            "torch.compile captures the model's Python code as graphs (TorchDynamo) and "
            "generates fused kernels for them (TorchInductor: Triton on GPU, vectorised C++ on "
            "CPU), so chains of pointwise and reduction ops read and write memory once instead "
            "of once per op, and far fewer kernels are launched; mode='reduce-overhead' also "
            "replays CUDA graphs to cut launch overhead. It supersedes the torch.jit.script "
            "fusion the guides describe; TorchScript is in maintenance mode."
        ),
        helps_when=(
            "Models with many small or memory-bound ops (normalisations, activations, attention "
            "glue, custom layers), on GPU or CPU, in runs long enough to repay the compile time."
        ),
        hurts_when=(
            "Compiling takes seconds to minutes at start and again at every recompile (new input "
            "shapes, changed Python values the graph depends on), so short runs and shape-varying "
            "inputs can end up slower. Graph breaks (.item(), data-dependent Python control "
            "flow, unsupported libraries) split the model and shrink the gain; CPU compilation "
            "needs a working C++ compiler. Fused kernels reorder floating-point operations and "
            "random ops such as dropout draw different numbers than in eager mode, so results "
            "differ from eager at rounding level."
        ),
        measured="",
        changes_numerics=True,
        devices=_BOTH,
        guides=("tuning-guide", "single-gpu-ru"),
        how=_code(
            """
            model = torch.compile(model)  # compiles on the first call; later calls reuse it

            @torch.compile  # a single hot function works too, where @torch.jit.script was used
            def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
                y = x + bias
                return 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))
            """
        ),
    ),
    Technique(
        id="channels-last",
        title="channels_last memory format for convolutional networks",
        family="compute",
        mechanism=(
            "Convolution kernels on Tensor Cores (cuDNN) and on CPUs (oneDNN) work natively on "
            "NHWC data, with channels innermost; given PyTorch's default NCHW layout they add "
            "transposes or fall back to slower kernels. Converting the model and its input to "
            "torch.channels_last keeps the network in NHWC, since convolutions, batch norm, "
            "pooling and pointwise ops preserve the format."
        ),
        helps_when=(
            "Convolutional networks, above all with mixed precision on Tensor Cores, which the "
            "tuning guide pairs it with, and with bfloat16 or float32 on CPUs through oneDNN."
        ),
        hurts_when=(
            "Networks with few convolutions, or with ops that do not keep the format (custom "
            "ops, code calling .contiguous()), pay for repeated layout conversions and can end "
            "up slower. It applies to 4-d tensors only (channels_last_3d for 5-d), and .view() "
            "on a channels_last tensor can fail where .reshape() or .flatten() works."
        ),
        measured=(
            "cnn train step against fp32 NCHW: 1.18x [1.13-1.22] alone, 2.42x [2.37-2.48] together"
            " with bf16 autocast against 1.95x for bf16 alone (2-core AMX Xeon VM, torch "
            "2.13.0+cpu; `python benchmarks/cpu_techniques.py` "
            "(benchmarks/results/2026-11-21-cpu-techniques.json))."
        ),
        changes_numerics=False,
        devices=_BOTH,
        guides=("tuning-guide",),
        how=_code(
            """
            model = model.to(memory_format=torch.channels_last)
            for x, y in loader:
                x = x.to(device, memory_format=torch.channels_last)  # a 4-d NCHW batch
                loss = loss_fn(model(x), y)
            """
        ),
    ),
    Technique(
        id="conv-bias-before-bn",
        title="No bias on a convolution followed by batch norm",
        family="compute",
        mechanism=(
            "BatchNorm subtracts the per-channel mean, which removes any per-channel constant "
            "the convolution added, so that bias is dead weight that still costs a broadcast add "
            "in forward, a reduction in backward for its gradient, and an optimizer update. "
            "bias=False removes that work without changing what the block computes."
        ),
        helps_when=(
            "Hand-written convolutional networks with convolution-then-BatchNorm pairs "
            "(torchvision's models already omit the bias), for 1-d, 2-d and 3-d convolutions, "
            "and for any norm that subtracts a mean per output channel."
        ),
        hurts_when=(
            "The saving is small per layer. If something sits between the convolution and the "
            "norm (an activation, a residual add), or the norm does not subtract a per-channel "
            "mean (GroupNorm with several channels per group, LayerNorm over channels), the bias "
            "is not redundant. Removing it changes the state_dict, so existing checkpoints no "
            "longer load strictly."
        ),
        measured="",
        changes_numerics=False,
        devices=_BOTH,
        guides=("tuning-guide",),
        how=_code(
            """
            block = nn.Sequential(
                nn.Conv2d(64, 128, kernel_size=3, padding=1, bias=False),  # BN cancels a bias
                nn.BatchNorm2d(128),
                nn.ReLU(inplace=True),
            )
            """
        ),
    ),
    Technique(
        id="sizes-multiple-of-8",
        title="Layer and batch sizes that are multiples of 8",
        family="compute",
        mechanism=(
            "Tensor Core kernels work on fixed-size tiles, and cuBLAS and cuDNN use them most "
            "efficiently for 16-bit data when the matrix dimensions (batch times sequence, "
            "hidden sizes, vocabulary, channels) are multiples of 8, per NVIDIA's guidance; "
            "larger multiples such as 64 often do better still. Other sizes waste part of each "
            "tile or fall back to slower kernels."
        ),
        helps_when=(
            "Mixed-precision training on Tensor Core GPUs where some dimension is odd: a "
            "vocabulary such as GPT-2's 50257 (padded to 50304), hidden or channel counts derived "
            "from other settings, odd batch sizes."
        ),
        hurts_when=(
            "Changing a hidden size changes the model, and padding a vocabulary adds output "
            "logits that the softmax sees unless they are masked, plus parameters to store. "
            "When sizes are already aligned, or the step is not matmul-bound, nothing changes."
        ),
        measured="",
        changes_numerics=True,
        devices=_CUDA,
        guides=("tuning-guide",),
        how=_code(
            """
            def round_up(n: int, multiple: int = 64) -> int:  # a multiple of 64 is one of 8
                return (n + multiple - 1) // multiple * multiple

            vocab_size = 50257  # GPT-2's tokenizer
            lm_head = nn.Linear(d_model, round_up(vocab_size), bias=False)  # 50304 outputs
            """
        ),
    ),
    # ------------------------------------------------------------------ syncs
    Technique(
        id="avoid-syncs",
        title="Avoid host-device synchronisation in the training loop",
        family="syncs",
        mechanism=(
            "CUDA work is asynchronous: the host queues kernels and runs ahead while the GPU "
            "works through the queue. Anything whose result the host needs now (.item(), "
            ".cpu(), .numpy(), .tolist(), printing a CUDA tensor, nonzero() and boolean-mask "
            "indexing, whose output size depends on the data, or an if on a CUDA tensor) "
            "blocks the host until the queue drains and then leaves the GPU idle while the host "
            "queues the next kernels. On CPU there is no queue to drain, but the same calls "
            "break the graph under torch.compile."
        ),
        helps_when=(
            "The loop reads a value every step (loss.item() for logging, metrics gathered with "
            ".cpu(), early-stopping checks) or uses data-dependent shapes; the doctor attributes "
            "each sync to a file and line. Log every N steps, accumulate metrics on the device, "
            "and use .detach() when the aim is only to drop the autograd graph."
        ),
        hurts_when=(
            "Some syncs are needed (logging, checkpoint decisions, NaN checks): move them to the "
            "logging cadence rather than removing them. On CPU-only runs the direct gain is "
            "small. Values kept on the device for later stay in device memory until read."
        ),
        measured="",
        changes_numerics=False,
        devices=_BOTH,
        guides=(
            "tuning-guide",
            "faster-training-memo",
            "single-gpu-ru",
            "seven-tips-zh",
            "faster-on-gpus",
        ),
        how=_code(
            """
            running = torch.zeros((), device=device)
            for step, (x, y) in enumerate(loader, start=1):
                loss = train_step(x, y)
                running += loss.detach()  # stays on the device: no sync
                if step % log_every == 0:
                    print(f"loss {running.item() / log_every:.4f}")  # note: a sync, once per N
                    running.zero_()
            # keep shapes static: torch.where(mask, x, 0.0) needs no sync; x[mask] does
            """
        ),
    ),
    Technique(
        id="create-on-device",
        title="Create tensors directly on the device",
        family="syncs",
        mechanism=(
            "torch.rand(n).cuda() allocates and fills the tensor in host memory and then copies "
            "it over, a copy from pageable memory that blocks the host. Passing device= to the "
            "factory function (rand, randn, zeros, ones, full, arange and the like) allocates "
            "and fills it on the GPU, with no host work and no transfer."
        ),
        helps_when=(
            "Tensors are created inside the step: noise for VAEs or diffusion models, masks, "
            "position ids, targets, constants."
        ),
        hurts_when=(
            "Random tensors drawn on the GPU come from the CUDA generator, so their values "
            "differ from those the CPU generator gave before (same distribution, different "
            "numbers), which matters when comparing with an older run. It has no effect on "
            "CPU-only training. A constant rebuilt every step is better created once."
        ),
        measured="",
        changes_numerics=False,
        devices=_CUDA,
        guides=("tuning-guide", "seven-tips-zh"),
        how=_code(
            """
            noise = torch.randn(batch_size, latent_dim, device=x.device)  # not randn(...).cuda()
            positions = torch.arange(seq_len, device=x.device)
            """
        ),
    ),
    # ----------------------------------------------------------------- memory
    Technique(
        id="activation-checkpointing",
        title="Activation checkpointing: recompute instead of store",
        family="memory",
        mechanism=(
            "Instead of keeping every intermediate activation of a block until backward, "
            "torch.utils.checkpoint keeps only the block's inputs and re-runs its forward during "
            "backward to rebuild them. That trades about one extra forward of each checkpointed "
            "block for much less activation memory; it speeds training up only when the memory "
            "it frees buys a larger batch that uses the device better."
        ),
        helps_when=(
            "Memory, not compute, limits the batch or model size: deep transformers or CNNs "
            "with large activations. Layers with large outputs that are cheap to recompute "
            "(activations, up- and down-sampling) are the best targets."
        ),
        hurts_when=(
            "The recomputation is always paid, so when memory is not the limit the step only "
            "gets slower. The rerun must behave like the first run: the RNG state is restored "
            "by default, which keeps dropout identical and the results exact, but BatchNorm "
            "running statistics are updated a second time and other side effects in forward "
            "happen twice."
        ),
        measured="",
        changes_numerics=False,
        devices=_BOTH,
        guides=("tuning-guide",),
        how=_code(
            """
            from torch.utils.checkpoint import checkpoint

            class Block(nn.Module):
                def forward(self, x: torch.Tensor) -> torch.Tensor:
                    # the MLP's activations are rebuilt in backward instead of kept in memory
                    return x + checkpoint(self.mlp, self.norm(x), use_reentrant=False)
            """
        ),
    ),
    Technique(
        id="avoid-empty-cache",
        title="No torch.cuda.empty_cache() in the training loop",
        family="memory",
        mechanism=(
            "PyTorch's caching allocator keeps freed GPU blocks to hand out again without asking "
            "the driver. torch.cuda.empty_cache() returns every unused cached block to the "
            "driver, which synchronises the device, and the next step has to cudaMalloc them "
            "again, which is slow. It frees nothing held by live tensors; mostly it makes "
            "nvidia-smi show a smaller number."
        ),
        helps_when=(
            "A training or evaluation loop calls empty_cache every step or every few steps, "
            "often added to fight an out-of-memory error or a worrying nvidia-smi reading."
        ),
        hurts_when=(
            "Releasing the cache is right when another process shares the GPU, or once after a "
            "phase with very different memory needs before a long phase of something else. For "
            "fragmentation, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is usually the "
            "better fix."
        ),
        measured="",
        changes_numerics=False,
        devices=_CUDA,
        guides=("seven-tips-zh",),
        how=_code(
            """
            for x, y in loader:
                loss = train_step(x, y)
                # no torch.cuda.empty_cache() here: the allocator's cache is what makes the
                # next step's allocations cheap
            # against fragmentation, start the process with
            # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
            """
        ),
    ),
    # ------------------------------------------------------------- evaluation
    Technique(
        id="no-grad-eval",
        title="No autograd during validation and inference",
        family="evaluation",
        mechanism=(
            "With autograd on, every op on tensors that require gradients records a graph node "
            "and keeps the inputs its backward would need, so activations stay in memory until "
            "the output is dropped. Under torch.no_grad() nothing is recorded and activations "
            "are freed as soon as they are used; torch.inference_mode() also skips view and "
            "version-counter tracking."
        ),
        helps_when=(
            "Validation, evaluation and inference loops, and any part of training that needs no "
            "gradient (targets from a frozen teacher, EMA weight updates). The memory saved also "
            "allows larger evaluation batches."
        ),
        hurts_when=(
            "Tensors created under inference_mode cannot later be saved for backward; use "
            "no_grad when outputs flow back into training. Neither switches layers to eval "
            "behaviour: call model.eval() for dropout and BatchNorm, and model.train() after. "
            "Evaluation that needs gradients (saliency maps, adversarial examples) cannot use "
            "them."
        ),
        measured="",
        changes_numerics=False,
        devices=_BOTH,
        guides=("tuning-guide",),
        how=_code(
            """
            model.eval()  # dropout off, BatchNorm on running statistics: separate from autograd
            with torch.inference_mode():  # or torch.no_grad() if outputs re-enter autograd
                correct = sum((model(x).argmax(1) == y).sum() for x, y in val_loader)
            model.train()
            """
        ),
    ),
    # ------------------------------------------------------------------ debug
    Technique(
        id="disable-debug-apis",
        title="Leave debugging and profiling APIs off in training runs",
        family="debug",
        mechanism=(
            "Debug tools add work to every op: anomaly detection (set_detect_anomaly, "
            "detect_anomaly) stores a Python traceback per op and checks each backward result "
            "for NaN, a host sync on CUDA; the profilers (torch.profiler.profile, "
            "torch.autograd.profiler.profile, emit_nvtx) record or annotate each op; gradcheck "
            "and gradgradcheck run extra passes in double precision. Left on in a normal run, "
            "they slow every step."
        ),
        helps_when=(
            "A training script still turns on anomaly detection or a profiler from a debugging "
            "session, or the environment sets CUDA_LAUNCH_BLOCKING=1, which makes every kernel "
            "launch synchronous."
        ),
        hurts_when=(
            "While actually hunting a NaN or a bottleneck these tools are the right ones: put "
            "them behind a flag and profile a few steps, not the whole run."
        ),
        measured="",
        changes_numerics=False,
        devices=_BOTH,
        guides=("tuning-guide",),
        how=_code(
            """
            import os

            debug = os.environ.get("TRAIN_DEBUG") == "1"
            torch.autograd.set_detect_anomaly(debug)  # on: per-op tracebacks, NaN checks
            if debug:  # profile a handful of steps on purpose, never the whole run
                with torch.profiler.profile() as prof:
                    run_steps(5)
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
            """
        ),
    ),
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
        devices=_BOTH,
        guides=("tuning-guide", "seven-tips-zh"),
        how=_code(
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
        devices=_BOTH,
        guides=("tuning-guide",),
        how=_code(
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
        devices=_BOTH,
        guides=("tuning-guide",),
        how=_code(
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
        devices=_BOTH,
        guides=("tuning-guide",),
        how=_code(
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
        devices=_BOTH,
        guides=("faster-training-memo",),
        how=_code(
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
