"""Apply a ``Plan`` to a user's script as it runs, without editing it: the interposition half of
``torchpace tune SCRIPT`` and ``torchpace run --plan``.

Everything goes through public hooks and constructor patches (``runtime.patching.Patches``, undone
at the end), and each technique reuses its ``torchpace.speedups`` verb:

- constructors: ``DataLoader(...)`` gets the plan's loader settings and batch size
  (``script/loaders.py``); optimizers get the LR scaled for that batch size, and their fused
  kernel at their first ``step()``; ``zero_grad`` frees gradients (set_to_none);
- the models, found at their first training call (``runtime.models``: the definition the
  doctor uses too): conv-bias folding, channels_last
  weights, the attention backend and ``torch.compile`` of their forward; on every training call,
  4-d inputs in channels_last and autocast entered for the forward *and* the loss, left at
  ``backward()``, as torch's AMP recipe places it (with a GradScaler for fp16);
- process-wide flags: TF32 / bf16 float32 matmuls and cudnn.benchmark.

What a technique cannot do on this script is recorded as ``Applied(changed=False, reason)``,
never raised. ``on_backward`` and ``on_forward`` let the caller (a tune trial) see every loss and
every training batch.
"""

from __future__ import annotations

import functools
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from torchpace.runtime.batches import batch_size
from torchpace.runtime.events import on_backward, on_optimizer_built
from torchpace.runtime.models import RootWatch, trains
from torchpace.runtime.patching import Patches
from torchpace.runtime.user_code import is_internal
from torchpace.script.loaders import LoaderPatch
from torchpace.speedups.applied import Applied, done, skipped
from torchpace.speedups.compile import compile_forward
from torchpace.speedups.fast_math import FastMath, set_fast_math
from torchpace.speedups.forward import use_attention_backend
from torchpace.speedups.memory_format import in_effect, use_channels_last
from torchpace.speedups.optim import fuse_optimizer
from torchpace.speedups.precision import Precision, choose_precision
from torchpace.speedups.surgery import fold_conv_bias
from torchpace.techniques import fit_only, not_for_scripts
from torchpace.train.apply_plan import drop_removed_params
from torchpace.train.plan import Plan, fields_of


