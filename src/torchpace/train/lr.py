"""Learning-rate scaling when the batch size changes (``Plan.lr_scaling``).

linear: Goyal et al. 2017, "Accurate, Large Minibatch SGD" (SGD, with warm-up);
sqrt: Krizhevsky 2014 / Hoffer et al. 2017, the usual rule for adaptive optimizers like Adam.
Neither is a law: ``torchpace tune`` re-checks convergence after scaling.
"""

from __future__ import annotations

import math

RULES = ("linear", "sqrt", "none")


def scale_lr(lr: float, base_batch: int, batch: int, *, rule: str) -> float:
    """``lr`` tuned at ``base_batch``, scaled for ``batch``."""
    if rule not in RULES:
        raise ValueError(f"lr scaling rule must be one of {', '.join(RULES)}; got {rule!r}")
    if base_batch <= 0 or batch <= 0:
        raise ValueError(f"batch sizes must be positive; got base {base_batch}, new {batch}")
    ratio = batch / base_batch
    if rule == "linear":
        return lr * ratio
    if rule == "sqrt":
        return lr * math.sqrt(ratio)
    return lr
