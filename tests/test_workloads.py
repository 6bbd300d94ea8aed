from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from torchpace.workloads import NAMES, cnn, lm, load, seqcls
from torchpace.workloads.images import read_cifar10, synthetic_images
from torchpace.workloads.text import TextWindows, split_corpus, stdlib_corpus


def _train(
    model: nn.Module,
    loader: DataLoader[Any],
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    steps: int,
    lr: float,
) -> list[float]:
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses: list[float] = []
    while len(losses) < steps:
        for batch in loader:
            loss = loss_fn(model, batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if len(losses) == steps:
                break
    return losses


def _tail(losses: list[float], n: int = 10) -> float:
    return sum(losses[-n:]) / n


# ---- recipe protocol -------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_recipe_protocol(name: str) -> None:
    r = load(name)
    for attr in ("model", "dataset", "loss", "optimizer", "count_samples", "count_tokens"):
        assert callable(getattr(r, attr)), f"{name} lacks {attr}()"
    assert isinstance(r.batch_size, int) and r.batch_size > 0
    assert isinstance(r.lr, float) and r.lr > 0


def test_unknown_workload_names_the_choices() -> None:
    with pytest.raises(ValueError, match="cnn, lm, seqcls"):
        load("mnist")


# ---- cnn ---------------------------------------------------------------------------------------


def test_cnn_shapes_and_batchnorm() -> None:
    model = cnn.model()
    x, y = next(iter(DataLoader(cnn.dataset("val"), batch_size=4)))
    assert x.shape == (4, 3, 32, 32) and x.dtype == torch.float32
    assert y.shape == (4,) and y.dtype == torch.int64
    assert model(x).shape == (4, 10)
    assert any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    # As written, every conv carries the bias that a following BatchNorm cancels.
    assert all(m.bias is not None for m in model.modules() if isinstance(m, nn.Conv2d))
    assert all(
        m.bias is None for m in cnn.model(conv_bias=False).modules() if isinstance(m, nn.Conv2d)
    )


def test_synthetic_images_are_deterministic() -> None:
    a, b, c = (
        synthetic_images(64, seed=3),
        synthetic_images(64, seed=3),
        synthetic_images(64, seed=4),
    )
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.images, c.images)
    assert set(a.labels.tolist()) <= set(range(10))


def test_cnn_loss_falls_well_below_chance() -> None:
    loader = DataLoader(synthetic_images(2048, seed=0), batch_size=32, shuffle=True)
    losses = _train(cnn.ResNet(width=8), loader, cnn.loss, steps=120, lr=3e-3)
    chance = math.log(10)
    assert losses[0] > 0.8 * chance
    assert _tail(losses) < 0.5 * chance, losses[-10:]


# ---- CIFAR-10 reader, on small files in the real formats ----------------------------------------


def _cifar_arrays(n: int, seed: int) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, 3072), dtype=np.uint8), rng.integers(0, 10, n).tolist()


def _write_python_format(root: Path) -> dict[str, tuple[np.ndarray, list[int]]]:
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True)
    made = {}
    for i, name in enumerate([*(f"data_batch_{k}" for k in range(1, 6)), "test_batch"]):
        data, labels = _cifar_arrays(6, seed=i)
        with (d / name).open("wb") as f:
            pickle.dump({b"batch_label": name.encode(), b"data": data, b"labels": labels}, f)
        made[name] = (data, labels)
    return made


def _write_binary_format(root: Path) -> dict[str, tuple[np.ndarray, list[int]]]:
    d = root / "cifar-10-batches-bin"
    d.mkdir(parents=True)
    made = {}
    for i, name in enumerate([*(f"data_batch_{k}" for k in range(1, 6)), "test_batch"]):
        data, labels = _cifar_arrays(5, seed=10 + i)
        rows = np.concatenate([np.array(labels, dtype=np.uint8)[:, None], data], axis=1)
        (d / f"{name}.bin").write_bytes(rows.tobytes())
        made[name] = (data, labels)
    return made


@pytest.mark.parametrize("writer", [_write_python_format, _write_binary_format])
def test_cifar_reader_round_trips(tmp_path: Path, writer: Callable[[Path], Any]) -> None:
    made = writer(tmp_path)
    train = read_cifar10(tmp_path, "train")
    test = read_cifar10(tmp_path, "test")
    per = len(made["test_batch"][1])
    assert len(train) == 5 * per and len(test) == per
    data, labels = made["data_batch_2"]
    idx = per  # first image of the second batch
    expected_hwc = torch.from_numpy(data[0].reshape(3, 32, 32).transpose(1, 2, 0).copy())
    assert torch.equal(train.images[idx], expected_hwc)
    assert int(train.labels[idx]) == labels[0]
    x, y = test[0]
    assert x.shape == (3, 32, 32) and y == made["test_batch"][1][0]