class Interposer:
    """Apply ``plan`` to whatever script runs between ``install()`` and ``uninstall()``."""

    def __init__(self, plan: Plan, *, device: torch.device) -> None:
        self.plan = plan
        # ids of the models put in channels_last (their 4-d inputs are converted) and of those
        # the format breaks (their inputs are made contiguous, whatever another model hands them)
        self._cl_roots: set[int] = set()
        self._cl_kept: set[int] = set()
        self.device = device
        self.applied: list[Applied] = []
        self.patches = Patches()
        self.roots: list[weakref.ref[nn.Module]] = []
        self.optimizers: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()
        self.loader_patch = LoaderPatch(plan, device, self.applied, self._batch_scaled)
        self.loaders = self.loader_patch.loaders  # what each DataLoader was made with
        self.facts: dict[str, Any] = {}  # what the models and optimizers are, for the tune
        self.own_autocast = False
        self.script_scales = False  # the script scales its losses with its own GradScaler
        self.on_backward: Callable[[torch.Tensor], None] = lambda loss: None
        self.on_forward: Callable[[int], None] = lambda samples: None  # the first root's batches
        self.on_first_forward: Callable[[], None] = lambda: None
        self.after_backward: Callable[[], None] = lambda: None
        self._root_ids: set[int] = set()
        self._autocast: Any = None  # the autocast context we entered, until backward()
        self._precision: Precision | None = None
        self._scaler: Any = None  # our GradScaler, fp16 only
        self._scaled: dict[int, torch.Tensor] = {}  # id(scaled loss) -> its scale (the script's)
        self._lr_factor: float | None = None
        self._lr_done: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()
        self._fused: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()
        self.watch: RootWatch | None = None
        self._fast: FastMath | None = None
        self._in_step = False
        self._scaled_grads = False  # fp16: a backward since the last update ran scaled
        self._unscaled: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()

    # -- install / uninstall -------------------------------------------------------------------
    def install(self) -> None:
        try:
            self._install()
        except BaseException:
            self.uninstall()
            raise

    def _install(self) -> None:
        plan = self.plan
        off = Plan()
        for technique, why in not_for_scripts().items():  # when the plan sets one of its fields
            if any(getattr(plan, f) != getattr(off, f) for f in fields_of(technique)):
                self.applied.append(skipped(technique, why, warn=False))
        if plan.fast_math:
            self._fast = set_fast_math(self.device)
            self.applied.extend(self._fast.applied)
        precision, chosen = choose_precision(self.device, plan.amp)
        if plan.amp != "off":
            if precision.dtype is None:
                self.applied.append(chosen)
            else:
                self._precision = precision
        self.loader_patch.install(self.patches)
        self._patch_optimizer()
        self._patch_backward()
        # the models (runtime/models.py); their hooks and a compiled forward stay out of saves
        self.watch = RootWatch(self.patches, self._root_call)

    def uninstall(self) -> None:
        self._leave_autocast()
        self.patches.undo()
        if self._fast is not None:
            self._fast.restore()
            self._fast = None

    @property
    def discovering(self) -> bool:
        return self.watch is not None and self.watch.discovering

    def end_discovery(self) -> None:
        """The first step is over: its roots are the trained models; stop watching every module
        (global hooks slow each submodule call, and compiled code guards on them)."""
        if self.watch is not None:
            self.watch.end()

    # -- the root modules ----------------------------------------------------------------------
    def _root_call(self, module: nn.Module, args: tuple[Any, ...]) -> Any:
        if id(module) not in self._root_ids:
            if not trains(module):
                return None  # a loss module, an evaluation, a teacher in eval()
            first = not self.roots
            self._new_root(module)
            out = self._root_pre(module, args)
            if first:
                self.on_first_forward()
            return out
        return self._root_pre(module, args)

    def _new_root(self, root: nn.Module) -> None:
        self.roots.append(weakref.ref(root))
        self._root_ids.add(id(root))
        mods = list(root.modules())
        self.facts.setdefault("models", []).append(type(root).__name__)
        self.facts["has_conv"] = self.facts.get("has_conv", False) or any(
            isinstance(m, nn.Conv2d) for m in mods
        )
        self.facts["has_conv_bias"] = self.facts.get("has_conv_bias", False) or any(
            isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)) and m.bias is not None for m in mods
        )
        from torchpace.tune.candidates import uses_attention

        self.facts["has_attention"] = self.facts.get("has_attention", False) or any(
            uses_attention(m) for m in mods
        )
        p = next(root.parameters())
        self.facts["device"] = str(p.device)
        self.facts["param_dtype"] = str(p.dtype).removeprefix("torch.")
        plan = self.plan
        if plan.fold_conv_bias:
            before = {id(q) for q in root.parameters()}
            self.applied.append(fold_conv_bias(root))
            for opt in list(self.optimizers):
                drop_removed_params(opt, root, before)
        if plan.channels_last:
            self.applied.append(use_channels_last(root))
            (self._cl_roots if in_effect(self.applied[-1]) else self._cl_kept).add(id(root))
        if plan.attention != "default":
            self.applied.append(use_attention_backend(root, backend=plan.attention))
        if plan.compile != "off":
            self.applied.append(compile_forward(root, mode=plan.compile))
        assert self.watch is not None
        self.watch.watch(root)

    def _root_pre(self, module: nn.Module, args: tuple[Any, ...]) -> Any:
        if not trains(module):
            return None
        if self.roots and self.roots[0]() is module and args:
            self.on_forward(batch_size(args[0]))
        if self._precision is not None and self._autocast is None:
            if torch.is_autocast_enabled(self._precision.device_type):
                # The script runs its own autocast: ours would end in the wrong order.
                if not self.own_autocast:
                    self.own_autocast = True
                    self.applied.append(
                        skipped(
                            "amp-bf16" if self._precision.name == "bf16" else "amp-fp16",
                            "the script already runs its forward under autocast",
                            warn=False,
                        )
                    )
                    self._precision = None
            else:
                self._autocast = self._precision.autocast()
                self._autocast.__enter__()
                self._note_autocast()
        fmt = torch.channels_last if id(module) in self._cl_roots else None
        if id(module) in self._cl_kept:
            fmt = torch.contiguous_format  # a GAN's D fed by a converted G: keep oneDNN off it
        if fmt is not None and self.facts.get("has_conv"):
            changed = tuple(_in_format(a, fmt) for a in args)
            if any(c is not a for c, a in zip(changed, args, strict=True)):
                return changed
        return None

    def _note_autocast(self) -> None:
        assert self._precision is not None
        tid = "amp-fp16" if self._precision.name == "fp16" else "amp-bf16"
        if not any(a.technique == tid and a.changed for a in self.applied):
            how = f"autocast({self._precision.device_type}, {self._precision.name})"
            line = f"training forward and loss under {how}, left at backward()"
            if self._precision.name == "fp16":
                line += ", with a GradScaler"
            self.applied.append(done(tid, [line]))

    def _leave_autocast(self) -> None:
        if self._autocast is not None:
            ctx, self._autocast = self._autocast, None
            ctx.__exit__(None, None, None)

    # -- backward: the loss, autocast's end, fp16 scaling ---------------------------------------
    def _patch_backward(self) -> None:
        scale = torch.amp.GradScaler.scale
        scaled = self._scaled

        def scale_and_remember(scaler: Any, outputs: Any) -> Any:
            out = scale(scaler, outputs)
            if isinstance(out, torch.Tensor) and scaler.is_enabled() and scaler is not self._scaler:
                self.script_scales = True  # the script's own GradScaler: ours stays out
                scaled[id(out)] = scaler._scale
            return out

        self.patches.set(torch.amp.GradScaler, "scale", scale_and_remember)

        def before(loss: Any, method: bool, args: Any, kwargs: Any) -> Any:
            self._leave_autocast()
            if loss is not None and loss.numel() == 1:
                s = self._scaled.pop(id(loss), None)
                value = loss.detach().float().reshape(())
                self.on_backward(value / s.float().reshape(()) if s is not None else value)
            if self._scaler is not None and not self.script_scales:
                args, kwargs = _scaled_backward(self._scaler, method, args, kwargs)
                self._scaled_grads = True
            return args, kwargs

        def after() -> None:
            if self.roots and self.discovering and not len(self.optimizers):
                self.end_discovery()  # a manual update: its first backward ends step 1
            self.after_backward()

        on_backward(self.patches, before, after)
        if self._scaler is not None:
            self._patch_gradient_reads()

    def _patch_gradient_reads(self) -> None:
        """fp16: the functions that read gradient values (clipping, the total norm) see them
        unscaled, as torch's AMP recipe has it (``scaler.unscale_(opt)`` before clipping): the
        optimizers owning the tensors are unscaled first, once per step; ``scaler.step`` then
        knows not to unscale them again."""
        import torch.nn.utils.clip_grad as clip_module

        for name in _GRADIENT_READERS:
            original = getattr(clip_module, name, None)
            if original is None:  # not in this torch version
                continue
            wrapped = self._unscaling(original)
            for module in (clip_module, torch.nn.utils):
                if getattr(module, name, None) is original:
                    self.patches.set(module, name, wrapped)

    def _unscaling(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def read(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            listed = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
            self._unscale_owners(listed)
            return original(listed, *args, **kwargs)

        return read

    def _unscale_owners(self, tensors: list[Any]) -> None:
        scaler = self._scaler
        if scaler is None or self.script_scales or not self._scaled_grads:
            return
        ids = {id(t) for t in tensors if isinstance(t, torch.Tensor)}
        for opt in list(self.optimizers):
            if opt in self._unscaled:
                continue
            params = [p for g in opt.param_groups for p in g["params"]]
            if any(id(p) in ids or (p.grad is not None and id(p.grad) in ids) for p in params):
                scaler.unscale_(opt)
                self._unscaled.add(opt)

    # -- optimizers ----------------------------------------------------------------------------
    def _patch_optimizer(self) -> None:
        if self._precision is not None and self._precision.name == "fp16":
            self._scaler = self._precision.make_scaler()

        def built(opt: torch.optim.Optimizer) -> None:
            self.optimizers.add(opt)
            self.facts.setdefault("optimizers", []).append(type(opt).__name__)
            self._scale_lr(opt)
            if self._scaler is not None:
                self._step_through_scaler(opt)

        on_optimizer_built(self.patches, built)
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        self.patches.on_undo(register_optimizer_step_pre_hook(self._step_pre).remove)
        self.patches.on_undo(register_optimizer_step_post_hook(self._step_post).remove)
        if self.plan.grad_set_to_none:
            self._patch_zero_grad()

    def _step_pre(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._leave_autocast()  # a closure (LBFGS) runs its forward inside step()
        self._in_step = True
        if self.plan.fused_optimizer and opt not in self._fused:
            self._fused.add(opt)
            self.applied.append(fuse_optimizer(opt))

    def _step_post(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._in_step = False
        if self.roots and self.discovering:
            self.end_discovery()

    @property
    def in_step(self) -> bool:
        """Inside an optimizer's ``step()`` (an LBFGS closure's backward, for instance)."""
        return self._in_step

    def _patch_zero_grad(self) -> None:
        opt_zero = torch.optim.Optimizer.zero_grad
        mod_zero = nn.Module.zero_grad
        record = [False]

        already = [False]

        def note(owner: str, set_to_none: bool) -> None:
            if set_to_none:  # the script frees them itself (the default since torch 2.0)
                if not already[0] and not record[0]:
                    already[0] = True
                    self.applied.append(
                        done("grad-set-to-none", [], reason="the script's zero_grad frees them")
                    )
            elif not record[0]:
                record[0] = True
                self.applied.append(
                    done("grad-set-to-none", [f"{owner}.zero_grad frees gradients (None)"])
                )

        def optimizer_zero_grad(opt: Any, set_to_none: bool = True) -> None:
            note(type(opt).__name__, set_to_none)
            opt_zero(opt, set_to_none=True)

        def module_zero_grad(module: Any, set_to_none: bool = True) -> None:
            note(type(module).__name__, set_to_none)
            mod_zero(module, set_to_none=True)

        self.patches.set(torch.optim.Optimizer, "zero_grad", optimizer_zero_grad)
        self.patches.set(nn.Module, "zero_grad", module_zero_grad)

    def _step_through_scaler(self, opt: torch.optim.Optimizer) -> None:
        """fp16: ``opt.step()`` goes through our GradScaler (unscale, skip on inf/NaN, update),
        unless the script scales its losses itself.

        The replacement is a bound method, as ``opt.step`` was: an LR scheduler built on the
        optimizer wraps ``opt.step.__func__``, which a plain function lacks."""
        bound = opt.step
        inside = [False]  # GradScaler.step calls opt.step: that inner call is the real one
        interposer = self

        def step(optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
            scaler = interposer._scaler
            if inside[0] or scaler is None or interposer.script_scales:
                return bound(*args, **kwargs)
            inside[0] = True
            try:
                out = scaler.step(optimizer, *args, **kwargs)
                scaler.update()
                return out
            finally:
                inside[0] = False
                interposer._unscaled = weakref.WeakSet()  # update() reset every optimizer
                interposer._scaled_grads = False

        opt.step = types.MethodType(step, opt)  # type: ignore[method-assign]

    def _batch_scaled(self, factor: float) -> None:
        """The training loader's batch size changed: the LR of every optimizer, now and later,
        times ``factor``."""
        self._lr_factor = factor
        for opt in list(self.optimizers):
            self._scale_lr(opt)

    def _scale_lr(self, opt: torch.optim.Optimizer) -> None:
        """The LR of ``opt`` times the batch size's factor, once; and every LR the script's own
        code writes into a param group afterwards (a manual schedule, as nanoGPT's
        ``param_group['lr'] = lr`` each step), which would otherwise undo it. torch's LR
        schedulers start from the scaled ``initial_lr``: their writes are left as they are."""
        if self._lr_factor is None or opt in self._lr_done or self._lr_factor == 1.0:
            return
        self._lr_done.add(opt)
        for i, group in enumerate(opt.param_groups):
            if isinstance(group.get("lr"), (int, float)):
                group["lr"] = group["lr"] * self._lr_factor
                if "initial_lr" in group:  # a scheduler made before: it restarts from this
                    group["initial_lr"] = group["initial_lr"] * self._lr_factor
            opt.param_groups[i] = ScaledGroup(group, self._lr_factor)

    # -- what happened -------------------------------------------------------------------------
    def not_applied(self) -> dict[str, str]:
        """Technique -> why, for the plan's techniques that changed nothing on this script."""
        changed = {a.technique for a in self.applied if a.changed}
        out: dict[str, str] = {}
        for a in self.applied:
            if not a.changed and a.technique not in changed and a.reason:
                out.setdefault(a.technique, a.reason)
        for tid in self.plan.techniques():
            if tid not in changed and tid not in out and tid not in fit_only():
                out[tid] = "the script never reached the code this applies to"
        return out


class ScaledGroup(dict):  # type: ignore[type-arg]
    """An optimizer's param group whose ``lr``, when the user's code sets it, is multiplied by
    the plan's batch-size factor (a write from torch or torchpace, a scheduler's, is not)."""

    def __init__(self, group: dict[str, Any], factor: float) -> None:
        super().__init__(group)
        self.factor = factor

    def __setitem__(self, key: str, value: Any) -> None:
        if (
            key == "lr"
            and isinstance(value, (int, float))
            and not is_internal(sys._getframe(1).f_code)
        ):
            value = value * self.factor
        super().__setitem__(key, value)


# torch.nn.utils functions that read gradient values (get_total_norm and clip_grads_with_norm_
# exist from torch 2.6).
_GRADIENT_READERS = (
    "clip_grad_norm_",
    "clip_grad_norm",
    "clip_grad_value_",
    "get_total_norm",
    "clip_grads_with_norm_",
)


def _scaled_backward(
    scaler: Any, method: bool, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The same backward call with its root gradients multiplied by the scaler's scale, in any
    form it was called: ``loss.backward()``, ``loss.backward(gradient)`` for a non-scalar root,
    ``torch.autograd.backward(tensors=..., grad_tensors=...)``, positional or by keyword."""
    names = ("self", "gradient") if method else ("tensors", "grad_tensors")
    positional, kwargs = list(args), dict(kwargs)

    def get(i: int) -> Any:
        return positional[i] if len(positional) > i else kwargs.get(names[i])

    def put(i: int, value: Any) -> None:
        if len(positional) > i:
            positional[i] = value
        else:
            kwargs[names[i]] = value

    roots, grads = get(0), get(1)
    if grads is None and not method and kwargs.get("grad_variables") is not None:
        grads = kwargs.pop("grad_variables")  # the deprecated name of grad_tensors
        put(1, grads)
    if roots is None:
        return args, kwargs
    if grads is None:  # scalar roots: scale them (autograd's implicit gradient is 1)
        if isinstance(roots, torch.Tensor):
            put(0, scaler.scale(roots))
        else:
            put(0, [scaler.scale(t) for t in roots])
    elif isinstance(grads, torch.Tensor):
        put(1, scaler.scale(grads))
    else:  # one gradient per root; a None gradient means the root is a scalar
        roots_list = [roots] if isinstance(roots, torch.Tensor) else list(roots)
        pairs = list(zip(roots_list, list(grads), strict=True))
        put(0, [scaler.scale(t) if g is None else t for t, g in pairs])
        put(1, [None if g is None else scaler.scale(g) for _t, g in pairs])
    return tuple(positional), kwargs


def _in_format(x: Any, fmt: torch.memory_format) -> Any:
    """A 4-d floating-point tensor in ``fmt`` (itself when it already is); anything else as is."""
    if isinstance(x, torch.Tensor) and x.dim() == 4 and x.is_floating_point():
        return x.contiguous(memory_format=fmt)
    return x
