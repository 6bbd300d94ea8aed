"""Measurement shared by doctor, tune and bench: step timing, paired comparisons, memory, noise,
and the environment fingerprint. Submodules import torch; this package's ``__init__`` does not."""
