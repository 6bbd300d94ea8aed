"""Learning-rate scaling when the batch size changes (``Plan.lr_scaling``).

linear: Goyal et al. 2017, "Accurate, Large Minibatch SGD" (SGD, with warm-up);
sqrt: Krizhevsky 2014 / Hoffer et al. 2017, the usual rule for adaptive optimizers like Adam.
Neither is a law: ``torchpace tune`` re-checks convergence after scaling.
"""

from __future__ import annotations

import math

RULES = ("linear", "sqrt", "none")
# The one default (issue 31: the plan said "linear", the tune "sqrt"): the rule for the adaptive
# optimizers most scripts train with; the tune re-checks convergence whichever rule it uses.
DEFAULT = "sqrt"
# Each rule as the power of the batch ratio it multiplies the LR by (apply's source edits).
EXPONENT = {"linear": 1.0, "sqrt": 0.5, "none": 0.0}


def scale_lr(lr: float, base_batch: int, batch: int, *, rule: str) -> float:
    """``lr`` tuned at ``base_batch``, scaled for ``batch``."""
    if rule not in RULES:
        raise ValueError(f"lr scaling rule must be one of {', '.join(RULES)}; got {rule!r}")
    if base_batch <= 0 or batch <= 0:
        raise ValueError(f"batch sizes must be positive; got base {base_batch}, new {batch}")
    return lr * math.pow(batch / base_batch, EXPONENT[rule])
