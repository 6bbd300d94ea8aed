"""The catalogue entries of the precision and optimizer families, in catalogue order."""

from __future__ import annotations

from torchpace.catalog.schema import BOTH, CUDA, Technique, code

ENTRIES: tuple[Technique, ...] = (
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
            "bfloat16 than in float32 on some backends, so measure per workload. On Hopper "
            "GPUs scaled-dot-product attention in bfloat16 can take the cuDNN backend, which "
            "builds a graph for each new input shape: batches padded to their longest sequence "
            "pay that on most steps; pin the flash or efficient backend (attention-backend)."
        ),
        measured=(
            "Train step against fp32: cnn 1.95x [1.92-2.00] (2.42x [2.37-2.48] with "
            "channels_last); lm (1m preset) 0.75x [0.74-0.77], because the CPU flash-attention "
            "backward runs about 4.5x slower in bf16 than in fp32 (53 vs 12 ms at 32x4x128x32); lm"
            " with the math attention backend 1.25x [1.23-1.28]; seqcls 0.74x [0.49-0.81], its "
            "spread following the batch lengths (2-core AMX Xeon VM, torch 2.13.0+cpu; `python "
            "benchmarks/cpu_techniques.py` (benchmarks/results/2026-11-21-cpu-techniques.json)). "
            "Whole run of examples/naive_seqcls.py (200 steps, variable lengths) with bf16 and "
            "the other CUDA edits of `apply`: 2.6x slower than as written, 1.19x faster with "
            "torch.backends.cuda.enable_cudnn_sdp(False) (one H200, torch 2.11.0+cu130, one "
            "run each; benchmarks/results/2026-11-27-gpu-check-h200-apply.json)."
        ),
        changes_numerics=True,
        devices=BOTH,
        guides=("tuning-guide", "single-gpu-ru"),
        how=code(
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
        id="float32-not-float64",
        title="Train in float32, not float64",
        family="precision",
        mechanism=(
            "A float64 number is twice as wide as a float32 one, so a SIMD register or a memory "
            "transfer carries half as many: a CPU's float64 matmul runs at half its float32 "
            "rate at best, and most GPUs have a fraction of their float32 units for float64 "
            "(1/2 on data-centre parts, 1/32 to 1/64 on consumer ones), with no Tensor Core "
            "path for it in training. Parameters, activations and gradients also take twice "
            "the memory and bandwidth."
        ),
        helps_when=(
            "The model runs in float64 without needing it: a numpy float64 array turned into a "
            "tensor (torch.from_numpy keeps the dtype), a .double() call copied from a "
            "scientific example, or torch.set_default_dtype(torch.float64)."
        ),
        hurts_when=(
            "The problem needs double precision: ill-conditioned linear algebra, long "
            "recurrences whose error grows, some physics and finance models, gradient checks. "
            "It changes numerics, so training is checked against the baseline's band."
        ),
        measured=(
            "1024x1024 matmul on the 2-core AMD EPYC VM (AVX2, no AVX-512), torch 2.13.0+cpu, "
            "2 threads: 14.1 ms in float32 (0.15 TFLOP/s), 30.7-31.8 ms in float64, 2.2x "
            "(medians of 15, 4 repeats, quiet machine)."
        ),
        changes_numerics=True,
        devices=BOTH,
        guides=(),
        how=code(
            """
            model = model.float()  # parameters and buffers to float32
            x = torch.from_numpy(array).float()  # a float64 numpy array stays float64 otherwise
            """
        ),
    ),
    Technique(
        id="tf32",
        title="Reduced-precision float32 matmuls (TF32 on GPUs, bf16 inside oneDNN on CPUs)",
        family="precision",
        mechanism=(
            "On Ampere and newer GPUs, Tensor Cores can compute float32 matrix products in TF32: "
            "inputs rounded to a 10-bit mantissa, products accumulated in float32, tensors still "
            "stored as float32, so the speed-up needs no change to the model. PyTorch allows it "
            "for cuDNN convolutions by default but not for matmuls, which "
            "torch.set_float32_matmul_precision('high') turns on. The guides predate TF32; it "
            "is the no-code route to the Tensor Cores the tuning guide's precision advice is "
            "about. On CPUs with AMX, torch.set_float32_matmul_precision('medium') lets oneDNN "
            "run float32 matmuls in bf16 on the AMX tiles in the same way."
        ),
        helps_when=(
            "float32 training on an Ampere or newer GPU, or on a CPU with AMX, dominated by "
            "matmuls (linear layers, attention), where mixed precision is not used or not yet "
            "trusted."
        ),
        hurts_when=(
            "Matmul inputs keep about three significant decimal digits instead of about seven, "
            "which matters for numerically sensitive work (ill-conditioned linear algebra, some "
            "scientific models) and ends bit-for-bit agreement with float32 runs. GPUs before "
            "Ampere ignore the setting, and when autocast already runs matmuls in 16 bits it "
            "adds nothing."
        ),
        measured=(
            "1024x1024 float32 matmul on the 2-core AMX Xeon VM, torch 2.13.0+cpu: 6.1 ms "
            "(0.35 TFLOP/s) at 'highest', 1.8 ms (1.20 TFLOP/s) at 'medium', 3.4x; max abs "
            "error against float64 0.39 on entries of size ~32 (median of 15 runs, 4 repeats)."
        ),
        changes_numerics=True,
        process_wide=True,
        devices=BOTH,
        guides=("tuning-guide",),
        how=code(
            """
            torch.set_float32_matmul_precision("high")  # float32 matmuls may use TF32
            # on a CPU with AMX: "medium" lets oneDNN compute float32 matmuls in bf16
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
        devices=BOTH,
        guides=("faster-training-memo",),
        how=code(
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
            "and on CPU its gain is small and can turn negative (1.09x here, see Measured); torch "
            "makes it the default only on accelerators. fused=True needs floating-point "
            "parameters on a supported device and cannot be combined with foreach=True or "
            "differentiable=True. When forward and backward dominate the step the saving is small."
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
        devices=BOTH,
        guides=("single-gpu-ru", "tuning-guide"),
        how=code(
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
        devices=BOTH,
        guides=("tuning-guide",),
        how=code(
            """
            optimizer.zero_grad(set_to_none=True)  # the default since PyTorch 2.0
            # instead of optimizer.zero_grad(set_to_none=False), or p.grad.zero_() per parameter
            """
        ),
    ),
)


# The precisions a plan, prepare()'s verb and the tune can ask autocast for: the one home of the
# choice (issue 31: train/plan.py and speedups/precision.py each declared it). "auto" is bf16
# where the device computes it natively, else float32; "off" is float32.
AMP_CHOICES: tuple[str, ...] = ("off", "auto", "bf16", "fp16")


# The optimizers with a fused kernel (fused=True), by torch.optim class name, and the devices it
# runs on, in torch 2.13: the one home of this fact. The doctor's finding, prepare()'s verb, the
# tune's candidate, apply's edit and lint's rule read it (issue 31: five copies disagreed, and
# the doctor recommended fused Adagrad on CUDA, which the verb refused). Adagrad's kernel is
# CPU-only (its _device_dtype_check_for_fused call passes cuda_unsupported=True).
FUSED_KERNELS: dict[str, tuple[str, ...]] = {
    "Adam": ("cpu", "cuda"),
    "AdamW": ("cpu", "cuda"),
    "SGD": ("cpu", "cuda"),
    "Adagrad": ("cpu",),
}


def fused_on(optimizer: str, device: str) -> bool:
    """Whether the torch.optim class named ``optimizer`` has a fused kernel on ``device``
    ("cpu" or "cuda"; "cuda:1" counts as "cuda")."""
    return device.split(":")[0] in FUSED_KERNELS.get(optimizer, ())
