"""Batch samplers that group sequences of similar length, so batches carry little padding.

Random batches of long-tailed sequences are padded to their longest member, and on ``seqcls``
most of such a batch is padding. Both samplers shuffle the epoch, sort only within large chunks
of it (so a batch is still drawn from a random slice of the data), cut batches there, and
shuffle the order of the batches:

- ``LengthBucketBatchSampler``: a fixed number of samples per batch.
- ``TokenBudgetBatchSampler``: as many samples as fit ``len(batch) * longest <= max_tokens``, so
  the work per step stays about constant.

Both are rank-aware; use them instead of ``DistributedSampler``. Under DDP every rank must take
the same number of steps or the job hangs in an all-reduce, so every rank builds the epoch's
batches identically, evens their count out to a multiple of the world size by splitting the
costliest batches, groups them into steps of ``world`` batches of similar cost, and takes batch
``rank`` of each step. No sample is lost or repeated unless ``drop_last=True`` asks for it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

import torch
from torch.utils.data import Sampler

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Lengths: TypeAlias = Sequence[int] | torch.Tensor | npt.NDArray[np.integer[Any]]

TECHNIQUE = "length-bucketing"
# 100 batches per sorted chunk: torchtext's BucketIterator ``pool`` sorts chunks of
# 100 * batch_size. Larger chunks pad less but make each batch a less random draw.
BUCKET_BATCHES = 100


class PaddingStats(NamedTuple):
    """Tokens in a list of batches, each padded to its longest member."""

    useful_tokens: int
    padded_tokens: int

    @property
    def useful_fraction(self) -> float:
        return self.useful_tokens / self.padded_tokens if self.padded_tokens else 1.0


def padding_stats(batches: Sequence[Sequence[int]], lengths: Lengths) -> PaddingStats:
    """Real tokens and padded tokens (``len(batch) * longest``) of ``batches`` of indices."""
    lens = _as_lengths(lengths).tolist()
    return PaddingStats(
        sum(lens[i] for b in batches for i in b),
        sum(_cost(b, lens) for b in batches if b),
    )


class LengthBucketBatchSampler(Sampler[list[int]]):
    """Batches of ``batch_size`` indices of similar length, reshuffled every epoch.

    Each epoch (``set_epoch``) permutes the indices with ``seed + epoch`` (as
    ``DistributedSampler`` does), sorts chunks of ``batch_size * bucket_batches`` by length,
    cuts batches and shuffles their order. When the batches do not divide evenly among the
    ranks, the costliest are split in two until they do, so a few hold fewer than
    ``batch_size``. ``drop_last=True`` instead drops up to ``batch_size * num_replicas - 1``
    samples (a random few each epoch when shuffling), so that every batch is full.
    """

    def __init__(
        self,
        lengths: Lengths,
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        num_replicas: int | None = None,
        rank: int | None = None,
        bucket_batches: int = BUCKET_BATCHES,
    ) -> None:
        self.lengths = _as_lengths(lengths)
        self.batch_size = _positive("batch_size", batch_size)
        self.bucket_batches = _positive("bucket_batches", bucket_batches)
        self.drop_last = drop_last
        self.num_replicas, self.rank = _world(num_replicas, rank)
        n, per_step = len(self.lengths), self.batch_size * self.num_replicas
        if drop_last and n < per_step:
            raise ValueError(
                f"drop_last=True leaves nothing: {n} samples are fewer than batch_size="
                f"{batch_size} x num_replicas={self.num_replicas}; lower batch_size or "
                "use drop_last=False"
            )
        self._kept = n - n % per_step if drop_last else n
        self._epochs = _Epochs(
            self._build, self.lengths, shuffle, seed, self.num_replicas, self.rank
        )
        len(self)  # build epoch 0 now, so an impossible split fails here rather than mid-run

    def _build(self, order: torch.Tensor) -> list[list[int]]:
        order = order[: self._kept]
        chunk = torch.arange(len(order)) // (self.batch_size * self.bucket_batches)
        idx, _ = _sort_chunks(order, chunk, self.lengths)
        # chunks are whole multiples of batch_size, so no batch straddles two chunks
        return [idx[i : i + self.batch_size] for i in range(0, len(idx), self.batch_size)]

    def set_epoch(self, epoch: int) -> None:
        self._epochs.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self._epochs.batches())

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._epochs.batches())


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Batches of similar-length indices whose padded size ``len * longest`` is ``<= max_tokens``.

    Short sequences come many to a batch and long ones few, so each step does about the same
    work. The number of batches depends on the epoch's shuffle: ``len()`` is exact for the
    current epoch, so call ``set_epoch`` first. A sorted chunk holds ``bucket_batches *
    max_tokens`` real tokens, about ``bucket_batches`` batches' worth. Every sample is used
    every epoch (there is no ``drop_last``); uneven counts across ranks are split as in
    ``LengthBucketBatchSampler``.
    """

    def __init__(
        self,
        lengths: Lengths,
        max_tokens: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        bucket_batches: int = BUCKET_BATCHES,
        max_batch_size: int | None = None,
    ) -> None:
        self.lengths = _as_lengths(lengths)
        self.max_tokens = _positive("max_tokens", max_tokens)
        self.bucket_batches = _positive("bucket_batches", bucket_batches)
        self.max_batch_size = (
            None if max_batch_size is None else _positive("max_batch_size", max_batch_size)
        )
        longest = int(self.lengths.max())
        if longest > max_tokens:
            where = int(self.lengths.argmax())
            raise ValueError(
                f"sequence {where} has {longest} tokens, more than max_tokens={max_tokens}; "
                f"raise max_tokens to at least {longest} or truncate the longest sequences"
            )
        self.num_replicas, self.rank = _world(num_replicas, rank)
        self._epochs = _Epochs(
            self._build, self.lengths, shuffle, seed, self.num_replicas, self.rank
        )
        len(self)  # build epoch 0 now, so an impossible split fails here rather than mid-run

    def _build(self, order: torch.Tensor) -> list[list[int]]:
        ordered = self.lengths[order]
        before = torch.cumsum(ordered, 0) - ordered  # real tokens ahead of each sample
        idx, chunks = _sort_chunks(
            order, before // (self.bucket_batches * self.max_tokens), self.lengths
        )
        lens, cap = self.lengths.tolist(), self.max_batch_size
        batches: list[list[int]] = []
        last = -1  # chunk id of the open batch
        for i, c in zip(idx, chunks, strict=True):
            size = len(batches[-1]) if batches and c == last else 0
            # ascending within a chunk: lens[i] is the padded length of the batch it would join
            if size == 0 or (size + 1) * lens[i] > self.max_tokens or size == cap:
                batches.append([])
            batches[-1].append(i)
            last = c
        return batches

    def set_epoch(self, epoch: int) -> None:
        self._epochs.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self._epochs.batches())

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._epochs.batches())


