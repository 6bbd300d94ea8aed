"""Speed-up verbs: one per catalogue technique, object first, keyword-only options.

Each verb returns what it changed (an ``Applied`` record, or the object it builds) and is a
no-op with a ``SpeedupWarning`` where the device or torch version cannot do it. Importing this
package imports torch; ``import torchpace`` does not import it.
"""

from __future__ import annotations

from torchpace.speedups.applied import Applied, SpeedupWarning
from torchpace.speedups.batching import (
    LengthBucketBatchSampler,
    TokenBudgetBatchSampler,
    padding_stats,
)
from torchpace.speedups.bucketed_loader import bucket_by_length
from torchpace.speedups.checkpointing import (
    checkpoint_activations,
    remove_activation_checkpointing,
)
from torchpace.speedups.compile import compile_model
from torchpace.speedups.fast_math import set_fast_math
from torchpace.speedups.forward import attention_backend, autocast_forward, use_attention_backend
from torchpace.speedups.loading import (
    DevicePrefetcher,
    LoaderSettings,
    loader_settings,
    to_device,
    tuned_loader,
)
from torchpace.speedups.memory_format import channels_last_hazard, in_effect, use_channels_last
from torchpace.speedups.optim import fuse_optimizer, make_optimizer
from torchpace.speedups.preallocate import preallocate
from torchpace.speedups.precision import Precision, autocast, choose_precision
from torchpace.speedups.surgery import fold_conv_bias

__all__ = [
    "Applied",
    "DevicePrefetcher",
    "LengthBucketBatchSampler",
    "LoaderSettings",
    "Precision",
    "SpeedupWarning",
    "TokenBudgetBatchSampler",
    "attention_backend",
    "autocast",
    "autocast_forward",
    "bucket_by_length",
    "channels_last_hazard",
    "checkpoint_activations",
    "choose_precision",
    "compile_model",
    "fold_conv_bias",
    "fuse_optimizer",
    "in_effect",
    "loader_settings",
    "make_optimizer",
    "padding_stats",
    "preallocate",
    "remove_activation_checkpointing",
    "set_fast_math",
    "to_device",
    "tuned_loader",
    "use_attention_backend",
    "use_channels_last",
]
