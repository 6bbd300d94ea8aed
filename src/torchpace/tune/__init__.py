"""``torchpace tune``: try each technique on the user's own recipe, in fresh processes, and keep
the fastest plan that still converges. Importing this package does not import torch. What a tune
can try, and in what order, is each technique's ``tune`` facet (``torchpace.techniques``)."""
