"""Lint many files on several processes, with results in the order of the input.

Workers receive paths and rule codes (plain data that pickles small and fast) and look the rules
up in their own copy of the registry; they send back results. A pool that cannot start or breaks
falls back to linting in this process.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from torchpace.lint.engine import lint_file
from torchpace.lint.results import FileResult, LintError

# A path, the codes of the rules to run on it, and its functions another file calls per step.
Job = tuple[str, tuple[str, ...], frozenset[str]]
Result = FileResult | LintError

# When a pool pays off. Measured on a 2-core Xeon with Python 3.11: one file takes ~10 ms to
# lint (more as rules are added); a pool of 2 costs ~20 ms to start with "fork" (workers inherit
# the imported rules) and ~400 ms with "spawn" or "forkserver" (each worker imports them again:
# macOS, Windows, Python >= 3.14). Break-even on 2 workers is ~4 files with fork and ~80 with
# spawn; the thresholds leave a margin for small files, which lint faster than 10 ms.
MIN_FILES_FORK = 16
MIN_FILES_SPAWN = 128
# Chunks per worker: enough to even out files of unequal size, few enough to keep the
# per-task overhead (pickling, a round trip) far below the lint time of a chunk.
CHUNKS_PER_WORKER = 4


def usable_cpus() -> int:
    """The cores this process may run on (its affinity mask, where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return os.cpu_count() or 1


# The cyclic garbage collector's first threshold while linting. A parsed file is tens of
# thousands of AST nodes, all allocated at once and all alive until the file is done: at
# Python's default (700 allocations) the collector ran through them again and again, and the
# imported modules with them; about a seventh of lint's CPU time on a sample of public training
# code (benchmarks/README.md, "Lint speed"), for no garbage. The files' memory is unchanged.
GC_THRESHOLD = (20_000, 10, 10)


@contextmanager
def few_collections() -> Iterator[None]:
    """Lint with the collector run rarely, and never over what was imported before."""
    before = gc.get_threshold()
    gc.freeze()  # the modules and the rules: alive for the whole run
    gc.set_threshold(*GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def _lint_chunk(jobs: Sequence[Job]) -> list[Result]:
    from torchpace.lint import rules as registry

    by_code = {r.code: r for r in registry.RULES}
    with few_collections():
        return [
            lint_file(path, [by_code[c] for c in codes], entries) for path, codes, entries in jobs
        ]


def min_files() -> int:
    """How many files it takes for a pool to beat linting in this process."""
    fork = multiprocessing.get_start_method() == "fork"
    return MIN_FILES_FORK if fork else MIN_FILES_SPAWN


def lint_jobs(jobs: Sequence[Job], *, workers: int) -> list[Result]:
    """Lint every job, on up to ``workers`` processes when there are enough files."""
    workers = min(workers, max(len(jobs) // 2, 1))
    if workers <= 1 or len(jobs) < min_files():
        return _lint_chunk(jobs)
    size = -(-len(jobs) // (workers * CHUNKS_PER_WORKER))  # ceiling division
    chunks = [jobs[i : i + size] for i in range(0, len(jobs), size)]
    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            return [result for chunk in pool.map(_lint_chunk, chunks) for result in chunk]
    except (OSError, BrokenProcessPool):
        return _lint_chunk(jobs)  # no processes to be had (a sandbox, a limit): lint here
