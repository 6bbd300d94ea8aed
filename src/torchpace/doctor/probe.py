"""The probe step: one step, after warm-up and never timed, that counts FLOPs with
``torch.utils.flop_counter`` and records which lines of the user's code run in a step (so a lint
finding can be confirmed at runtime)."""

from __future__ import annotations

import contextlib
import sys
from types import FrameType
from typing import Any

from torchpace.doctor.sites import Site
from torchpace.runtime.user_code import is_user_code


def _user_code(frame: FrameType) -> bool:
    return is_user_code(frame.f_code)


class Probe:
    def __init__(self) -> None:
        self.lines: set[Site] = set()
        self.flops: int | None = None
        self.note: str | None = None
        self.uncounted: dict[str, int] = {}  # heavy ops with no FLOP formula: name -> calls
        self.compute_calls: Any = None  # precision.ComputeCalls: the step's matmul-like calls
        self._counter: Any = None
        self._seen: Any = None
        self._counted = 0  # FLOPs of the probe step's counted stretches so far
        self._paused = False
        self._tracing = False
        self._module_hook: Any = None  # the float64 recurrent modules' hook (rnn_twin.py)

    def _module_pre(self, module: Any, args: Any) -> None:
        seen = self._seen
        calls = None if seen is None else seen.calls  # None while an evaluation is paused
        if calls is not None:
            with contextlib.suppress(Exception):  # the estimate loses a module, not the step
                calls.recurrent.observe(module, args)

    def _local(self, frame: FrameType, event: str, arg: object) -> Any:
        if event == "line":
            self.lines.add((frame.f_code.co_filename, frame.f_lineno))
        return self._local

    def _global(self, frame: FrameType, event: str, arg: object) -> Any:
        return self._local if _user_code(frame) else None

    def start(self, *, cuda: bool = False) -> None:
        from torch.nn.modules.module import register_module_forward_pre_hook
        from torch.utils.flop_counter import FlopCounterMode

        from torchpace.doctor.flops import CUSTOM, SeenOps
        from torchpace.doctor.precision import ComputeCalls

        try:
            self._seen = SeenOps()
            self._seen.__enter__()
            self._counter = FlopCounterMode(display=False, custom_mapping=CUSTOM)
            self._counter.__enter__()
            self.compute_calls = ComputeCalls(self._counter.flop_registry, cuda=cuda)
            self._seen.calls = self.compute_calls
            self._module_hook = register_module_forward_pre_hook(self._module_pre)
            self._counted = 0
            self._paused = False
        except Exception as exc:  # a model the counter cannot run is still timed
            self._counter = self._seen = self.compute_calls = None
            self.note = f"FLOPs not counted: {type(exc).__name__}: {exc}"
        if sys.gettrace() is not None:
            self.note = (self.note + "; " if self.note else "") + (
                "lines not traced: another tracer (a debugger or coverage) is active"
            )
            return
        # Frames already running (the training loop itself) get the line tracer too.
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if _user_code(frame):
                frame.f_trace = self._local
                frame.f_trace_lines = True
            frame = frame.f_back
        sys.settrace(self._global)
        self._tracing = True

    def pause(self, paused: bool) -> None:
        """Stop counting while an evaluation pass runs inside the probe step (a Lightning
        validation of 2,000 samples was counted into a training step: MFU 932%); count again
        after it. The counter is on top of the mode stack, so it can step out and back in."""
        counter = self._counter
        if counter is None or paused == self._paused:
            return
        if self._seen is not None:  # evaluation calls are not the training step's either
            self._seen.calls = None if paused else self.compute_calls
        try:
            if paused:
                counter.__exit__(None, None, None)
                self._counted += int(counter.get_total_flops())
            else:
                counter.__enter__()  # it starts again from zero
        except Exception as exc:
            self._counter = None
            self.note = f"FLOPs not counted: {type(exc).__name__}: {exc}"
            return
        self._paused = paused

    def stop(self) -> None:
        if self._module_hook is not None:
            self._module_hook.remove()
            self._module_hook = None
        if self._tracing:
            sys.settrace(None)
            frame: FrameType | None = sys._getframe(1)
            while frame is not None:
                if frame.f_trace is self._local:
                    frame.f_trace = None
                frame = frame.f_back
            self._tracing = False
        if self._counter is not None:
            from torchpace.doctor.flops import uncounted

            counter, self._counter = self._counter, None
            seen, self._seen = self._seen, None
            try:
                if not self._paused:
                    counter.__exit__(None, None, None)
                    self._counted += int(counter.get_total_flops())
                if seen is not None:
                    seen.__exit__(None, None, None)
                self.flops = self._counted
            except Exception as exc:
                self.note = f"FLOPs not counted: {type(exc).__name__}: {exc}"
                return
            if seen is not None:
                self.uncounted = uncounted(seen.ops, counter.flop_registry)
            if self.uncounted:
                listed = ", ".join(f"{k} ({n} calls)" for k, n in self.uncounted.items())
                self.note = (self.note + "; " if self.note else "") + (
                    f"no FLOP formula for {listed}: the count and MFU are low"
                )
