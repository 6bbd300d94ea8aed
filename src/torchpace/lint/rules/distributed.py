"""TP5xx: many devices."""

from __future__ import annotations

from collections.abc import Iterator

from torchpace.lint.rule import FileContext, Report, Rule, is_const, keyword


def _check_data_parallel(ctx: FileContext) -> Iterator[Report]:
    for call, name in ctx.calls:
        if name == "torch.nn.DataParallel":
            yield Report(call.func)


DATA_PARALLEL = Rule(
    code="TP501",
    name="data-parallel",
    message="`nn.DataParallel` runs one process for all GPUs; use DistributedDataParallel",
    technique="ddp-not-dp",
    doc="""\
## What it does
Flags `torch.nn.DataParallel(...)`.

## Why is this slow
DataParallel drives every GPU from one Python process: it copies the model to each device on
every forward, gathers outputs on the first GPU and is held back by the GIL. DistributedDataParallel
runs one process per GPU and overlaps the gradient all-reduce with the backward pass.

## Example
```python
model = nn.DataParallel(model)
```

## Use instead
```python
# launched with: torchrun --nproc-per-node=N train.py
torch.distributed.init_process_group("nccl")
model = nn.parallel.DistributedDataParallel(model.to(local_rank), device_ids=[local_rank])
```

## Fix safety
No fix: moving to DistributedDataParallel changes how the script is launched and needs a
sampler per process.

## References
PyTorch Performance Tuning Guide, "Use efficient data-parallel backend".
""",
    check=_check_data_parallel,
)


def _check_find_unused(ctx: FileContext) -> Iterator[Report]:
    for call, name in ctx.calls:
        if name == "torch.nn.parallel.DistributedDataParallel":
            kw = keyword(call, "find_unused_parameters")
            if kw is not None and is_const(kw.value, True):
                yield Report(kw)


FIND_UNUSED_PARAMETERS = Rule(
    code="TP503",
    name="ddp-find-unused-parameters",
    message="`find_unused_parameters=True` walks the autograd graph after every forward",
    technique="ddp-unused-params",
    doc="""\
## What it does
Flags `DistributedDataParallel(..., find_unused_parameters=True)`.

## Why is this slow
DDP then traverses the autograd graph after each forward to mark the parameters that will get no
gradient, and buckets follow constructor order instead of the order gradients arrive, which
reduces the overlap of all-reduce with backward.

## Example
```python
model = DistributedDataParallel(model, device_ids=[rank], find_unused_parameters=True)
```

## Use instead
```python
model = DistributedDataParallel(model, device_ids=[rank])
```
Keep it only when some parameters really get no gradient in a step; DDP raises an error that
says so when they do.

## Fix safety
No fix: a model with parameters unused in some steps needs the setting.

## References
PyTorch Performance Tuning Guide, "Match the order of layers in constructors and during the
execution if using DistributedDataParallel(find_unused_parameters=True)".
""",
    check=_check_find_unused,
)

RULES = (DATA_PARALLEL, FIND_UNUSED_PARAMETERS)
