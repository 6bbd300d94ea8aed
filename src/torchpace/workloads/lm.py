"""``lm``: a GPT-style decoder-only transformer (causal attention, tied embeddings), byte-level,
trained on the Python standard library's own sources."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from torchpace.workloads.text import VOCAB_SIZE, TextWindows, split_corpus, stdlib_corpus

batch_size = 32
lr = 1e-3


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int
    n_head: int
    d_model: int
    block: int
    vocab: int = VOCAB_SIZE


# Names give the approximate parameter count (see ``count_params`` in the tests).
PRESETS: dict[str, GPTConfig] = {
    "1m": GPTConfig(n_layer=4, n_head=4, d_model=128, block=128),
    "5m": GPTConfig(n_layer=6, n_head=8, d_model=256, block=256),
    "20m": GPTConfig(n_layer=6, n_head=8, d_model=512, block=256),
}
DEFAULT_PRESET = "1m"


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.fc_out = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, c))
        out: torch.Tensor = x + self.fc_out(F.gelu(self.fc(self.ln2(x))))
        return out


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.block, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.head.weight = self.tok.weight  # tied embeddings
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("fc_out.weight"):
                # GPT-2's scaled init of residual projections.
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        if t > self.cfg.block:
            raise ValueError(f"sequence of {t} tokens exceeds the block size {self.cfg.block}")
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        logits: torch.Tensor = self.head(self.ln_f(x))
        return logits


def model(preset: str = DEFAULT_PRESET) -> GPT:
    if preset not in PRESETS:
        raise ValueError(f"unknown lm preset {preset!r}; choose one of {', '.join(PRESETS)}")
    return GPT(PRESETS[preset])


@functools.lru_cache(maxsize=1)
def _splits() -> tuple[torch.Tensor, torch.Tensor]:
    return split_corpus(stdlib_corpus())


def dataset(split: str = "train", seed: int = 0, preset: str = DEFAULT_PRESET) -> TextWindows:
    """Byte windows of the preset's block size. ``seed`` is unused: the corpus is fixed, and
    the order comes from the loader's sampler."""
    del seed
    train, val = _splits()
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    return TextWindows(train if split == "train" else val, PRESETS[preset].block)


def loss(model: nn.Module, batch: Any) -> torch.Tensor:
    x, y = batch
    logits = model(x)
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))


def optimizer(params: Any, lr: float) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=lr)


def count_samples(batch: Any) -> int:
    return int(batch[0].shape[0])


def count_tokens(batch: Any) -> int:
    return int(batch[0].numel())
