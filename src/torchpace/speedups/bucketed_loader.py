"""Length bucketing for a DataLoader a script has already built: its dataset's per-sample
``lengths`` and one of :mod:`torchpace.speedups.batching`'s samplers in place of its shuffle.

``torchpace run`` applies it by interposition at the DataLoader's construction
(:mod:`torchpace.script.loaders`), and ``torchpace apply`` writes it into the script as one line
after the loader is built::

    train_loader = DataLoader(train_set, batch_size=16, shuffle=True, collate_fn=pad)
    train_loader = bucket_by_length(train_loader)  # torchpace: length-bucketing

Both draw the sampler's seed from torch's generator at that point, so the script's own seed
decides the batches, and both move to a new shuffle each time the loader is iterated (a script
written for ``shuffle=True`` never calls ``set_epoch``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, RandomSampler, Sampler

from torchpace.speedups.batching import LengthBucketBatchSampler, TokenBudgetBatchSampler


def dataset_lengths(dataset: Any) -> list[int] | None:
    """The dataset's per-sample ``lengths`` (a tensor, array or list, one positive integer per
    sample) as integers, or None when it has none."""
    lengths = getattr(dataset, "lengths", None)
    if lengths is None or isinstance(lengths, (str, bytes)) or callable(lengths):
        return None
    try:
        values = [int(x) for x in (lengths.tolist() if hasattr(lengths, "tolist") else lengths)]
        n = len(dataset)
    except (TypeError, ValueError):
        return None
    if len(values) != n or not values or min(values) < 1:
        return None
    return values


def length_quantiles(lengths: Any) -> tuple[int, int] | None:
    """The 90th-percentile and the longest of a dataset's sample ``lengths``, or None: what a
    token budget is sized from."""
    if lengths is None:
        return None
    ordered = sorted(int(x) for x in lengths)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], ordered[-1]


class EpochAdvancing(Sampler[list[int]]):
    """A batch sampler with ``set_epoch`` that moves to the next epoch each time it is
    iterated, as a loop written for ``shuffle=True`` expects."""

    def __init__(self, sampler: LengthBucketBatchSampler | TokenBudgetBatchSampler) -> None:
        self.sampler = sampler
        self.epoch = 0

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[list[int]]:
        self.sampler.set_epoch(self.epoch)
        self.epoch += 1
        return iter(self.sampler)


def bucket_sampler(
    lengths: list[int],
    batch_size: int,
    *,
    max_tokens: int | None = None,
    drop_last: bool = False,
    shuffle: bool = True,
) -> tuple[EpochAdvancing, str]:
    """Batches of ``batch_size`` similar-length samples, or with ``max_tokens`` of at most that
    many padded tokens (raised to the longest sample, which must fit); and what they are, in
    words. The seed is drawn from torch's global generator."""
    seed = int(torch.empty((), dtype=torch.int64).random_().item()) % 2**31
    sampler: LengthBucketBatchSampler | TokenBudgetBatchSampler
    if max_tokens is not None:
        tokens = max(max_tokens, max(lengths))
        sampler = TokenBudgetBatchSampler(lengths, tokens, seed=seed, shuffle=shuffle)
        what = f"batches of at most {tokens} padded tokens"
    else:
        sampler = LengthBucketBatchSampler(
            lengths, batch_size, seed=seed, drop_last=drop_last, shuffle=shuffle
        )
        what = f"batches of {batch_size} samples of similar length"
    return EpochAdvancing(sampler), what


def bucket_by_length(loader: DataLoader[Any], *, max_tokens: int | None = None) -> DataLoader[Any]:
    """A DataLoader like ``loader`` (its dataset, collate function, workers, pinning) whose
    batches group samples of similar length; see :func:`bucket_sampler`."""
    lengths = dataset_lengths(loader.dataset)
    name = type(loader.dataset).__name__
    if lengths is None:
        raise ValueError(
            f"{name} has no `lengths` (one positive integer per sample): give the dataset a "
            "`lengths` attribute to bucket by, or keep the loader as it is"
        )
    if loader.batch_size is None:
        raise ValueError(
            f"the DataLoader over {name} has its own batch sampler: bucketing replaces it; "
            "build the loader with batch_size= and shuffle= instead"
        )
    shuffle = isinstance(loader.sampler, RandomSampler)
    batches, _ = bucket_sampler(
        lengths,
        loader.batch_size,
        max_tokens=max_tokens,
        drop_last=loader.drop_last,
        shuffle=shuffle,
    )
    workers = loader.num_workers
    return DataLoader(
        loader.dataset,
        batch_sampler=batches,
        num_workers=workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context if workers else None,
        generator=loader.generator,
        prefetch_factor=loader.prefetch_factor if workers else None,
        persistent_workers=loader.persistent_workers,
        pin_memory_device=loader.pin_memory_device,
    )
