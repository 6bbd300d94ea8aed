"""How fast the training loader's own dataset makes batches with 0, 1, 2, ... worker processes,
measured after the run, when the script's steps are over.

Why: the input estimate alone (the wait's share, less the cores its CPU work would take) promised
53-62% on a VAE whose steps got slower with 1 or 2 workers (issue 18), and 8x on a dataset that
reads one sample at a time under a lock the workers share, where 1.15x was measured. The rate of
the dataset itself, in workers, says what the workers can deliver.
"""

from __future__ import annotations

import gc
import time
import warnings
from dataclasses import dataclass
from typing import Any

from torch.utils.data import DataLoader, IterableDataset

from torchpace.measure.noise import LoadProbe

# Worker counts tried: 0, 1, 2, 4, whatever the cores: a dataset that waits (I/O, a remote store,
# sleeps) gains from workers past the cores, and one that computes shows there that it does not.
COUNTS = (0, 1, 2, 4)
# Per count: the first batches (one per worker, plus one) start the workers and are not timed;
# then batches are timed until MAX_BATCHES or 2 s. Batches the workers had finished before the
# timing began come back at once and are not counted: with 4 workers sharing one lock, 3 such
# batches made 8 batches look like 5 and the pace 1.6x too fast (a 1.64x estimate measured
# 1.10x). The pace is the time from the first batch waited for to the last, over the batches
# after it. 2 s per count keeps the whole probe near 10 s at worst (4 counts, worker start
# included).
MIN_BATCHES = 3
# 32 batches: with 16, four workers on 2 quiet cores read 6.5-9.0 ms a batch for a planted 8
# (8 probes), and once 10.2 and once 12.8 in the suite; with 32, 8.2-8.8.
MAX_BATCHES = 32
BUDGET_S = 2.0
# A batch that comes back within this was ready before it was asked for (no dataset makes one
# in 0.2 ms; a ready one costs the queue read alone).
READY_S = 2e-4
# A worker that gives nothing for a minute is stuck: the probe gives up on it (DataLoader timeout).
WORKER_TIMEOUT_S = 60


@dataclass
class Source:
    """What a training DataLoader loads from, kept from its construction until the result."""

    dataset: Any
    batch_sampler: Any
    collate_fn: Any
    worker_init_fn: Any
    multiprocessing_context: Any


def source_of(loader: DataLoader[Any]) -> Source | None:
    if isinstance(loader.dataset, IterableDataset) or loader.batch_sampler is None:
        return None  # workers would each replay the stream; no batches to draw per index
    return Source(
        loader.dataset,
        loader.batch_sampler,
        loader.collate_fn,
        loader.worker_init_fn,
        loader.multiprocessing_context,
    )


def _seconds_per_batch(source: Source, workers: int) -> float | None:
    it: Any = None
    try:
        with warnings.catch_warnings():  # torch warns of 4 workers on 2 cores: tried on purpose
            warnings.simplefilter("ignore", UserWarning)
            loader = DataLoader(
                source.dataset,
                batch_sampler=source.batch_sampler,
                collate_fn=source.collate_fn,
                num_workers=workers,
                worker_init_fn=source.worker_init_fn,
                multiprocessing_context=source.multiprocessing_context if workers else None,
                timeout=WORKER_TIMEOUT_S if workers else 0,
            )
            it = iter(loader)
        for _ in range(workers + 1):
            next(it)
        start = time.perf_counter()
        ends: list[tuple[float, bool]] = []  # (when it came, whether it had to be waited for)
        skipped = 0
        while len(ends) < MAX_BATCHES and (
            len(ends) < MIN_BATCHES or time.perf_counter() - start < BUDGET_S
        ):
            asked = time.perf_counter()
            next(it)
            now = time.perf_counter()
            waited = not workers or now - asked > READY_S
            if not waited and not ends and skipped < 2 * workers:
                skipped += 1  # finished before the timing began (at most 2 per worker queued)
                continue
            ends.append((now, waited))
        return _pace(start, ends)
    except StopIteration:  # an epoch too short to time
        return None
    finally:
        shutdown = getattr(it, "_shutdown_workers", None)
        if shutdown is not None:  # now, not when a later count's forked worker collects it
            shutdown()


def _pace(start: float, ends: list[tuple[float, bool]]) -> float | None:
    """Seconds per batch, from the first batch waited for to the last one waited for, over the
    batches that came after the first up to the last: workers that finish batches together
    (a lock they share) hand them out in bursts, and a window cut inside a burst would count
    its ready batches without the wait that made them. Over everything from ``start`` when
    fewer than two batches were waited for."""
    waited = [i for i, (_t, w) in enumerate(ends) if w]
    if len(waited) >= 2:
        first, last = waited[0], waited[-1]
        return (ends[last][0] - ends[first][0]) / (last - first)
    return (ends[-1][0] - start) / len(ends) if ends else None


def measure(source: Source | None) -> dict[str, Any] | None:
    """Seconds per batch by worker count, or None with nothing to measure. A count that fails
    (a dataset that cannot be pickled for spawned workers, a worker error) is left out and named.
    ``other_cores``: other processes' CPU over the probe (the workers are this process's
    children, so not counted): the probe comes after the measured steps, whose noise judgement
    does not cover it, and the input estimate reads its pace."""
    if source is None:
        return None
    probe = LoadProbe()
    rates: dict[str, float] = {}
    failed: dict[str, str] = {}
    for workers in COUNTS:
        try:
            seconds = _seconds_per_batch(source, workers)
        except Exception as exc:
            failed[str(workers)] = f"{type(exc).__name__}: {exc}"[:200]
            # An iterator that failed half-built is only in the traceback: collected here, not
            # in the next count's forked worker ("can only test a child process").
            del exc
            gc.collect()
            continue
        if seconds is not None:
            rates[str(workers)] = seconds
    if "0" not in rates and not failed:
        return None
    return {"seconds_per_batch": rates, "failed": failed, "other_cores": probe.foreign_cores()}


def step_with_workers(
    rest_s: float, load_cpu_s: float, cores: int, free_cores: float, workers: int
) -> float:
    """The step with the loading in ``workers`` processes, from what the CPU must do.

    ``rest_s``: the step less its data wait; ``load_cpu_s``: the loading's CPU time per step;
    ``free_cores``: the cores torch's own threads leave free. Workers load while the step
    computes; what does not fit on the free cores takes a core from torch's threads, and a
    parallel op then waits for its slowest thread: that loading adds its whole time to the step
    (the VAE: one worker on 2 cores made an 11 ms step 13 ms, where spreading its 4 ms of
    loading over both cores promised 9.3). The loading left over runs while the step waits,
    on as many cores as there are workers."""
    parallel = max(1, min(workers, cores))
    overlap = min(load_cpu_s, rest_s * parallel)
    stall = max(0.0, overlap - free_cores * rest_s)
    return rest_s + stall + (load_cpu_s - overlap) / parallel
