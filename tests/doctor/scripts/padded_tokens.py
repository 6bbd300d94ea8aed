"""Planted padding: every batch holds one sequence of LONG tokens and BATCH - 1 of SHORT tokens,
padded with PAD to the longest, so the padding share is known by construction:
(BATCH - 1) * (LONG - SHORT) / (BATCH * LONG). Token ids are 1..VOCAB - 1, never PAD. With
`--no-pad` every sequence is LONG tokens and nothing is padding. The model runs a per-token MLP
over every position, padded or not, as a naive model does."""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

BATCH = 8
LONG = 64
SHORT = 8
PAD = 0
VOCAB = 100


class Sequences(Dataset):
    def __init__(self, padded):
        self.padded = padded
        self.gen = torch.Generator().manual_seed(0)

    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        n = SHORT if self.padded and i % BATCH else LONG
        return torch.randint(1, VOCAB, (n,), generator=self.gen), i % 2


def pad_batch(items):
    longest = max(len(tokens) for tokens, _ in items)
    out = torch.full((len(items), longest), PAD)
    for row, (tokens, _) in enumerate(items):
        out[row, : len(tokens)] = tokens
    return out, torch.tensor([label for _, label in items])


def main():
    data = Sequences(padded="--no-pad" not in sys.argv)
    loader = DataLoader(data, batch_size=BATCH, collate_fn=pad_batch)  # MARK: loader
    model = nn.Sequential(
        nn.Embedding(VOCAB, 64), nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)
    )
    head = nn.Linear(64, 2)
    opt = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.01)
    for tokens, labels in loader:
        loss = nn.functional.cross_entropy(head(model(tokens).mean(1)), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    sys.exit("the loader ran out before the doctor stopped the script")


if __name__ == "__main__":
    main()
