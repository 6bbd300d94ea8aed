"""(A/B variant of char_padded.py: padded in the collate, batches of similar lengths, by hand.)
Character-level transformer language model trained on lines of Python's own standard library.

Each sample is one source line, padded to a fixed length inside the Dataset; the DataLoader
shuffles and uses several worker processes.
"""

import argparse
import collections
import json
import os
import random
import textwrap
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

PAD = 0


def load_lines(min_len=8):
    files = [os.__file__, argparse.__file__, json.__file__, textwrap.__file__]
    files.append(collections.__file__)
    lines = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip()
                if len(line.strip()) >= min_len:
                    lines.append(line)
    return lines


class LineDataset(Dataset):
    def __init__(self, lines, stoi, max_len):
        self.lines = lines
        self.stoi = stoi
        self.max_len = max_len

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, idx):
        line = self.lines[idx][: self.max_len + 1]
        ids = [self.stoi[c] for c in line]
        x = ids[:-1]
        y = ids[1:]
        return torch.tensor(x, dtype=torch.long), torch.tensor(y, dtype=torch.long)


def pad_collate(batch):
    """Pad each batch to its own longest line."""
    n = max(len(x) for x, _ in batch)
    xs = torch.full((len(batch), n), PAD, dtype=torch.long)
    ys = torch.full((len(batch), n), -100, dtype=torch.long)
    for i, (x, y) in enumerate(batch):
        xs[i, : len(x)] = x
        ys[i, : len(y)] = y
    return xs, ys


class BucketBatchSampler:
    """Shuffled batches of lines of similar length: shuffle, sort chunks of 50 batches by
    length, cut them into batches, shuffle the batches."""

    def __init__(self, lengths, batch_size, chunk=50):
        self.lengths, self.batch_size, self.chunk = lengths, batch_size, chunk

    def __iter__(self):
        order = torch.randperm(len(self.lengths)).tolist()
        size = self.batch_size * self.chunk
        batches = []
        for i in range(0, len(order), size):
            part = sorted(order[i : i + size], key=lambda k: self.lengths[k])
            for j in range(0, len(part) - self.batch_size + 1, self.batch_size):
                batches.append(part[j : j + self.batch_size])
        for k in torch.randperm(len(batches)).tolist():
            yield batches[k]

    def __len__(self):
        return len(self.lengths) // self.batch_size


class CharTransformer(nn.Module):
    def __init__(self, vocab_size, max_len, d_model=64, nhead=4, num_layers=2, dropout=0.1):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.pos_emb = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=4 * d_model, dropout=dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers)
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        t = x.shape[1]
        pos = torch.arange(t, device=x.device)
        h = self.tok_emb(x) + self.pos_emb(pos)
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
        pad_mask = x == PAD
        h = self.encoder(h, mask=causal, src_key_padding_mask=pad_mask)
        return self.head(self.ln(h))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-len", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    lines = load_lines()
    chars = sorted(set("".join(lines)))
    stoi = {c: i + 1 for i, c in enumerate(chars)}  # 0 is the pad id
    vocab_size = len(chars) + 1
    print(f"{len(lines)} lines, vocab size {vocab_size}")

    dataset = LineDataset(lines, stoi, args.max_len)
    lengths = [min(len(line), args.max_len + 1) - 1 for line in lines]
    loader = DataLoader(
        dataset,
        batch_sampler=BucketBatchSampler(lengths, args.batch_size),
        num_workers=args.workers,
        collate_fn=pad_collate,
    )

    model = CharTransformer(vocab_size, args.max_len, d_model=args.d_model, num_layers=args.layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss(ignore_index=-100)
    print(f"{sum(p.numel() for p in model.parameters()) / 1e3:.1f}k parameters")

    step = 0
    epoch = 0
    running = 0.0
    start = time.time()
    model.train()
    while step < args.steps:
        epoch += 1
        for x, y in loader:
            logits = model(x)
            loss = criterion(logits.view(-1, vocab_size), y.view(-1))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

            running += loss.item()
            step += 1
            if step % args.log_every == 0:
                print(
                    f"epoch {epoch} step {step}: loss {running / args.log_every:.4f} "
                    f"({time.time() - start:.1f}s)"
                )
                running = 0.0
            if step >= args.steps:
                break

    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
