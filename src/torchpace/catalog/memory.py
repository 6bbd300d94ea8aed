"""The catalogue entries of the memory, evaluation and debug families, in catalogue order."""

from __future__ import annotations

from torchpace.catalog.schema import BOTH, CUDA, Technique, code

ENTRIES: tuple[Technique, ...] = (
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
        devices=BOTH,
        guides=("tuning-guide",),
        how=code(
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
        devices=CUDA,
        guides=("seven-tips-zh",),
        how=code(
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
        devices=BOTH,
        guides=("tuning-guide",),
        how=code(
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
        devices=BOTH,
        guides=("tuning-guide",),
        how=code(
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
)
