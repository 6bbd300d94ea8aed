"""Resolve the names a module imports to canonical dotted paths.

``import torch as T``, ``from torch import nn`` and ``from torch.utils.data import DataLoader as
DL`` all let a rule ask one question: does this call's function name
``torch.utils.data.DataLoader``?
The analysis is flow-insensitive: every import in the file counts, wherever it is. A top-level
``from module import *`` of a project file also brings in that module's own imports, for the
names this file does not bind itself (``lint.project.star_bindings``, one level).
"""

from __future__ import annotations

import ast

# Where torch defines a public name, mapped to the path the rules use for it.
_CANONICAL: dict[str, str] = {
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel": (
        "torch.nn.parallel.DistributedDataParallel"
    ),
    "torch.cuda.amp.autocast_mode.autocast": "torch.cuda.amp.autocast",
    "torch.cuda.amp.grad_scaler.GradScaler": "torch.cuda.amp.GradScaler",
    "torch.optim.adam.Adam": "torch.optim.Adam",
    "torch.autograd.anomaly_mode.set_detect_anomaly": "torch.autograd.set_detect_anomaly",
    "torch.autograd.anomaly_mode.detect_anomaly": "torch.autograd.detect_anomaly",
    "torch.nn.modules.container.Sequential": "torch.nn.Sequential",
    "torch.utils.data.distributed.DistributedSampler": "torch.utils.data.DistributedSampler",
    "torch.profiler.profiler.profile": "torch.profiler.profile",
}
for _dim in ("1d", "2d", "3d"):
    _CANONICAL[f"torch.nn.modules.conv.Conv{_dim}"] = f"torch.nn.Conv{_dim}"
    _CANONICAL[f"torch.nn.modules.conv.ConvTranspose{_dim}"] = f"torch.nn.ConvTranspose{_dim}"
    _CANONICAL[f"torch.nn.modules.batchnorm.BatchNorm{_dim}"] = f"torch.nn.BatchNorm{_dim}"
    _CANONICAL[f"torch.conv{_dim}"] = f"torch.nn.functional.conv{_dim}"  # the same function
for _module, _cls in (("adamw", "AdamW"), ("sgd", "SGD"), ("adagrad", "Adagrad")):
    _CANONICAL[f"torch.optim.{_module}.{_cls}"] = f"torch.optim.{_cls}"
_CANONICAL.update(
    {
        "torch.nn.modules.linear.Linear": "torch.nn.Linear",
        "torch.nn.modules.sparse.Embedding": "torch.nn.Embedding",
        "torch.autograd.gradcheck.gradcheck": "torch.autograd.gradcheck",
        "torch.autograd.gradcheck.gradgradcheck": "torch.autograd.gradgradcheck",
        "torch.distributed.distributed_c10d.init_process_group": (
            "torch.distributed.init_process_group"
        ),
        "torch.amp.autocast_mode.autocast": "torch.amp.autocast",
        "torch.amp.grad_scaler.GradScaler": "torch.amp.GradScaler",
    }
)


def canonical(dotted: str) -> str:
    """The path the rules use for ``dotted`` (itself when it has no other spelling). The torch
    package is also its own attribute: ``torch.torch.rand`` is ``torch.rand`` (flow_matching's
    training loop writes it so)."""
    while dotted.startswith("torch.torch."):
        dotted = dotted[len("torch.") :]
    return _CANONICAL.get(dotted, dotted)


class Resolver:
    """Maps the local names bound by a module's imports to the dotted paths they stand for."""

    def __init__(self, bindings: dict[str, str], relative: dict[str, str] | None = None) -> None:
        self.bindings = bindings
        # Names bound by relative imports, to the path written with its leading dots
        # (``from .solver import Solver`` → ``.solver.Solver``): kept apart from ``bindings``,
        # whose rules read an unbound name as one of the file's own.
        self.relative = relative or {}

    @classmethod
    def from_nodes(cls, nodes: list[ast.AST]) -> Resolver:
        bindings: dict[str, str] = {}
        relative: dict[str, str] = {}
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        bindings[alias.asname] = alias.name
                    else:
                        # ``import torch.utils.data`` binds ``torch`` to the top package.
                        top = alias.name.split(".")[0]
                        bindings[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if alias.name != "*":
                        bindings[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                package = "." * node.level + (f"{node.module}." if node.module else "")
                for alias in node.names:
                    if alias.name != "*":
                        relative[alias.asname or alias.name] = package + alias.name
        return cls(bindings, relative)

    def dotted(self, node: ast.expr) -> str | None:
        """The raw dotted path of a name or attribute chain, or None if it is not imported."""
        if isinstance(node, ast.Name):
            return self.bindings.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def import_path(self, node: ast.expr) -> str | None:
        """:meth:`dotted`, or for a name a relative import binds, its path with the leading
        dots (``.solver.Solver``, ``..utils.EMA``): where to look for what a call runs."""
        if isinstance(node, ast.Name):
            return self.bindings.get(node.id) or self.relative.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.import_path(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def qualname(self, node: ast.expr) -> str | None:
        """The canonical dotted path of ``node`` (e.g. ``torch.utils.data.DataLoader``), or None."""
        raw = self.dotted(node)
        return None if raw is None else canonical(raw)
