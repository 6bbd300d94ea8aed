"""``torchpace tune``: try each technique on the user's own recipe, in fresh processes, and keep
the fastest plan that still converges. Importing this package does not import torch."""

from __future__ import annotations

# The catalogue ids a tune can put in a plan (candidates.py, the batch and loader searches),
# and those fit() always applies when it runs the plan (no per-step syncs, freed gradients,
# evaluation under inference_mode). The doctor says "applied by torchpace tune" for these only.
APPLIES: frozenset[str] = frozenset(
    {
        "amp-bf16",
        "amp-fp16",
        "attention-backend",
        "channels-last",
        "conv-bias-before-bn",
        "fused-optimizer",
        "tf32",
        "length-bucketing",
        "torch-compile",
        "max-batch-size",
        "loader-workers",
        "avoid-syncs",
        "grad-set-to-none",
        "no-grad-eval",
    }
)

# Of those, what only fit() applies: a training script's own loop keeps its logging cadence and
# its evaluation, and a script tune's plan leaves them out. The doctor, whose target is always a
# script, says "Tune verifies it" for SCRIPT_APPLIES only.
FIT_ONLY: frozenset[str] = frozenset({"avoid-syncs", "no-grad-eval"})
SCRIPT_APPLIES: frozenset[str] = APPLIES - FIT_ONLY
