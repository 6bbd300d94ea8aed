"""Load a recipe: a built-in workload name, a Python file, or ``module:attr``.

A recipe defines ``model()``, ``dataset(split, seed)`` (or ``loaders(batch_size, **loader_kw)``
returning its own training DataLoader), ``loss(model, batch)``, ``batch_size`` and ``lr``;
optionally ``optimizer(params, lr)``, ``collate`` and ``count_samples(batch)`` (see
``torchpace.workloads.protocol``). A missing factory is an error naming it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REQUIRED = {
    "model": "a function returning the nn.Module to train",
    "dataset": "a function (split='train'|'val', seed=0) returning a torch Dataset, or "
    "loaders(batch_size, **loader_kw) returning the training DataLoader",
    "loss": "a function (model, batch) returning a scalar loss tensor",
    "batch_size": "an int, the batch size the recipe's lr is tuned for",
    "lr": "a float, the learning rate",
}


class RecipeError(ValueError):
    """A recipe that cannot be loaded or lacks a factory; the message names what to change."""


def load_recipe(spec: str) -> Any:
    """The recipe object for ``spec``: 'cnn', 'path/to/recipe.py' or 'package.module:attr'."""
    from torchpace.workloads import NAMES, load

    if spec in NAMES:
        recipe: Any = load(spec)
    elif spec.endswith(".py") or Path(spec).is_file():
        recipe = _from_file(Path(spec))
    elif ":" in spec or "." in spec:
        module_name, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise RecipeError(f"cannot import recipe module {module_name!r}: {e}") from None
        recipe = getattr(module, attr) if attr else module
    else:
        raise RecipeError(
            f"unknown recipe {spec!r}: give a built-in workload ({', '.join(NAMES)}), "
            "a path to a .py file, or module:attr"
        )
    check(recipe, spec)
    return recipe


def check(recipe: Any, spec: str) -> None:
    for name, what in REQUIRED.items():
        value = getattr(recipe, name, None)
        if name == "dataset" and value is None:
            value = getattr(recipe, "loaders", None)  # the alternative: the recipe's own loader
        if value is None:
            raise RecipeError(f"recipe {spec} has no `{name}`: define {what}")
        if name in ("batch_size",) and (isinstance(value, bool) or not isinstance(value, int)):
            raise RecipeError(f"recipe {spec}: `batch_size` must be an int, got {value!r}")
        if name == "lr" and not isinstance(value, (int, float)):
            raise RecipeError(f"recipe {spec}: `lr` must be a number, got {value!r}")
        if name not in ("batch_size", "lr") and not callable(value):
            raise RecipeError(f"recipe {spec}: `{name}` must be {what}")


def _from_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise RecipeError(f"recipe file {path} does not exist")
    name = f"torchpace_recipe_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RecipeError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling (loader workers) look modules up here
    spec.loader.exec_module(module)
    return module
