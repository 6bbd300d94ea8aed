"""TP1xx: input loading."""

from __future__ import annotations

from collections.abc import Iterator

from torchpace.lint.rule import FileContext, Report, Rule, argument, has_star_args, is_const

_DATALOADER = "torch.utils.data.DataLoader"
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, ...)
_NUM_WORKERS_POSITION = 5


def _check_loader_workers(ctx: FileContext) -> Iterator[Report]:
    for call, name in ctx.calls:
        if name != _DATALOADER:
            continue
        workers = argument(call, "num_workers", _NUM_WORKERS_POSITION)
        if workers is None:
            # **kwargs or *args may set num_workers: stay silent when we cannot tell.
            if not has_star_args(call):
                yield Report(call)
        elif is_const(workers, 0):
            yield Report(workers)


DATALOADER_WITHOUT_WORKERS = Rule(
    code="TP101",
    name="dataloader-without-workers",
    message="DataLoader loads every batch in the training process (no `num_workers`)",
    technique="loader-workers",
    doc="""\
## What it does
Flags a `torch.utils.data.DataLoader` created without `num_workers`, or with `num_workers=0`.
Calls that pass `*args` or `**kwargs` are not flagged: they may set it.

## Why is this slow
With `num_workers=0` the training process reads, decodes and collates each batch itself, and the
device waits meanwhile. Worker processes prepare the next batches while the current step runs.

## Example
```python
loader = DataLoader(train_set, batch_size=64, shuffle=True)
```

## Use instead
```python
loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4)
```
Four is a starting point; measure the loader wait (`torchpace doctor`) and adjust.

## Fix safety
No fix: the right worker count depends on the machine and the dataset, and workers copy the
dataset object into each process.

## References
PyTorch Performance Tuning Guide, "Enable async data loading and augmentation".
""",
    check=_check_loader_workers,
)

RULES = (DATALOADER_WITHOUT_WORKERS,)
