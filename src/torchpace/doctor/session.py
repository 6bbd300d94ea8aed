"""One doctor session: install the instruments, follow the steps, take them out, summarise.

``watch()`` is the public form for a notebook or the user's own process; ``torchpace doctor``
runs a script inside one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from torchpace.doctor import children, hooks, loaders, syncs
from torchpace.doctor.probe import Probe
from torchpace.doctor.recorder import Recorder
from torchpace.doctor.sampler import StackSampler
from torchpace.doctor.settings import snapshot
from torchpace.measure import memory
from torchpace.measure.noise import LoadProbe
from torchpace.runtime.patching import Patches
from torchpace.runtime.stop import DoctorStop


class Session:
    def __init__(self, *, steps: int, warmup: int, stop: bool) -> None:
        self.rec = Recorder(steps=steps, warmup=warmup, stop=stop)
        self.patches = Patches()
        self.probe = Probe()
        self.device = torch.device("cpu")
        self.alloc_retries_start = 0
        self.memory_reset = False
        self._probing = False
        self._installed = False
        self.modules: hooks.ModuleHooks | None = None
        self.sampler = StackSampler(self.rec)
        self.load: LoadProbe | None = None  # other processes' CPU time, over the measured steps
        self.other_cores: float | None = None

    def start(self) -> None:
        rec, patches = self.rec, self.patches
        try:
            hooks.install_optimizer(rec, patches)
            hooks.install_backward(rec, patches)
            hooks.install_copies(rec, patches)
            loaders.install(rec, patches)
            syncs.install(rec, patches)
            self.modules = hooks.ModuleHooks(rec, patches)
            children.install(rec.records.children, self, patches)
        except BaseException:
            patches.undo()
            raise
        rec.compile_signature = hooks.compile_signature
        rec.cuda_in_use = lambda: self.trained_device().type == "cuda"
        rec.on_warmup_end = self._warmup_end
        rec.on_probe_end = self._probe_end
        self._installed = True

    def _warmup_end(self) -> None:
        assert self.modules is not None
        self.rec.records.settings = snapshot(
            self.rec.records,
            self.modules.modules(),
            autocast=self.modules.autocast,
            channels_last_input=self.modules.channels_last_input,
        )
        self.modules.to_roots()
        device = self.trained_device()
        if device.type == "cuda":
            self.device = device
            self.alloc_retries_start = memory.cuda_alloc_retries(self.device)
        memory.reset_peak(self.device)
        self.memory_reset = True
        self.probe.start(cuda=self.device.type == "cuda")
        self.modules.on_eval = self.probe.pause
        self._probing = True

    def trained_device(self) -> torch.device:
        """The device the trained models' parameters are on: a script that initialises CUDA
        (to check for a GPU, or a library that does) but trains on the CPU is a CPU run. With no
        model found yet, a CUDA run is one that initialised CUDA."""
        if not torch.cuda.is_initialized():
            return torch.device("cpu")
        modules = self.modules.modules() if self.modules is not None else []
        params = [p for m in modules for p in m.parameters()]
        for p in params:
            if p.device.type == "cuda":
                index = p.device.index if p.device.index is not None else 0
                return torch.device("cuda", index)
        if params:
            return torch.device("cpu")
        return torch.device("cuda", torch.cuda.current_device())

    def _probe_end(self) -> None:
        if self._probing:
            if self.modules is not None:
                self.modules.on_eval = lambda started: None
            self.probe.stop()
            self._probing = False
        records = self.rec.records
        records.flops_per_step = self.probe.flops
        records.flops_note = self.probe.note
        records.flops_uncounted = self.probe.uncounted
        records.compute_calls = self.probe.compute_calls
        records.lines_run = self.probe.lines
        self.sampler.start()  # the measured steps begin
        self.load = LoadProbe()

    def finish(self) -> None:
        """Take every instrument out (idempotent)."""
        self.sampler.stop()
        self.rec.records.samples = self.sampler.counts
        if self.load is not None and self.other_cores is None:
            self.other_cores = self.load.foreign_cores()
        if self._probing:
            self._probe_end()
        if self._installed:
            self.patches.undo()
            self._installed = False

    def disarm(self) -> None:
        """In a child forked from the script's process: no records, no stop, no instruments."""
        self.rec.finished = True
        self.rec.stop = False
        self._probing = False
        self.sampler = StackSampler(self.rec)  # the parent's thread is not in this process
        if self._installed:
            self._installed = False
            self.patches.undo()

    def memory(self) -> dict[str, Any]:
        peak = memory.peak(self.device)
        out: dict[str, Any] = {
            "peak_bytes": peak.bytes,
            "kind": peak.kind,
            "since": "end of warm-up" if self.memory_reset else "start",
        }
        if self.device.type == "cuda":
            out["alloc_retries"] = memory.cuda_alloc_retries(self.device) - self.alloc_retries_start
        return out


@dataclass
class Watch:
    """What ``watch()`` yields; ``result`` is filled in when the block ends."""

    steps: int
    warmup: int
    result: dict[str, Any] = field(default_factory=dict)


@contextmanager
def watch(*, steps: int = 0, warmup: int = 3, lint: bool = True) -> Iterator[Watch]:
    """Measure the training steps run inside the block, and diagnose them.

    ``steps=0`` measures every step until the block ends; ``steps=N`` ends the block (quietly)
    after ``warmup`` warm-up steps, one probe step and N measured steps. The result (the same
    dictionary ``torchpace doctor --json`` writes) is in ``.result`` afterwards::

        with torchpace.doctor.watch(steps=50) as d:
            train()
        torchpace.doctor.print_report(d.result)
    """
    from torchpace.doctor.result import build

    session = Session(steps=steps, warmup=warmup, stop=steps > 0)
    handle = Watch(steps=steps, warmup=warmup)
    session.start()
    outcome = "the block finished"
    try:
        yield handle
    except DoctorStop:
        outcome = "stopped after the measured steps"
    except BaseException as exc:
        outcome = f"the block raised {type(exc).__name__}"
        raise
    finally:
        session.finish()
        handle.result = build(session, target={"kind": "watch"}, outcome=outcome, lint=lint)
