"""DataLoader iterators, timed: how long the training loop waits for each batch.

``DataLoader.__init__`` is patched to remember where each loader was made (the line a finding
points at), ``__iter__`` to tag its iterators, and the iterators' shared ``__next__`` to time the
wait. The loader fetched from last before an optimizer step is a training loader; the others
(validation, mostly) count as evaluation, not data wait.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from itertools import count
from time import perf_counter, thread_time
from typing import Any

import torch
from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _BaseDataLoaderIter

from torchpace.doctor.loader_rate import source_of
from torchpace.doctor.recorder import Recorder
from torchpace.doctor.records import LoaderInfo
from torchpace.doctor.sites import user_site
from torchpace.doctor.syncs import SWAP_READS
from torchpace.runtime.batches import batch_size, first_tensor
from torchpace.runtime.patching import Patches

_KEY = "_torchpace_doctor_key"
_SITE = "_torchpace_doctor_site"
_keys = count(1)


# 8 tokens: shorter rows are labels or small feature vectors, not sequences padded to a length.
MIN_SEQUENCE = 8


def padding_of(batch: Any) -> tuple[int, int, int]:
    """(tokens, padded, past_longest) of a batch whose first tensor is a (batch, length) tensor
    of token ids on the CPU: padded counts each row's trailing run of the pad value, taken as
    the value most rows (more than half) end with; past_longest the padding even its longest row
    carries (the shortest run, on every row): a batch padded to a fixed length, in the dataset
    or the collate, not to its own longest sequence, where reordering samples (length
    bucketing) alone removes nothing. (0, 0, 0) for any other batch. A batch padded to its longest
    sequence shows as ragged runs; unpadded token ids end in varied values, so their runs stay a
    row or two long. The batch is read on the host before it moves to a device, so this never
    syncs."""
    x = first_tensor(batch)
    if (
        x is None
        or x.device.type != "cpu"
        or x.dim() != 2
        or x.shape[1] < MIN_SEQUENCE
        or x.is_floating_point()
        or x.is_complex()
        or x.dtype == torch.bool
    ):
        return 0, 0, 0
    tokens = int(x.numel())
    # One row, or a last id no more than half the rows end with, is not padding: in a padded batch
    # every row but the longest ends with the pad. x-transformers' enwik8 script (batches of one
    # 33-byte row of text) had its rows' trailing spaces taken for 7% padding.
    if x.shape[0] < 2:
        return tokens, 0, 0
    pad = torch.mode(x[:, -1]).values
    if 2 * int((x[:, -1] == pad).sum()) <= x.shape[0]:
        return tokens, 0, 0
    # A row's trailing run of the pad value: the cumulative product of matches from its end.
    runs = (x.flip(1) == pad).to(torch.int32).cumprod(dim=1).sum(dim=1)
    return tokens, int(runs.sum()), int(runs.min()) * x.shape[0]


# Samples read back from a loader's dataset to see whether they come padded: a few, spread.
PROBED_SAMPLES = 4


def padded_in_dataset(dataset: Any, width: int, pad: int) -> bool:
    """Whether ``dataset`` (map-style) returns its samples already padded to ``width``, the
    width of its batches: every probed sample's first tensor is one row of that width, and one
    at least ends with ``pad``. Then the batches stay that wide whatever their order, and length
    bucketing alone removes no padding (issue 29: promised 1.71x on such a script, it changed
    nothing; trimming in the collate, then bucketing, measured 1.24x). A few samples are read
    in the main process, with every random generator's state put back afterwards, so the
    script's stream of random numbers is not moved; a dataset that cannot be indexed, or fails,
    says no."""
    import random

    import numpy as np

    try:
        n = len(dataset)
    except TypeError:
        return False
    if n < 1 or not hasattr(dataset, "__getitem__"):
        return False
    states = (torch.get_rng_state(), random.getstate(), np.random.get_state())
    try:
        rows = []
        spread = {k * (n - 1) // (PROBED_SAMPLES - 1) for k in range(PROBED_SAMPLES)}
        for i in sorted(spread):
            x = first_tensor(dataset[i])
            if x is None or x.dim() != 1 or x.shape[0] != width:
                return False
            rows.append(x)
        return any(int(x[-1]) == pad for x in rows)
    except Exception:  # the user's dataset: anything it raises means "cannot tell"
        return False
    finally:
        torch.set_rng_state(states[0])
        random.setstate(states[1])
        np.random.set_state(states[2])


def _info(rec: Recorder, loader: DataLoader[Any]) -> int:
    key = loader.__dict__.get(_KEY)
    if key is None:
        key = next(_keys)
        object.__setattr__(loader, _KEY, key)
    if key not in rec.records.loaders:
        rec.records.loaders[key] = LoaderInfo(
            key=key,
            site=loader.__dict__.get(_SITE),
            num_workers=int(loader.num_workers),
            pin_memory=bool(loader.pin_memory),
            persistent_workers=bool(loader.persistent_workers),
            prefetch_factor=loader.prefetch_factor,
            batch_size=loader.batch_size,
            dataset=type(loader.dataset).__name__,
        )
        rec.records.loader_sources[key] = source_of(loader)
    return key


def install(rec: Recorder, patches: Patches) -> None:
    init = DataLoader.__init__
    make_iter = DataLoader.__iter__
    next_batch = _BaseDataLoaderIter.__next__
    main = rec.main_thread

    def __init__(self: DataLoader[Any], *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        object.__setattr__(self, _SITE, user_site())

    def __iter__(self: DataLoader[Any]) -> Iterator[Any]:
        it = make_iter(self)
        it.__dict__[_KEY] = _info(rec, self)
        return it

    def __next__(self: _BaseDataLoaderIter) -> Any:
        key = self.__dict__.get(_KEY)
        if key is None or threading.get_ident() != main:
            return next_batch(self)
        reads = rec.tensor_reads if key in rec.quiet_loaders else None
        if reads is not None:
            reads.off()
        rec.fetch_reads = 0
        rec.clock.enter("data")
        t0, c0 = perf_counter(), thread_time()
        try:
            batch = next_batch(self)
        except StopIteration:
            rec.fetched(key, perf_counter() - t0, 0, cpu=thread_time() - c0)
            raise
        finally:
            rec.clock.exit()
            if reads is not None:
                reads.on()
            elif rec.fetch_reads > SWAP_READS:
                rec.quiet_loaders.add(key)
        seconds, cpu = perf_counter() - t0, thread_time() - c0
        tokens, padded, past = padding_of(batch)
        rec.fetched(key, seconds, batch_size(batch), tokens, padded, past, cpu=cpu)
        if padded and key not in rec.records.probed_datasets:
            # once per loader, after its fetch was timed: where the batches' padding comes from
            rec.records.probed_datasets.add(key)
            x = first_tensor(batch)
            assert x is not None  # padding_of found a (batch, length) tensor
            pad = int(torch.mode(x[:, -1]).values)
            if padded_in_dataset(self._dataset, int(x.shape[1]), pad):
                rec.records.padded_in_dataset.add(key)
        return batch

    patches.set(DataLoader, "__init__", __init__)
    patches.set(DataLoader, "__iter__", __iter__)
    patches.set(_BaseDataLoaderIter, "__next__", __next__)
