"""One definition of "the model", for every runtime that watches a script run: the doctor's
module instruments and the plan interposer (and through it the script trial and compare's
worker).

A *root* is a module called on the main thread while no other module runs and no DataLoader
fetch is open (a dataset's ``nn.Module`` transforms load data; they are not a model). A root
*trains* in a call that autograd records, in training mode, with parameters to train: a loss
module has none, an evaluation runs without grad or in ``eval()``, a distillation teacher runs in
``eval()``.

``RootWatch`` finds roots with global module hooks while it discovers (they slow every submodule
call, and compiled code guards on them), then keeps hooks on the roots it was asked to watch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data.dataloader import _BaseDataLoaderIter

from torchpace.runtime.modules import keep_out_of_saves
from torchpace.runtime.patching import Patches


def records_autograd() -> bool:
    """Autograd records what runs now: grad enabled, not inference mode."""
    return torch.is_grad_enabled() and not torch.is_inference_mode_enabled()


def trains(module: nn.Module) -> bool:
    """This call of ``module``, a root, is a training call of a model."""
    return module.training and records_autograd() and any(True for _ in module.parameters())


class RootWatch:
    """Calls ``on_call(module, args)`` when a root's call starts (its return value, if not None,
    replaces the call's arguments, as a forward pre-hook's does) and ``on_return(module)`` when
    it ends, until ``patches`` are undone."""

    def __init__(
        self,
        patches: Patches,
        on_call: Callable[[nn.Module, tuple[Any, ...]], Any],
        on_return: Callable[[nn.Module], None] = lambda module: None,
    ) -> None:
        self.patches = patches
        self.on_call = on_call
        self.on_return = on_return
        self.discovering = True
        self._depth = 0  # module calls open: every module's while discovering, roots' after
        self._fetching = 0  # DataLoader fetches open, and module calls open inside them
        self._watched: set[int] = set()
        self._main = threading.get_ident()
        self._is_compiling = torch.compiler.is_compiling
        fetch = _BaseDataLoaderIter.__next__

        def fetched(it: _BaseDataLoaderIter) -> Any:
            if threading.get_ident() != self._main:
                return fetch(it)
            self._fetching += 1
            try:
                return fetch(it)
            finally:
                self._fetching -= 1

        patches.set(_BaseDataLoaderIter, "__next__", fetched)
        mp = nn.modules.module
        self._global = [
            mp.register_module_forward_pre_hook(self._pre),
            mp.register_module_forward_hook(self._post, always_call=True),
        ]
        patches.on_undo(self.end)
        keep_out_of_saves(patches)  # the roots' hooks: not in the script's torch.save(model)

    def watch(self, module: nn.Module) -> None:
        """Keep seeing ``module``'s calls once discovery ends, through hooks of its own."""
        if id(module) in self._watched:
            return
        self._watched.add(id(module))
        pre = module.register_forward_pre_hook(self._own_pre)
        post = module.register_forward_hook(self._own_post, always_call=True)
        self.patches.on_undo(pre.remove)
        self.patches.on_undo(post.remove)

    def end(self) -> None:
        """Stop discovering: the global hooks go, the watched roots keep theirs. A call open
        now ends through its root's own post-hook, if it has one."""
        for handle in self._global:
            handle.remove()
        self._global = []
        self.discovering = False

    # -- hooks ---------------------------------------------------------------------------------
    def _ours(self) -> bool:
        return threading.get_ident() == self._main and not self._is_compiling()

    def _pre(self, module: nn.Module, args: tuple[Any, ...]) -> Any:
        if not self._ours():
            return None
        if self._fetching:
            self._fetching += 1
            return None
        self._depth += 1
        return self.on_call(module, args) if self._depth == 1 else None

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        if not self._ours():
            return
        if self._fetching:
            self._fetching -= 1
            return
        self._depth = max(0, self._depth - 1)
        if self._depth == 0:
            self.on_return(module)

    def _own_pre(self, module: nn.Module, args: tuple[Any, ...]) -> Any:
        return None if self.discovering else self._pre(module, args)

    def _own_post(self, module: nn.Module, args: Any, output: Any) -> None:
        if not self.discovering:
            self._post(module, args, output)
