"""Is the machine quiet enough to trust a timing? Two signals:

* other load: CPU time spent by processes outside our own process tree (plus hypervisor steal),
  as a share of the machine's cores, over the measured window (Linux /proc; unknown elsewhere);
* spread: the interquartile range of the paired ratios relative to their median.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# 25% of one core busy with other work on average: enough to steal whole steps from a 2-core
# run. Chosen on the 2-core development VM, where an idle machine reads 0-5%.
MAX_FOREIGN_CORES = 0.25
# 15% relative IQR of the per-pair ratios: wider than this, a 1.15x effect sits inside the noise
# and the median ratio is not worth reporting as a figure.
MAX_RATIO_REL_IQR = 0.15

_PROC = Path("/proc")
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_busy_and_steal() -> tuple[float, float] | None:
    """Machine-wide busy seconds (all but idle/iowait/steal) and steal seconds from /proc/stat."""
    try:
        fields = (_PROC / "stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    vals = [int(v) for v in fields]
    user, nice, system, _idle, _iowait, irq, softirq = vals[:7]
    steal = vals[7] if len(vals) > 7 else 0
    return (user + nice + system + irq + softirq) / _TICK, steal / _TICK


def _tree_pids(root: int) -> list[int]:
    pids, stack = [], [root]
    while stack:
        pid = stack.pop()
        pids.append(pid)
        try:
            for task in (_PROC / str(pid) / "task").iterdir():
                children = (task / "children").read_text().split()
                stack.extend(int(c) for c in children)
        except OSError:
            continue
    return pids


def _tree_cpu_seconds(root: int) -> float:
    total = 0
    for pid in _tree_pids(root):
        try:
            stat = (_PROC / str(pid) / "stat").read_text()
        except OSError:
            continue
        # Fields after the ")" that ends the command name: utime and stime are fields 14 and 15,
        # cutime and cstime (children already reaped: a compiler torch.compile ran and waited
        # for) 16 and 17. Without the latter, an exited g++ counted as another process's load.
        rest = stat[stat.rfind(")") + 2 :].split()
        total += int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14])
    return total / _TICK


@dataclass
class LoadProbe:
    """Brackets a measured window: ``probe = LoadProbe(); ...; probe.foreign_cores()``."""

    _t0: float = field(default_factory=time.perf_counter)
    _machine0: tuple[float, float] | None = field(default_factory=_cpu_busy_and_steal)
    _own0: float = field(default_factory=lambda: _tree_cpu_seconds(os.getpid()))

    def foreign_cores(self) -> float | None:
        """Average number of cores' worth of CPU used by other processes (and steal) since the
        probe was made, or None where /proc is not available."""
        machine1 = _cpu_busy_and_steal()
        if self._machine0 is None or machine1 is None:
            return None
        wall = time.perf_counter() - self._t0
        if wall <= 0:
            return None
        own = _tree_cpu_seconds(os.getpid()) - self._own0
        busy = machine1[0] - self._machine0[0]
        steal = machine1[1] - self._machine0[1]
        return max(0.0, (busy - own + steal) / wall)


def wait_for_quiet(
    limit_s: float,
    *,
    window_s: float = 2.0,
    say: Any = None,
) -> tuple[bool, float | None]:
    """Wait, at most ``limit_s`` seconds, for a window of ``window_s`` in which other processes
    use at most MAX_FOREIGN_CORES (``tune --require-quiet``). Returns (quiet, the last window's
    load); (True, None) at once where /proc cannot tell. ``say(load, waited)`` is told of each
    busy window."""
    t0 = time.monotonic()
    while True:
        probe = LoadProbe()
        time.sleep(window_s)
        load = probe.foreign_cores()
        if load is None or load <= MAX_FOREIGN_CORES:
            return True, load
        waited = time.monotonic() - t0
        if say is not None:
            say(load, waited)
        if waited + window_s > limit_s:
            return False, load


def peak_loaded(env: dict[str, Any]) -> bool:
    """Whether an environment fingerprint's peak FLOP/s were measured beside other processes'
    work (``peak_load`` over the limit): they read low, and were not cached."""
    load = env.get("peak_load")
    return load is not None and load > MAX_FOREIGN_CORES


def verdict(rel_iqr: float, foreign_cores: float | None) -> list[str]:
    """Reasons this measurement cannot be trusted; empty when it can."""
    reasons = []
    if rel_iqr > MAX_RATIO_REL_IQR:
        reasons.append(
            f"the paired ratios spread {rel_iqr:.0%} (IQR/median), over the "
            f"{MAX_RATIO_REL_IQR:.0%} limit"
        )
    if foreign_cores is not None and foreign_cores > MAX_FOREIGN_CORES:
        reasons.append(
            f"other processes used {foreign_cores:.2f} cores during the run, over the "
            f"{MAX_FOREIGN_CORES:.2f} limit"
        )
    return reasons
