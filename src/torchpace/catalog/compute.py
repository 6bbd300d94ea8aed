"""The catalogue entries of the compute and syncs families, in catalogue order."""

from __future__ import annotations

from torchpace.catalog.schema import BOTH, CUDA, Technique, code

ENTRIES: tuple[Technique, ...] = (
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
        devices=BOTH,
        guides=(),
        how=code(
            """
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with torch.autocast("cpu", dtype=torch.bfloat16), sdpa_kernel(SDPBackend.MATH):
                loss = loss_fn(model(x), y)
            """
        ),
    ),
    Technique(
        id="sdpa-attention",
        title="Fused scaled-dot-product attention instead of attention written by hand",
        family="compute",
        mechanism=(
            "Attention written as q @ k.transpose(-2, -1), a scale, a mask, softmax and @ v runs "
            "as separate kernels and materialises the whole attention matrix in memory, forward "
            "and backward. F.scaled_dot_product_attention computes the same function in one "
            "call that dispatches to fused kernels (flash, memory-efficient, cuDNN) which never "
            "store the full matrix, and on a CPU to a fused flash kernel as well."
        ),
        helps_when=(
            "Transformers whose attention is written by hand, on CUDA above all, with sequences "
            "long enough that the attention matrix dominates memory traffic."
        ),
        hurts_when=(
            "Code that needs the attention weights themselves (visualised, returned, used in a "
            "loss): the fused kernels do not return them. Masks and dropout must be passed as "
            "SDPA's arguments (attn_mask, is_causal, dropout_p), and a custom score function "
            "(relative position biases added after the scale, talking heads) may not fit."
        ),
        measured="",
        changes_numerics=False,
        devices=BOTH,
        guides=("tuning-guide",),  # "Fuse pointwise operations": one kernel, one pass over memory
        how=code(
            """
            import torch.nn.functional as F

            # att = (q @ k.transpose(-2, -1)) * k.size(-1) ** -0.5
            # att = att.masked_fill(mask == 0, float("-inf")).softmax(dim=-1)
            # y = att @ v
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            """
        ),
    ),
    Technique(
        id="modules-built-once",
        title="Build modules once in __init__, not in forward()",
        family="compute",
        mechanism=(
            "An nn.Linear, nn.LayerNorm or nn.Conv2d created inside forward() allocates and "
            "randomly initialises new weights on every call, on the host unless told otherwise, "
            "and those weights are never seen by the optimizer: the step pays the allocation and "
            "initialisation (and often a host-to-device copy), and the layer never trains. Built "
            "once in __init__, the layer is a registered submodule that moves with the model and "
            "learns."
        ),
        helps_when="Always: a module with parameters made per call is both slow and a bug.",
        hurts_when=(
            "Never for speed. A deliberately fresh random projection per call (rare) should be "
            "written as a functional call on a tensor drawn on the device instead."
        ),
        measured="",
        changes_numerics=True,
        devices=BOTH,
        guides=("tuning-guide",),  # "Create tensors directly on the target device"
        how=code(
            """
            class Block(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.proj = nn.Linear(d, d)  # once, registered, trained

                def forward(self, x):
                    return self.proj(x)  # not nn.Linear(d, d)(x)
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
        process_wide=True,
        devices=CUDA,
        guides=("tuning-guide", "faster-training-memo", "single-gpu-ru", "faster-on-gpus"),
        how=code(
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
        measured=(
            "cnn train step 1.26x [1.23-1.27] after a 19 s compile; lm 0.98x; the fast preset "
            "with compile 3.58x against naive cnn; seqcls recompiles for new lengths (2-core AMX "
            "Xeon VM, torch 2.13.0+cpu; `python benchmarks/speedups.py --part all` "
            "(benchmarks/results/2026-11-23-cpu-speedups.json))."
        ),
        changes_numerics=True,
        devices=BOTH,
        guides=("tuning-guide", "single-gpu-ru"),
        how=code(
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
            "on a channels_last tensor can fail where .reshape() or .flatten() works. On CPUs, "
            "oneDNN computes the weight gradient of a 1x1 strided convolution with fewer input "
            "channels than its block (8, or 16 with AVX-512) wrong in channels_last, and crashes "
            "with one thread (uxlfoundation/oneDNN#6035): torchpace leaves such a model as it is."
        ),
        measured=(
            "cnn train step against fp32 NCHW: 1.18x [1.13-1.22] alone, 2.42x [2.37-2.48] together"
            " with bf16 autocast against 1.95x for bf16 alone (2-core AMX Xeon VM, torch "
            "2.13.0+cpu; `python benchmarks/cpu_techniques.py` "
            "(benchmarks/results/2026-11-21-cpu-techniques.json))."
        ),
        changes_numerics=False,
        devices=BOTH,
        guides=("tuning-guide",),
        how=code(
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
        measured=(
            "cnn train step, 9 biases folded into BatchNorm: 1.04x [1.01-1.06] against the naive "
            "step (2-core AMX Xeon VM, torch 2.13.0+cpu; `python benchmarks/speedups.py --part "
            "all` (benchmarks/results/2026-11-23-cpu-speedups.json))."
        ),
        changes_numerics=False,
        devices=BOTH,
        guides=("tuning-guide",),
        how=code(
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
        devices=CUDA,
        guides=("tuning-guide",),
        how=code(
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
        devices=BOTH,
        guides=(
            "tuning-guide",
            "faster-training-memo",
            "single-gpu-ru",
            "seven-tips-zh",
            "faster-on-gpus",
        ),
        how=code(
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
        devices=CUDA,
        guides=("tuning-guide", "seven-tips-zh"),
        how=code(
            """
            noise = torch.randn(batch_size, latent_dim, device=x.device)  # not randn(...).cuda()
            positions = torch.arange(seq_len, device=x.device)
            """
        ),
    ),
)
