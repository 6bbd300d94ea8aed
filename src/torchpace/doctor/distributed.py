"""Under torchrun every rank measures; rank 0 gathers the others' results and reports for all.

The results travel through torchrun's own key-value store, not the script's process group: the
script may have destroyed its group, or been stopped by the doctor in the middle of its run. With
the c10d rendezvous (``--standalone``, ``--rdzv-backend c10d``) and the static one, torchrun's
agent on node 0 hosts a TCPStore at MASTER_ADDR:MASTER_PORT for the whole life of the workers and
says so with TORCHELASTIC_USE_AGENT_STORE=True (torch/distributed/elastic/agent/server/
local_elastic_agent.py; torch/distributed/rendezvous.py connects the script's group to it as a
client, the same way). Otherwise the store at that address is the one rank 0's script created,
which lives only as long as the script keeps its group; it is tried, and may be gone.

Keys carry the run id and restart count, so they never meet the script's keys or an earlier
attempt's. Rank 0 waits a bounded time (TORCHPACE_DOCTOR_GATHER_TIMEOUT, seconds; default 120)
and reports whatever arrived, naming the ranks that did not and why.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
import time
from typing import Any

from torchpace.doctor.ranks import aggregate, summarize_rank

DEFAULT_TIMEOUT_S = 120.0
_POLL_S = 0.1
_TELL_AFTER_S = 5.0  # say why rank 0 is quiet once the wait is long enough to be noticed


def _timeout() -> float:
    raw = os.environ.get("TORCHPACE_DOCTOR_GATHER_TIMEOUT")
    if raw is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
        if value > 0:
            return value
    except ValueError:
        pass
    print(
        f"torchpace doctor: TORCHPACE_DOCTOR_GATHER_TIMEOUT={raw!r} is not a positive number of "
        f"seconds; using {DEFAULT_TIMEOUT_S:g}",
        file=sys.stderr,
    )
    return DEFAULT_TIMEOUT_S


def _prefix() -> str:
    run_id = os.environ["TORCHELASTIC_RUN_ID"]
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"torchpace.doctor/{run_id}/{restart}/rank/"


def _connect(timeout: float) -> Any:
    """A client of torchrun's store, or an exception that says why there is none."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        raise RuntimeError("not started by torchrun, so there is no store to gather through")
    import torch.distributed as dist

    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    where = f"{host}:{port}"
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        where += " (the script's own store: torchrun's agent hosts none)"
    try:
        # torch.distributed re-exports TCPStore from its C extension without listing it
        return dist.TCPStore(  # type: ignore[attr-defined]
            host, port, is_master=False, timeout=_dt.timedelta(seconds=timeout)
        )
    except Exception as exc:  # a refused or timed-out connection: report without the others
        raise RuntimeError(f"could not reach the store at {where}: {exc}") from None


def _send(payload: dict[str, Any], rank: int) -> None:
    try:
        store = _connect(_timeout())
        store.set(_prefix() + str(rank), json.dumps(payload))
    except Exception as exc:  # never crash the run over the report
        print(
            f"torchpace doctor: rank {rank} could not send its measurement: {exc}", file=sys.stderr
        )
        return
    print(f"torchpace doctor: rank {rank} sent its measurement; rank 0 reports", file=sys.stderr)


def publish_missing(reason: str) -> None:
    """On a rank other than 0 that has no result: tell rank 0 not to wait for one."""
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and rank != 0:
        _send({"rank": rank, "missing": reason}, rank)


def _collect(world: int, timeout: float) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """Rank 0: the other ranks' summaries, and the ranks missing with the reason."""
    pending = set(range(1, world))
    try:
        store = _connect(timeout)
    except Exception as exc:
        return [], dict.fromkeys(pending, str(exc))
    prefix = _prefix()
    got: list[dict[str, Any]] = []
    missing: dict[int, str] = {}
    start = time.monotonic()
    deadline = start + timeout
    told = False
    try:
        while pending and time.monotonic() < deadline:
            for r in sorted(pending):
                if store.check([prefix + str(r)]):
                    payload = json.loads(store.get(prefix + str(r)))
                    store.delete_key(prefix + str(r))
                    pending.discard(r)
                    if "missing" in payload:
                        missing[r] = payload["missing"]
                    else:
                        got.append(payload)
            if pending and not told and time.monotonic() - start > _TELL_AFTER_S:
                told = True
                waiting = ", ".join(map(str, sorted(pending)))
                print(
                    f"torchpace doctor: waiting up to {timeout:g} s for ranks {waiting}",
                    file=sys.stderr,
                )
            if pending:
                time.sleep(_POLL_S)
    except Exception as exc:  # the store went away (torchrun stopped): report what arrived
        missing.update(dict.fromkeys(pending, f"the store failed while waiting: {exc}"))
        pending = set()
    missing.update(dict.fromkeys(pending, f"nothing arrived within {timeout:g} s"))
    return got, missing


def gather(result: dict[str, Any]) -> dict[str, Any] | None:
    """The result to report on this rank, or None on ranks other than 0."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return result
    rank = int(os.environ.get("RANK", "0"))
    if rank != 0:
        _send(summarize_rank(result, rank), rank)
        return None
    others, missing = _collect(world, _timeout())
    return aggregate(
        result, [summarize_rank(result, 0), *others], world_size=world, missing=missing
    )
