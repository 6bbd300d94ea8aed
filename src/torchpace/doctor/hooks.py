"""Optimizer, module and autograd instruments: where a step begins and ends, and its forward,
backward and optimizer phases.

The roots (a module called while no other module runs: the model, or a loss module) are found
during warm-up by ``runtime.models.RootWatch``, which also says which call is a model training;
at the end of warm-up its global hooks give way to hooks on the roots alone.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from torchpace.doctor.recorder import Recorder
from torchpace.doctor.records import OptimizerInfo
from torchpace.doctor.sites import user_site
from torchpace.runtime.batches import batch_size, token_count
from torchpace.runtime.events import on_backward, on_optimizer_built, on_scaler_update
from torchpace.runtime.models import RootWatch, records_autograd, trains
from torchpace.runtime.patching import Patches

_SITE = "_torchpace_doctor_site"


def _optimizer_info(opt: torch.optim.Optimizer) -> OptimizerInfo:
    defaults = opt.defaults
    foreach = defaults.get("foreach")
    return OptimizerInfo(
        name=type(opt).__name__,
        site=opt.__dict__.get(_SITE),
        fused=bool(defaults.get("fused")),
        foreach=None if foreach is None else bool(foreach),
    )


def install_optimizer(rec: Recorder, patches: Patches) -> None:
    def built(opt: torch.optim.Optimizer) -> None:
        opt.__dict__[_SITE] = user_site()
        rec.steps_by.optimizer_built()

    def pre(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        rec.guarded("an optimizer step's start", _pre, opt)

    def post(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        # DoctorStop (a BaseException: the measured steps are done) passes the guard
        rec.guarded("an optimizer step's end", _post, opt)

    def _pre(opt: torch.optim.Optimizer) -> None:
        if id(opt) not in rec.records.optimizers:
            rec.records.optimizers[id(opt)] = _optimizer_info(opt)
            site = user_site()
            if site is not None:
                rec.records.step_sites.add(site)
        rec.clock.enter("optimizer")
        rec.in_optimizer_step = True

    def _post(opt: torch.optim.Optimizer) -> None:
        rec.in_optimizer_step = False
        rec.clock.exit()
        rec.optimizer_stepped(opt)

    on_optimizer_built(patches, built)
    patches.on_undo(register_optimizer_step_pre_hook(pre).remove)
    patches.on_undo(register_optimizer_step_post_hook(post).remove)
    # an fp16 step whose optimizer step the scaler skipped ends at its update()
    on_scaler_update(patches, lambda: rec.guarded("a GradScaler's update", rec.scaler_updated))


class ModuleHooks:
    """Forward phases of the root modules (runtime/models.py); autocast and input format seen
    in the trained model's calls."""

    def __init__(self, rec: Recorder, patches: Patches) -> None:
        self.rec = rec
        self._in_eval = False
        # Told when a model call without autograd (evaluation) starts and ends: the probe step
        # does not count its FLOPs.
        self.on_eval: Callable[[bool], None] = lambda started: None
        self.roots: dict[int, weakref.ref[nn.Module]] = {}
        self._trained: set[int] = set()  # models whose training call site is recorded
        self.autocast: set[str] = set()
        self.channels_last_input: bool | None = None
        self._cuda = torch.cuda.is_available()
        self.watch = RootWatch(patches, self._call, self._return)

    def _call(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        self.rec.guarded("a model's forward start", self._call_body, module, args)

    def _call_body(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        key = id(module)
        discovering = self.watch.discovering
        if discovering and key not in self.roots:
            self.roots[key] = weakref.ref(module)
            site = user_site()
            if site is not None:
                self.rec.records.forward_sites.add(site)
        # The phase is what the call costs: autograd recorded or not. Whether it is the model
        # training is the shared definition (a loss module's call is forward time, not a model).
        if records_autograd():
            if trains(module):
                if key not in self._trained:
                    # The line a training finding points at: a model's first training call,
                    # not its first call (nanoGPT evaluates before it trains).
                    self._trained.add(key)
                    site = user_site()
                    if site is not None:
                        self.rec.records.train_forward_sites.add(site)
                if args:
                    self.rec.forward_batch(batch_size(args[0]), token_count(args[0]))
                    if discovering:
                        self._observe(args[0])
            self.rec.clock.enter("forward")
        else:
            self.rec.eval_calls += 1
            self.rec.clock.enter("eval")
            self._in_eval = True
            self.on_eval(True)
        if discovering and _compiled(module):
            # This call's own post hook, registered now, still runs: it closes the phase.
            self.to_roots()

    def _return(self, module: nn.Module) -> None:
        self.rec.guarded("a model's forward end", self._return_body)

    def _return_body(self) -> None:
        self.rec.clock.exit()
        if self._in_eval:
            self._in_eval = False
            self.on_eval(False)

    def _observe(self, first: Any) -> None:
        for device in ("cpu", "cuda") if self._cuda else ("cpu",):
            if torch.is_autocast_enabled(device):
                self.autocast.add(f"{device}:{str(torch.get_autocast_dtype(device))[6:]}")
        if isinstance(first, torch.Tensor) and first.dim() == 4:
            self.channels_last_input = bool(
                first.is_contiguous(memory_format=torch.channels_last) and not first.is_contiguous()
            )

    def to_roots(self) -> None:
        """End of warm-up: hooks on the roots found, instead of on every module. Also called
        on the first call of a compiled model, so that dynamo never traces it with global
        hooks in place (torch warns at every call, and its guards may recompile once they
        go); later roots, a loss module say, are then not discovered."""
        if not self.watch.discovering:
            return
        for ref in self.roots.values():
            module = ref()
            if module is not None:
                self.rec.records.roots.append(type(module).__name__)
                self.watch.watch(module)
        self.watch.end()

    def modules(self) -> list[nn.Module]:
        return [m for m in (r() for r in self.roots.values()) if m is not None]


def _compiled(module: nn.Module) -> bool:
    """``torch.compile(model)`` (an OptimizedModule) or ``model.compile()`` (in place)."""
    return (
        type(module).__name__ == "OptimizedModule"
        or getattr(module, "_compiled_call_impl", None) is not None
    )


def install_backward(rec: Recorder, patches: Patches) -> None:
    sites = rec.records.backward_sites

    def before(loss: Any, method: bool, args: Any, kwargs: Any) -> Any:
        rec.backward_calls += 1
        if rec.phase != "measured":
            site = user_site()
            if site is not None:
                sites.add(site)
        rec.clock.enter("backward")
        return args, kwargs

    # backward_ended may end the step, and the run (DoctorStop)
    on_backward(patches, before, after=rec.backward_ended, done=rec.clock.exit)


def _to_cuda(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    for x in (*args, kwargs.get("device")):
        if isinstance(x, torch.device):
            return x.type == "cuda"
        if isinstance(x, str):
            return x.startswith("cuda")
        if isinstance(x, int) and not isinstance(x, bool):
            return True
        if isinstance(x, torch.Tensor):
            return x.is_cuda
    return False


def install_copies(rec: Recorder, patches: Patches) -> None:
    """Host-to-device copies (``.to(cuda)``, ``.cuda()``) as their own phase. CUDA only."""
    if not torch.cuda.is_available():
        return
    to = torch.Tensor.to
    cuda = torch.Tensor.cuda
    main = rec.main_thread

    def copy(original: Callable[..., Any], always: bool) -> Callable[..., Any]:
        @functools.wraps(original)
        def call(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if (
                self.is_cuda
                or threading.get_ident() != main
                or not (always or _to_cuda(args, kwargs))
            ):
                return original(self, *args, **kwargs)
            rec.clock.enter("copy")
            try:
                return original(self, *args, **kwargs)
            finally:
                rec.clock.exit()

        return call

    patches.set(torch.Tensor, "to", copy(to, False))
    patches.set(torch.Tensor, "cuda", copy(cuda, True))


def compile_signature() -> object:
    """A value that changes whenever torch.compile compiles a graph (None if it never loaded)."""
    if "torch._dynamo" not in sys.modules:
        return None
    from torch._dynamo.utils import counters

    return (counters["stats"]["unique_graphs"], counters["aot_autograd"]["total"])
