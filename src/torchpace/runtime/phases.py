"""The phases a training step's time is split into (the doctor's clock, its result and the
report all name them). Plain data: imports neither torch nor the hooks."""

from __future__ import annotations

# "eval": forward calls without autograd and batches of loaders other than the training one
# (an evaluation loop, mostly; a frozen teacher model too).
PHASES = ("data", "copy", "forward", "backward", "optimizer", "sync", "eval", "other")
