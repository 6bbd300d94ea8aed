"""``torchpace tune``: try each technique on the user's own recipe, in fresh processes, and keep
the fastest plan that still converges. Importing this package does not import torch."""
