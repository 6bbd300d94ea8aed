"""The training dataset's pace by worker count (doctor/loader_rate.py), on planted datasets."""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from torchpace.doctor.loader_rate import measure, source_of, step_with_workers

SLEEP_S = 0.004  # per sample: a wait (I/O-like), so workers past the cores still help
BATCH = 2


class Sleepy(Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(SLEEP_S)
        return torch.zeros(2)


class Stream(IterableDataset[torch.Tensor]):
    def __iter__(self):  # type: ignore[no-untyped-def]
        yield torch.zeros(2)


def test_k_workers_make_a_sleeping_datasets_batches_k_times_as_fast() -> None:
    rates = measure(source_of(DataLoader(Sleepy(), batch_size=BATCH, shuffle=True)))
    assert rates is not None and rates["failed"] == {}
    paces = rates["seconds_per_batch"]
    assert set(paces) == {"0", "1", "2", "4"}
    for k in (1, 2, 4):
        assert paces[str(k)] == pytest.approx(SLEEP_S * BATCH / k, rel=0.4), paces
    assert paces["0"] == pytest.approx(SLEEP_S * BATCH, rel=0.4)


def test_a_stream_has_no_pace_to_measure() -> None:
    # Workers over an IterableDataset each replay the stream: their pace says nothing.
    assert source_of(DataLoader(Stream(), batch_size=1)) is None
    assert measure(None) is None


def test_a_count_that_fails_is_named_and_the_rest_kept() -> None:
    # A spawned worker must pickle the collate_fn; a lambda cannot be, so every count with
    # workers fails, with the error, and the in-process pace is still measured.
    loader = DataLoader(
        Sleepy(),
        batch_size=BATCH,
        collate_fn=lambda b: b,
        num_workers=1,
        multiprocessing_context="spawn",
    )
    rates = measure(source_of(loader))
    assert rates is not None and set(rates["seconds_per_batch"]) == {"0"}
    assert set(rates["failed"]) == {"1", "2", "4"}
    assert all("pickle" in why.lower() for why in rates["failed"].values()), rates["failed"]


def test_the_step_with_workers_is_the_longer_of_the_rest_and_the_workers_pace() -> None:
    # 100 ms step, 60 ms of it waiting, half of that this process's CPU, 2 cores: the rest is
    # 40 ms plus 15 ms of loading CPU over the cores; workers at 30 ms a batch are not slower.
    assert step_with_workers(0.1, 0.06, 0.5, 1, 0.03, 2) == pytest.approx(0.055)
    # two batches a step at 40 ms each: the workers' pace sets the step
    assert step_with_workers(0.1, 0.06, 0.5, 2, 0.04, 2) == pytest.approx(0.08)
