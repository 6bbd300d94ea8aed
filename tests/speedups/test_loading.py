from __future__ import annotations

import time
from collections import OrderedDict, defaultdict
from dataclasses import asdict
from typing import Any, NamedTuple

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, TensorDataset

from conftest import requires_cuda
from torchpace.speedups import SpeedupWarning, loading
from torchpace.speedups.loading import (
    DevicePrefetcher,
    LoaderSettings,
    loader_settings,
    to_device,
    tuned_loader,
)
from torchpace.workloads import seqcls

CUDA = torch.device("cuda")  # constructing a device object needs no GPU


def same(a: Any, b: Any) -> bool:
    """Equal structure, container types and tensor values (dtype included)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def numbers(n: int = 23) -> TensorDataset:
    return TensorDataset(torch.arange(n), torch.arange(n) * 10)


# ------------------------------------------------------------------------- loader_settings


def test_cpu_defaults_to_no_workers_and_no_pinning() -> None:
    for cores in (1, 2, 64):
        assert loader_settings("cpu", cores=cores) == LoaderSettings(
            num_workers=0, pin_memory=False, persistent_workers=False, prefetch_factor=None
        )


def test_cuda_takes_up_to_four_workers_and_leaves_a_core_to_the_main_process() -> None:
    assert loader_settings(CUDA, cores=16) == LoaderSettings(4, True, True, 2)
    assert loader_settings(CUDA, cores=5) == LoaderSettings(4, True, True, 2)
    assert loader_settings(CUDA, cores=3) == LoaderSettings(2, True, True, 2)
    assert loader_settings("cuda:1", cores=2) == LoaderSettings(1, True, True, 2)


def test_cuda_with_one_core_loads_in_the_main_process_but_still_pins() -> None:
    assert loader_settings(CUDA, cores=1) == LoaderSettings(0, True, False, None)


def test_cores_default_to_the_usable_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "usable_cores", lambda: 3)
    assert loader_settings(CUDA).num_workers == 2


def test_explicit_workers_override_the_device_default() -> None:
    assert loader_settings("cpu", workers=2) == LoaderSettings(2, False, True, 2)
    assert loader_settings(CUDA, cores=16, workers=0) == LoaderSettings(0, True, False, None)
    assert loader_settings(CUDA, cores=1, workers=6).num_workers == 6


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"cores": 0}, "cores"),
        ({"workers": -1}, "workers"),
    ],
)
def test_loader_settings_rejects_bad_arguments(kwargs: dict[str, int], names: str) -> None:
    with pytest.raises(ValueError, match=names):
        loader_settings("cpu", **kwargs)


def test_loader_settings_rejects_other_devices() -> None:
    with pytest.raises(ValueError, match="device must be one of"):
        loader_settings("meta")


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"num_workers": -1}, "num_workers"),
        ({"num_workers": 0, "prefetch_factor": 2}, "prefetch_factor=None"),
        ({"num_workers": 0, "persistent_workers": True}, "persistent_workers=False"),
    ],
)
def test_settings_reject_what_dataloader_rejects(kwargs: dict[str, Any], names: str) -> None:
    with pytest.raises(ValueError, match=names):
        LoaderSettings(**kwargs)
    with pytest.raises(ValueError):  # DataLoader agrees these are invalid
        DataLoader(numbers(), **{"num_workers": 0, **kwargs})


def test_settings_reject_a_prefetch_factor_of_zero() -> None:
    with pytest.raises(ValueError, match="prefetch_factor must be >= 1"):
        LoaderSettings(num_workers=2, prefetch_factor=0)  # DataLoader would queue no batches


def test_settings_are_dataloader_keywords() -> None:
    s = LoaderSettings(2, True, True, 3)
    assert asdict(s) == {
        "num_workers": 2,
        "pin_memory": True,
        "persistent_workers": True,
        "prefetch_factor": 3,
    }


# ---------------------------------------------------------------------------- tuned_loader


@pytest.mark.parametrize("settings", [LoaderSettings(), LoaderSettings(1, False, False, 2)])
def test_rebuilt_shuffled_loader_yields_the_same_batches_in_order(settings: LoaderSettings) -> None:
    gen = torch.Generator()
    loader = DataLoader(numbers(), batch_size=5, shuffle=True, drop_last=True, generator=gen)
    tuned = tuned_loader(loader, device="cpu", settings=settings)
    assert tuned.num_workers == settings.num_workers
    for seed in (0, 1):
        gen.manual_seed(seed)
        expected = [list(loader) for _epoch in range(2)]
        gen.manual_seed(seed)
        assert same([list(tuned) for _epoch in range(2)], expected)
    assert len(expected[0]) == 4  # 23 // 5: drop_last kept
    assert not same(expected[0][0], next(iter(DataLoader(numbers(), batch_size=5))))  # shuffled


def test_persistent_workers_keep_the_first_epoch_and_draw_later_shuffles_differently() -> None:
    # Documented in tuned_loader: DataLoader draws the persistent workers' base seed only once.
    gen = torch.Generator()
    loader = DataLoader(numbers(), batch_size=5, shuffle=True, generator=gen)
    tuned = tuned_loader(loader, device="cpu", settings=loader_settings("cpu", workers=1))
    assert tuned.persistent_workers
    gen.manual_seed(0)
    expected = [list(loader) for _epoch in range(2)]
    gen.manual_seed(0)
    got = [list(tuned) for _epoch in range(2)]
    assert same(got[0], expected[0])
    assert not same(got[1], expected[1])


def test_rebuilt_loader_follows_the_global_seed_when_it_has_no_generator() -> None:
    loader = DataLoader(numbers(), batch_size=4, shuffle=True)
    tuned = tuned_loader(loader, device="cpu")
    torch.manual_seed(7)
    expected = list(loader)
    torch.manual_seed(7)
    assert same(list(tuned), expected)


def test_rebuilt_loader_keeps_a_custom_batch_sampler() -> None:
    batches = [[3, 1], [0, 4, 2], [22], [5, 6, 7, 8]]
    loader = DataLoader(numbers(), batch_sampler=batches)
    tuned = tuned_loader(loader, device="cpu", settings=LoaderSettings(num_workers=1))
    assert tuned.batch_sampler is batches
    got = list(tuned)
    assert same(got, list(loader))
    assert [b[0].tolist() for b in got] == batches


def test_rebuilt_loader_keeps_collate_fn_on_variable_length_sequences() -> None:
    data = seqcls.Sequences(48, seed=0)
    gen = torch.Generator().manual_seed(3)
    loader = DataLoader(data, batch_size=8, shuffle=True, collate_fn=seqcls.collate, generator=gen)
    tuned = tuned_loader(loader, device="cpu")
    assert tuned.collate_fn is seqcls.collate
    gen.manual_seed(3)
    expected = list(loader)
    gen.manual_seed(3)
    got = list(tuned)
    assert same(got, expected)
    assert len({b[0].shape[1] for b in got}) > 1  # padded per batch: the collate really ran


def test_rebuilt_loader_without_batching_keeps_its_sampler() -> None:
    loader = DataLoader(numbers(6), batch_size=None, sampler=[5, 0, 3])
    tuned = tuned_loader(loader, device="cpu")
    assert tuned.batch_size is None
    assert same(list(tuned), list(loader))
    assert [int(x) for x, _ in tuned] == [5, 0, 3]


def test_rebuilt_loader_keeps_loader_options_and_accepts_harmless_overrides() -> None:
    def init(worker_id: int) -> None:
        pass

    loader = DataLoader(
        numbers(),
        batch_size=4,
        num_workers=1,
        worker_init_fn=init,
        multiprocessing_context="fork",
        timeout=60,
    )
    kept_settings = LoaderSettings(1, False, False, 2)
    kept = tuned_loader(loader, device="cpu", settings=kept_settings)
    assert kept.worker_init_fn is init
    assert kept.multiprocessing_context is loader.multiprocessing_context
    assert kept.timeout == 60
    assert tuned_loader(loader, device="cpu", settings=kept_settings, timeout=5).timeout == 5
    # With no workers DataLoader refuses a timeout and a multiprocessing context: both dropped.
    plain = tuned_loader(loader, device="cpu")
    assert plain.num_workers == 0 and plain.multiprocessing_context is None
    assert plain.timeout == 0
    assert same(list(plain), list(loader))


class Stream(IterableDataset[int]):
    def __iter__(self) -> Any:
        return iter(range(10))


def test_iterable_dataset_keeps_its_batching_but_not_a_new_worker_count() -> None:
    loader = DataLoader(Stream(), batch_size=3, drop_last=True)
    tuned = tuned_loader(loader, device="cpu")
    assert [b.tolist() for b in tuned] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    with pytest.raises(ValueError, match="num_workers cannot change"):
        tuned_loader(loader, device="cpu", settings=LoaderSettings(num_workers=2))


def test_dataset_gets_the_dataloader_keywords_and_the_settings() -> None:
    tuned = tuned_loader(numbers(), device="cpu", batch_size=4, drop_last=True)
    assert (tuned.batch_size, tuned.drop_last, tuned.num_workers) == (4, True, 0)
    assert len(tuned) == 5
    assert tuned_loader(numbers(), device="cpu", settings=LoaderSettings(1)).num_workers == 1


def test_tuned_loader_errors_name_what_to_change() -> None:
    loader = DataLoader(numbers(), batch_size=4)
    with pytest.raises(ValueError, match="num_workers is set by settings="):
        tuned_loader(numbers(), device="cpu", num_workers=2)
    with pytest.raises(ValueError, match="pin_memory is set by settings="):
        tuned_loader(loader, device="cpu", pin_memory=True)
    with pytest.raises(ValueError, match="batch_size cannot be changed"):
        tuned_loader(loader, device="cpu", batch_size=8)
    with pytest.raises(ValueError, match="shuffle cannot be changed"):
        tuned_loader(loader, device="cpu", shuffle=True)
    with pytest.raises(ValueError, match="timeout=5 needs num_workers > 0"):
        tuned_loader(loader, device="cpu", timeout=5)
    with pytest.raises(ValueError, match="device must be one of"):
        tuned_loader(loader, device="meta")
    with pytest.raises(TypeError, match="got list"):
        tuned_loader([1, 2, 3], device="cpu")  # type: ignore[arg-type]


def test_pinning_for_a_cpu_device_warns() -> None:
    with pytest.warns(SpeedupWarning, match="pin_memory=True only speeds copies to a GPU"):
        tuned_loader(numbers(), device="cpu", settings=LoaderSettings(pin_memory=True))


# ------------------------------------------------------------------------------- to_device


class Pair(NamedTuple):
    x: torch.Tensor
    y: Any


def test_to_device_moves_every_tensor_and_keeps_containers() -> None:
    d: defaultdict[str, Any] = defaultdict(list, a=torch.ones(2))
    batch = {
        "pair": Pair(torch.zeros(3), [torch.ones(1, dtype=torch.int64), 7, "s"]),
        "ordered": OrderedDict(b=torch.ones(1), a=(torch.zeros(2), None)),
        "default": d,
        "n": 3,
    }
    moved = to_device(batch, "meta")  # a real device change that needs no GPU
    assert type(moved["pair"]) is Pair and moved["pair"].x.device.type == "meta"
    assert type(moved["pair"].y) is list and moved["pair"].y[0].device.type == "meta"
    assert moved["pair"].y[0].dtype == torch.int64 and moved["pair"].y[1:] == [7, "s"]
    assert type(moved["ordered"]) is OrderedDict and list(moved["ordered"]) == ["b", "a"]
    assert moved["ordered"]["a"][1] is None and moved["ordered"]["a"][0].is_meta
    assert type(moved["default"]) is defaultdict and moved["default"].default_factory is list
    assert moved["default"]["a"].is_meta and moved["n"] == 3
    assert batch["pair"].x.device.type == "cpu"  # the input is left alone


def test_to_device_on_the_same_device_returns_the_same_tensors() -> None:
    x, y = torch.randn(2, 3, 4, 5), torch.arange(3)
    moved = to_device((x, [y]), "cpu")
    assert moved[0] is x and moved[1][0] is y


def test_channels_last_only_for_floating_4d_tensors() -> None:
    images = torch.randn(2, 3, 4, 5)
    labels = torch.randint(0, 3, (2, 1, 4, 5))  # an integer label map stays as it is
    seq = torch.randn(2, 3, 4)
    moved = to_device((images, labels, seq), "cpu", channels_last=True)
    assert moved[0].is_contiguous(memory_format=torch.channels_last)
    assert not moved[0].is_contiguous() and torch.equal(moved[0], images)
    assert moved[1] is labels and moved[2] is seq


# ------------------------------------------------------------------------ DevicePrefetcher


def stored_batches(n: int = 5) -> tuple[list[Any], DataLoader[Any]]:
    batches = [(torch.randn(2, 3, 4, 4), torch.full((2,), i)) for i in range(n)]
    # batch_size=None with this collate hands out the stored objects themselves.
    return batches, DataLoader(range(n), batch_size=None, collate_fn=batches.__getitem__)


def test_cpu_prefetcher_passes_the_loader_batches_through() -> None:
    batches, loader = stored_batches()
    p = DevicePrefetcher(loader, "cpu")
    assert p.stream is None and len(p) == 5
    for _ in range(2):  # every pass starts from the beginning
        got = list(p)
        assert len(got) == 5 and all(g is b for g, b in zip(got, batches, strict=True))
    it = iter(p)
    next(it)
    assert next(iter(p)) is batches[0]


def test_cpu_prefetcher_converts_images_to_channels_last() -> None:
    batches, loader = stored_batches(3)
    got = list(DevicePrefetcher(loader, "cpu", channels_last=True))
    for (x, y), (bx, by) in zip(got, batches, strict=True):
        assert x.is_contiguous(memory_format=torch.channels_last) and torch.equal(x, bx)
        assert y is by


def test_prefetcher_exposes_the_loader_parts_and_sets_the_epoch() -> None:
    data = numbers(16)
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=4, sampler=sampler)
    p = DevicePrefetcher(loader, "cpu")
    assert p.dataset is data and p.sampler is sampler and p.batch_sampler is loader.batch_sampler
    first = [b[0].tolist() for b in p]
    p.set_epoch(3)
    assert sampler.epoch == 3
    again = [b[0].tolist() for b in p]
    assert again != first
    assert [i for b in again for i in b] == list(sampler)  # the epoch-3 order, batched


def test_set_epoch_reaches_a_custom_batch_sampler_and_fails_loudly_without_one() -> None:
    class EpochBatches:
        def __init__(self) -> None:
            self.epochs: list[int] = []

        def __iter__(self) -> Any:
            return iter([[0, 1], [2]])

        def __len__(self) -> int:
            return 2

        def set_epoch(self, epoch: int) -> None:
            self.epochs.append(epoch)

    batches = EpochBatches()
    DevicePrefetcher(DataLoader(numbers(), batch_sampler=batches), "cpu").set_epoch(2)
    assert batches.epochs == [2]
    with pytest.raises(AttributeError, match="set_epoch"):
        DevicePrefetcher(DataLoader(numbers()), "cpu").set_epoch(1)


def test_prefetcher_rejects_devices_it_cannot_serve() -> None:
    with pytest.raises(ValueError, match="device must be one of"):
        DevicePrefetcher(DataLoader(numbers()), "meta")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="is_available"):
            DevicePrefetcher(DataLoader(numbers()), "cuda")


# ----------------------------------------------------------------------------------- CUDA


@requires_cuda
@pytest.mark.parametrize("pin_memory", [False, True])
def test_cuda_batches_equal_the_host_batches(pin_memory: bool) -> None:
    data = TensorDataset(torch.randn(24, 3, 8, 8), torch.randint(0, 5, (24, 1, 8, 8)))
    loader = DataLoader(data, batch_size=8, pin_memory=pin_memory)
    p = DevicePrefetcher(loader, "cuda", channels_last=True)
    assert p.device.index is not None and len(p) == 3
    for _ in range(2):
        got = list(p)
        assert len(got) == 3
        for (x, y), (hx, hy) in zip(got, loader, strict=True):
            assert x.is_cuda and y.is_cuda and y.dtype == torch.int64
            assert x.is_contiguous(memory_format=torch.channels_last)
            assert y.is_contiguous()  # integer 4-D: no channels_last
            assert torch.equal(x.cpu(), hx) and torch.equal(y.cpu(), hy)


@requires_cuda
def test_cuda_copy_runs_on_the_side_stream_and_the_step_waits_for_it() -> None:
    batches = [torch.full((1024,), float(i)).pin_memory() for i in range(3)]
    p = DevicePrefetcher(DataLoader(batches, batch_size=None), "cuda")
    compute = torch.cuda.current_stream()
    assert p.stream is not None and p.stream != compute
    torch.cuda.synchronize()
    with torch.cuda.stream(p.stream):
        torch.cuda._sleep(1_000_000_000)  # ~0.5 s: only the side stream is busy
    first = next(iter(p))
    time.sleep(0.05)  # a copy queued on the compute stream would have landed by now
    # The copy waits behind the sleep on the side stream, and the compute stream waits for it.
    assert not p.stream.query()
    assert not compute.query()
    assert torch.equal(first.cpu(), batches[0])  # .cpu() waits for the compute stream


@requires_cuda
def test_cuda_batch_memory_is_not_reused_while_the_compute_stream_reads_it() -> None:
    n = 40
    batches = [torch.full((1 << 20,), float(i)) for i in range(n)]  # 4 MiB each, same size
    p = DevicePrefetcher(DataLoader(batches, batch_size=None), "cuda")
    checks = []
    for i, x in enumerate(p):
        # Keep the compute stream behind the host, so the block of x is freed (on the host)
        # while its kernels are still queued; the side stream's next copies must not land in it.
        torch.cuda._sleep(20_000_000)  # ~10 ms per step
        x.add_(1)
        checks.append(x.eq(i + 1).all())  # no host sync inside the loop
        del x
    torch.cuda.synchronize()
    assert [bool(c) for c in checks] == [True] * n
