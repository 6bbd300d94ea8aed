"""The CUDA reserve's growth over steps of increasing length, without and with preallocate()
(twice each), in MiB: the figures behind tests/speedups/test_preallocate.py's CUDA bound.
Run from the repository root with ``PYTHONPATH=src:tests``."""

import json
import sys

import torch

sys.path.insert(0, "tests/speedups")
import test_preallocate

torch.cuda.empty_cache()
torch.cuda.reset_peak_memory_stats()
out: dict[str, list[float]] = {}
for pre in (False, True, False, True):
    grown = test_preallocate._cuda_reserve_growth(preallocated=pre)
    out.setdefault("with" if pre else "without", []).append(grown / 2**20)
print(json.dumps(out))
