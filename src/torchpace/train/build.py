"""Build a recipe into the objects a run trains: ``build(recipe, seed)`` returns the model, its
optimizer and a seeded, shuffled training loader, before any plan is applied.

``torchpace fit`` and the tune worker build the same way, so a plan tuned in a trial trains the
same batches from the same seed in ``fit``.
"""

from __future__ import annotations

import random
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from torchpace.recipes import RecipeError


def build(recipe: Any, seed: int) -> tuple[nn.Module, torch.optim.Optimizer, DataLoader[Any]]:
    """``(model, optimizer, loader)`` of ``recipe``: the model built after seeding with ``seed``,
    the recipe's ``optimizer(params, lr)`` (AdamW when it has none) and a loader of
    ``recipe.batch_size`` over its train split, shuffled by a generator seeded with ``seed`` —
    or, for a recipe with ``loaders(batch_size, **loader_kw)`` and no ``dataset``, the loader it
    returns, given ``generator=`` seeded with ``seed``."""
    random.seed(seed)  # a recipe's own Python-level randomness (augmentations, synthetic data)
    torch.manual_seed(seed)
    model = _expect(recipe.model(), nn.Module, "model()", "a torch.nn.Module")
    factory = getattr(recipe, "optimizer", None)
    optimizer = _expect(
        factory(model.parameters(), recipe.lr)
        if factory
        else torch.optim.AdamW(model.parameters(), lr=recipe.lr),
        torch.optim.Optimizer,
        "optimizer(params, lr)",
        "a torch.optim.Optimizer",
    )
    own = getattr(recipe, "loaders", None)
    if getattr(recipe, "dataset", None) is None and own is not None:
        # The recipe builds its loader; we pass the seeded generator so its shuffle repeats.
        got = own(recipe.batch_size, generator=torch.Generator().manual_seed(seed))
        loader = got[0] if isinstance(got, tuple) else got  # (train, val) or train
        what = "a torch DataLoader (or a (train, val) pair)"
        return model, optimizer, _expect(loader, DataLoader, "loaders(batch_size, ...)", what)
    loader = training_loader(recipe, seed)
    return model, optimizer, loader


def training_loader(recipe: Any, seed: int) -> DataLoader[Any]:
    """The recipe's train split in batches of ``recipe.batch_size``, full batches only,
    shuffled by a generator seeded with ``seed``."""
    train = _expect(
        recipe.dataset("train", seed=seed), Dataset, "dataset('train', seed)", "a torch Dataset"
    )
    # No workers here: prepare() applies the plan's loader settings (TP101 is the plan's job).
    return DataLoader(  # noqa: TP101
        train,
        batch_size=recipe.batch_size,
        shuffle=True,
        drop_last=True,
        collate_fn=getattr(recipe, "collate", None),
        generator=torch.Generator().manual_seed(seed),
    )


def _expect(value: Any, kind: type, factory: str, what: str) -> Any:
    """``value`` if it is a ``kind``; otherwise a RecipeError naming the factory."""
    if not isinstance(value, kind):
        raise RecipeError(
            f"the recipe's {factory} returned {type(value).__name__}; expected {what}"
        )
    return value