class _Epochs:
    """One epoch's batches for one rank, built on first use and kept until the epoch changes."""

    def __init__(
        self,
        build: Callable[[torch.Tensor], list[list[int]]],
        lengths: torch.Tensor,
        shuffle: bool,
        seed: int,
        world: int,
        rank: int,
    ) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        self.build, self.lengths, self.shuffle = build, lengths, shuffle
        self.seed, self.world, self.rank = seed, world, rank
        self.epoch = 0
        self._cached: tuple[int, list[list[int]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch must be an int >= 0, got {epoch!r}")
        self.epoch = epoch

    def batches(self) -> list[list[int]]:
        if self._cached is None or self._cached[0] != self.epoch:
            # a local generator: the global torch RNG (model init, dropout) is never touched
            gen = torch.Generator().manual_seed(self.seed + self.epoch)
            n = len(self.lengths)
            order = torch.randperm(n, generator=gen) if self.shuffle else torch.arange(n)
            batches = self.build(order)
            mine = _shard(
                batches, self.lengths.tolist(), self.world, self.rank, gen if self.shuffle else None
            )
            self._cached = (self.epoch, mine)
        return self._cached[1]


def _shard(
    batches: list[list[int]], lens: list[int], world: int, rank: int, gen: torch.Generator | None
) -> list[list[int]]:
    """This rank's batches: the same count on every rank, disjoint, together all of ``batches``.

    Splits batches in halves, the costliest splittable first, until their count is a multiple
    of ``world``; sorts them by cost; groups ``world`` neighbours into a step, so the ranks of
    one step do similar work; shuffles the steps with ``gen``; takes batch ``rank`` of each.
    """
    need = -len(batches) % world
    samples = sum(len(b) for b in batches)
    if len(batches) + need > samples:
        raise ValueError(
            f"cannot give num_replicas={world} ranks the same number of batches without "
            f"repeating samples: {samples} samples make {len(batches)} batches and "
            f"{len(batches) + need} are needed; use fewer ranks, more data or smaller batches"
        )
    done = [b for b in batches if len(b) < 2]
    # max-heap on cost; the sequence number breaks ties, so the result is deterministic
    heap = [(-_cost(b, lens), i, b) for i, b in enumerate(batches) if len(b) >= 2]
    heapq.heapify(heap)
    for seq in range(len(batches), len(batches) + need):  # the check above keeps heap non-empty
        b = heapq.heappop(heap)[2]
        for half in (b[: len(b) // 2], b[len(b) // 2 :]):
            if len(half) < 2:
                done.append(half)
            else:
                heapq.heappush(heap, (-_cost(half, lens), seq, half))
    # by cost, ties by first index (batches are disjoint), so every rank sorts alike
    ranked = sorted(done + [e[2] for e in heap], key=lambda b: (_cost(b, lens), b[0]))
    steps = len(ranked) // world
    order = torch.randperm(steps, generator=gen).tolist() if gen is not None else range(steps)
    return [ranked[s * world + rank] for s in order]


def _sort_chunks(
    order: torch.Tensor, chunk: torch.Tensor, lengths: torch.Tensor
) -> tuple[list[int], list[int]]:
    """``order`` sorted by chunk id, then by length (ties keep the shuffled order); chunk ids."""
    key = chunk * (int(lengths.max()) + 1) + lengths[order]
    perm = torch.argsort(key, stable=True)
    return order[perm].tolist(), chunk[perm].tolist()


def _cost(batch: Sequence[int], lens: list[int]) -> int:
    """Padded tokens: the work of a batch padded to its longest member."""
    return len(batch) * max(lens[i] for i in batch)


def _as_lengths(lengths: Lengths) -> torch.Tensor:
    t = torch.as_tensor(lengths)
    if t.dim() != 1 or t.numel() == 0:
        raise ValueError(f"lengths must be a non-empty 1-D sequence, got shape {tuple(t.shape)}")
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise ValueError(f"lengths must be integers, got dtype {t.dtype}")
    if int(t.min()) < 1:
        raise ValueError(f"lengths must all be >= 1, got a length of {int(t.min())}")
    return t.to(torch.long)


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _world(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """``(num_replicas, rank)``, by default torch.distributed's when it is initialised."""
    dist = torch.distributed
    ready = dist.is_available() and dist.is_initialized()
    if num_replicas is None:
        num_replicas = dist.get_world_size() if ready else 1
    world = _positive("num_replicas", num_replicas)
    r = rank if rank is not None else (dist.get_rank() if ready else 0)
    if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < world:
        raise ValueError(f"rank must be an int in [0, num_replicas={world}), got {r!r}")
    return world, r
