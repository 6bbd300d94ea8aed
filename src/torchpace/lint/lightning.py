"""Lightning's ``Trainer`` as the rules read it: which calls build one, whether it runs on a GPU,
and the loaders its ``fit`` iterates once per epoch."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchpace.lint.loops import dotted, method_calls
from torchpace.lint.rule import FileContext, argument, is_const, keyword

LIGHTNING_TRAINERS = frozenset(
    {"lightning.Trainer", "lightning.pytorch.Trainer", "pytorch_lightning.Trainer"}
)
_GPU = frozenset({"gpu", "cuda"})
# A test that picks the GPU where there is one: ``"gpu" if str(device).startswith("cuda") else
# "cpu"`` (the UvA notebooks), ``1 if torch.cuda.is_available() else 0``, as lint reads
# ``device = "cuda" if torch.cuda.is_available() else "cpu"``. Not an option (``if args.gpu``),
# which a run may leave off.
_WHERE_AVAILABLE = ("cuda", "is_available", "device_count")


def lightning_gpu(given: dict[str | None, ast.expr]) -> bool:
    """The Trainer's keywords put it on a GPU: ``accelerator="gpu"``, ``gpus=1`` (Lightning
    1.x), or either chosen where a GPU is available."""

    def gpu_accelerator(value: ast.expr) -> bool:
        return isinstance(value, ast.Constant) and value.value in _GPU

    def some_gpus(value: ast.expr) -> bool:
        return isinstance(value, ast.Constant) and value.value not in (None, 0, False, "", "0")

    for key, test in (("accelerator", gpu_accelerator), ("gpus", some_gpus)):
        value = given.get(key)
        if isinstance(value, ast.IfExp) and any(
            word in ast.unparse(value.test) for word in _WHERE_AVAILABLE
        ):
            value = value.body
        if value is not None and test(value):
            return True
    return False


def fitted_loaders(ctx: FileContext) -> Iterator[ast.Call]:
    """The DataLoaders a Lightning Trainer's ``fit`` is handed to train on
    (``trainer.fit(model, train_loader, val_loader)``, ``train_dataloaders=``): the Trainer
    iterates them once per epoch. Not where the trainer runs one epoch (``max_epochs=1``);
    without ``max_epochs`` Lightning runs up to 1,000."""
    if b"lightning" not in ctx.source:
        return
    for trainer, name in ctx.calls:
        epochs = keyword(trainer, "max_epochs")
        if name not in LIGHTNING_TRAINERS or (epochs is not None and is_const(epochs.value, 1)):
            continue
        for fit in method_calls(ctx, trainer, "fit"):
            given = argument(fit, "train_dataloaders", 1) or argument(fit, "train_dataloader", 1)
            loader = dotted(given) if given is not None else None
            if loader is not None:
                yield from ctx.loops.loader_calls.get(loader, [])
