"""``torchpace bench``: a workload's naive configuration against a hand-set tuned one, paired."""
