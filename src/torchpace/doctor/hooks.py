"""Optimizer, module and autograd instruments: where a step begins and ends, and its forward,
backward and optimizer phases.

Models are found during warm-up with global module hooks (a module called while no other module
is running is a root: the model, or a loss module). Global hooks slow every submodule call, so at
the end of warm-up they are replaced by hooks on the roots alone.
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
from torchpace.runtime.modules import keep_out_of_saves
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
    init = torch.optim.Optimizer.__init__

    def __init__(self: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.__dict__[_SITE] = user_site()
        rec.optimizers_built += 1

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
        if rec.is_boundary(opt):
            rec.boundary()

    patches.set(torch.optim.Optimizer, "__init__", __init__)
    patches.on_undo(register_optimizer_step_pre_hook(pre).remove)
    patches.on_undo(register_optimizer_step_post_hook(post).remove)


class ModuleHooks:
    """Forward phases of the root modules; autocast and input format seen in training."""

    def __init__(self, rec: Recorder, patches: Patches) -> None:
        self.rec = rec
        self.patches = patches
        self.depth = 0
        self.data_depth = 0  # module calls open inside a DataLoader fetch
        self._in_eval = False
        # Told when a model call without autograd (evaluation) starts and ends: the probe step
        # does not count its FLOPs.
        self.on_eval: Callable[[bool], None] = lambda started: None
        self.roots: dict[int, weakref.ref[nn.Module]] = {}
        self.has_params: dict[int, bool] = {}
        self._trained: set[int] = set()  # roots whose training call site is recorded
        self.autocast: set[str] = set()
        self.channels_last_input: bool | None = None
        self.discovering = True
        self._is_compiling = torch.compiler.is_compiling
        self._cuda = torch.cuda.is_available()
        mp = nn.modules.module
        self._global = [
            mp.register_module_forward_pre_hook(self._pre),
            mp.register_module_forward_hook(self._post, always_call=True),
        ]
        patches.on_undo(self._remove_global)
        keep_out_of_saves(patches)  # the roots' hooks: not in the script's torch.save(model)

    def _remove_global(self) -> None:
        for handle in self._global:
            handle.remove()
        self._global = []

    def _pre(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if self._is_compiling() or threading.get_ident() != self.rec.main_thread:
            return
        self.rec.guarded("a model's forward start", self._pre_body, module, args)

    def _pre_body(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if self.data_depth or (self.depth == 0 and self.rec.clock.current == "data"):
            # Called while a DataLoader fetches (a dataset's or collate_fn's nn.Module
            # transforms, torchvision's among them): loading, not a model. Its time stays data.
            self.data_depth += 1
            return
        compiled = False
        if self.depth == 0:
            key = id(module)
            if self.discovering and key not in self.roots:
                self.roots[key] = weakref.ref(module)
                self.has_params[key] = any(True for _ in module.parameters())
                site = user_site()
                if site is not None:
                    self.rec.records.forward_sites.add(site)
            compiled = self.discovering and _compiled(module)
            training = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
            if training:
                if self.has_params.get(key) and key not in self._trained:
                    # The line a training finding points at: a model's first call with autograd
                    # on, not its first call (nanoGPT evaluates before it trains).
                    self._trained.add(key)
                    site = user_site()
                    if site is not None:
                        self.rec.records.train_forward_sites.add(site)
                if self.has_params.get(key, False) and args:
                    self.rec.forward_batch(batch_size(args[0]), token_count(args[0]))
                    if self.discovering:
                        self._observe(args[0])
                self.rec.clock.enter("forward")
            else:
                self.rec.eval_calls += 1
                self.rec.clock.enter("eval")
                self._in_eval = True
                self.on_eval(True)
        self.depth += 1
        if compiled:
            # This call's own post hook, registered now, still runs: it closes the phase.
            self.to_roots()

    def _post(self, module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if self._is_compiling() or threading.get_ident() != self.rec.main_thread:
            return
        self.rec.guarded("a model's forward end", self._post_body, module, output)

    def _post_body(self, module: nn.Module, output: Any) -> None:
        if self.data_depth:
            self.data_depth -= 1
            return
        self.depth = max(0, self.depth - 1)
        if self.depth == 0:
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
        if not self.discovering:
            return
        self._remove_global()
        self.discovering = False
        for ref in self.roots.values():
            module = ref()
            if module is None:
                continue
            self.rec.records.roots.append(type(module).__name__)
            pre = module.register_forward_pre_hook(self._pre)
            post = module.register_forward_hook(self._post, always_call=True)
            self.patches.on_undo(pre.remove)
            self.patches.on_undo(post.remove)

    def modules(self) -> list[nn.Module]:
        return [m for m in (r() for r in self.roots.values()) if m is not None]


def _compiled(module: nn.Module) -> bool:
    """``torch.compile(model)`` (an OptimizedModule) or ``model.compile()`` (in place)."""
    return (
        type(module).__name__ == "OptimizedModule"
        or getattr(module, "_compiled_call_impl", None) is not None
    )


def _timed_backward(
    rec: Recorder, original: Callable[..., Any], state: dict[str, bool]
) -> Callable[..., Any]:
    """``Tensor.backward`` calls ``torch.autograd.backward``: both wrappers share ``state`` so
    one backward counts once."""
    main = rec.main_thread
    sites = rec.records.backward_sites

    @functools.wraps(original)
    def backward(*args: Any, **kwargs: Any) -> Any:
        if state["inside"] or threading.get_ident() != main:
            return original(*args, **kwargs)
        state["inside"] = True
        rec.backward_calls += 1
        if rec.phase != "measured":
            site = user_site()
            if site is not None:
                sites.add(site)
        rec.clock.enter("backward")
        try:
            out = original(*args, **kwargs)
        finally:
            rec.clock.exit()
            state["inside"] = False
        rec.backward_ended()  # may end the step, and the run (DoctorStop)
        return out

    return backward


def install_backward(rec: Recorder, patches: Patches) -> None:
    state = {"inside": False}
    patches.set(torch.Tensor, "backward", _timed_backward(rec, torch.Tensor.backward, state))
    patches.set(torch.autograd, "backward", _timed_backward(rec, torch.autograd.backward, state))


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
