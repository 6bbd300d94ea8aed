"""``seqcls``: classify variable-length token sequences whose lengths are long-tailed (8 to 1024).

Padding each batch to its longest sequence wastes most of the compute here: this is the workload
for length bucketing, token-budget batches and pre-allocation.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

batch_size = 16
lr = 1e-3
VOCAB = 128
PAD = 0
NUM_CLASSES = 4
MIN_LEN, MAX_LEN = 8, 1024
# Pareto tail exponent: median length ≈ 17 tokens, ~2% of sequences longer than 512, so a batch
# of 32 padded to its maximum is mostly padding.
TAIL_ALPHA = 0.9
MARKERS_PER_CLASS = 8
MARKER_PROB = 0.3  # share of a sequence's tokens drawn from its class's marker tokens
TRAIN_SIZE = 8192
VAL_SIZE = 1024


def sample_lengths(n: int, gen: torch.Generator, max_len: int = MAX_LEN) -> torch.Tensor:
    u = torch.rand(n, generator=gen, dtype=torch.float64).clamp_min(1e-12)
    lengths = (MIN_LEN * u.pow(-1.0 / TAIL_ALPHA)).floor().long()
    return lengths.clamp(MIN_LEN, max_len)


class Sequences(Dataset[tuple[torch.Tensor, int]]):
    """Sequences stored flat with offsets; item ``i`` is ``(tokens[L_i], label)``."""

    def __init__(self, n: int, *, seed: int, max_len: int = MAX_LEN) -> None:
        if n <= 0:
            raise ValueError(f"n must be positive, got {n}")
        if not MIN_LEN <= max_len <= MAX_LEN:
            raise ValueError(f"max_len must be in [{MIN_LEN}, {MAX_LEN}], got {max_len}")
        gen = torch.Generator().manual_seed(seed)
        self.lengths = sample_lengths(n, gen, max_len)
        self.labels = torch.randint(0, NUM_CLASSES, (n,), generator=gen)
        total = int(self.lengths.sum())
        owner = torch.repeat_interleave(self.labels, self.lengths)
        # Markers: class c owns tokens 1 + c*8 .. 1 + c*8 + 7; the rest of the vocabulary is noise.
        marker = (
            1
            + owner * MARKERS_PER_CLASS
            + torch.randint(0, MARKERS_PER_CLASS, (total,), generator=gen)
        )
        noise = torch.randint(1, VOCAB, (total,), generator=gen)
        use_marker = torch.rand(total, generator=gen) < MARKER_PROB
        self.tokens = torch.where(use_marker, marker, noise)
        self.offsets = torch.zeros(n + 1, dtype=torch.long)
        self.offsets[1:] = torch.cumsum(self.lengths, 0)

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        return self.tokens[start:end], int(self.labels[index])


def collate(
    items: list[tuple[torch.Tensor, int]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad to the longest sequence in the batch: ``(tokens[B, Lmax], lengths[B], labels[B])``."""
    lengths = torch.tensor([len(t) for t, _ in items], dtype=torch.long)
    tokens = torch.full((len(items), int(lengths.max())), PAD, dtype=torch.long)
    for i, (t, _) in enumerate(items):
        tokens[i, : len(t)] = t
    labels = torch.tensor([y for _, y in items], dtype=torch.long)
    return tokens, lengths, labels


class SeqClassifier(nn.Module):
    """Token + position embeddings, a small pre-norm transformer encoder, masked mean pooling."""

    def __init__(self, d_model: int = 64, n_layer: int = 2, n_head: int = 4) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d_model, padding_idx=PAD)
        self.pos = nn.Embedding(MAX_LEN, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model,
            n_head,
            dim_feedforward=4 * d_model,
            dropout=0.0,
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, NUM_CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pad = tokens == PAD
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        h = self.encoder(self.tok(tokens) + self.pos(pos), src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(h.dtype)
        pooled = (h * keep).sum(1) / keep.sum(1).clamp_min(1.0)
        logits: torch.Tensor = self.head(pooled)
        return logits


def model() -> SeqClassifier:
    return SeqClassifier()


def dataset(split: str = "train", seed: int = 0) -> Sequences:
    if split == "train":
        return Sequences(TRAIN_SIZE, seed=seed)
    if split == "val":
        return Sequences(VAL_SIZE, seed=seed + 1_000_003)
    raise ValueError(f"split must be 'train' or 'val', got {split!r}")


def loss(model: nn.Module, batch: Any) -> torch.Tensor:
    tokens, _lengths, labels = batch
    return F.cross_entropy(model(tokens), labels)


def optimizer(params: Any, lr: float) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=lr)


def count_samples(batch: Any) -> int:
    return int(batch[0].shape[0])


def count_tokens(batch: Any) -> int:
    """Real (unpadded) tokens in the batch."""
    return int(batch[1].sum())