def test_cifar_reader_errors_name_what_to_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="data_batch_1"):
        read_cifar10(tmp_path)
    d = tmp_path / "cifar-10-batches-bin"
    d.mkdir()
    (d / "data_batch_1.bin").write_bytes(b"\x00" * 100)
    with pytest.raises(ValueError, match="3073-byte record"):
        read_cifar10(tmp_path)
    with pytest.raises(ValueError, match="split"):
        read_cifar10(tmp_path, "validation")


def test_cifar_python_reader_refuses_code(tmp_path: Path) -> None:
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()
    (d / "data_batch_1").write_bytes(pickle.dumps({b"data": Path("x")}))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        read_cifar10(tmp_path)


# ---- lm ----------------------------------------------------------------------------------------


def test_corpus_is_real_text_and_deterministic() -> None:
    data = stdlib_corpus(200_000)
    assert len(data) == 200_000 and data == stdlib_corpus(200_000)
    assert b"def " in data and b"import " in data
    train, val = split_corpus(data)
    assert len(train) == 180_000 and len(val) == 20_000


@pytest.mark.parametrize(("preset", "millions"), [("1m", 1), ("5m", 5), ("20m", 20)])
def test_lm_presets_have_their_size(preset: str, millions: int) -> None:
    n = sum(p.numel() for p in lm.model(preset).parameters())  # tied weights counted once
    assert 0.7 * millions * 1e6 < n < 1.3 * millions * 1e6, n


def test_lm_shapes_tied_and_causal() -> None:
    model = lm.GPT(lm.GPTConfig(n_layer=2, n_head=2, d_model=32, block=16)).eval()
    assert model.head.weight is model.tok.weight
    x = torch.randint(0, 256, (2, 16))
    out = model(x)
    assert out.shape == (2, 16, 256)
    y = x.clone()
    y[:, 10:] = (y[:, 10:] + 1) % 256  # change only the future
    assert torch.allclose(model(y)[:, :10], out[:, :10], atol=1e-5), "attention is not causal"


def test_lm_loss_falls_well_below_chance() -> None:
    train, _ = split_corpus(stdlib_corpus(400_000))
    loader = DataLoader(TextWindows(train, 64), batch_size=32, shuffle=True)
    torch.manual_seed(0)
    model = lm.GPT(lm.GPTConfig(n_layer=2, n_head=2, d_model=64, block=64))
    losses = _train(model, loader, lm.loss, steps=200, lr=3e-3)
    chance = math.log(256)
    assert _tail(losses) < 0.55 * chance, losses[-10:]


# ---- seqcls ------------------------------------------------------------------------------------


def test_seqcls_lengths_are_long_tailed_and_deterministic() -> None:
    ds, again = seqcls.Sequences(4096, seed=0), seqcls.Sequences(4096, seed=0)
    assert torch.equal(ds.tokens, again.tokens)
    lengths = ds.lengths.float()
    assert int(lengths.min()) >= 8 and int(lengths.max()) <= 1024
    assert lengths.median() < 40 and int(lengths.max()) > 512  # long tail
    tokens, label = ds[5]
    assert tokens.ndim == 1 and len(tokens) == int(ds.lengths[5]) and 0 <= label < 4
    assert int((ds.tokens == seqcls.PAD).sum()) == 0


def test_seqcls_padding_wastes_most_compute() -> None:
    loader = DataLoader(
        seqcls.dataset("val"), batch_size=seqcls.batch_size, collate_fn=seqcls.collate
    )
    real = padded = 0
    for tokens, lengths, _ in loader:
        real += int(lengths.sum())
        padded += tokens.numel()
    assert 1 - real / padded > 0.5


def test_seqcls_mask_ignores_padding() -> None:
    model = seqcls.SeqClassifier(d_model=16, n_layer=1, n_head=2).eval()
    t = torch.randint(1, seqcls.VOCAB, (1, 12))
    padded = torch.cat([t, torch.zeros(1, 20, dtype=torch.long)], dim=1)
    assert torch.allclose(model(t), model(padded), atol=1e-5)


def test_seqcls_loss_falls_well_below_chance() -> None:
    # Capped at 128 tokens to keep the test quick; the task and its signal are unchanged.
    data = seqcls.Sequences(2048, seed=0, max_len=128)
    loader = DataLoader(data, batch_size=32, shuffle=True, collate_fn=seqcls.collate)
    torch.manual_seed(0)
    model = seqcls.SeqClassifier(d_model=32, n_layer=1, n_head=2)
    losses = _train(model, loader, seqcls.loss, steps=150, lr=3e-3)
    assert _tail(losses) < 0.5 * math.log(4), losses[-10:]
