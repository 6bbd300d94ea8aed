"""A small CNN on images that take time to read, with a validation pass every few steps.

Each image is "decoded" in the Dataset's __getitem__: a fixed 2 ms wait stands for reading and
decoding a JPEG from a network disk, then a deterministic 3x32x32 pattern with noise is built
from its index. The training loader reads in the main process (num_workers=0, the default of
--workers), as many tutorial scripts do. Validation runs every --eval-every steps over its own
loader; the run stops after --steps optimizer steps.
"""

import argparse
import random
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

N_CLASSES = 10


class SlowImages(Dataset):
    def __init__(self, n, read_ms=2.0, offset=0):
        self.n = n
        self.read_s = read_ms / 1000
        self.offset = offset

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        time.sleep(self.read_s)  # reading and decoding the file
        i = idx + self.offset
        label = i % N_CLASSES
        g = torch.Generator().manual_seed(i)
        base = torch.linspace(-1, 1, 32)
        freq = 1 + label
        pattern = torch.sin(freq * base)[None, :] * torch.cos(freq * base)[:, None]
        img = 0.6 * pattern.expand(3, 32, 32) + torch.randn(3, 32, 32, generator=g)
        return img, label


class SmallCNN(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width * 2, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(width * 2)
        self.fc = nn.Linear(width * 2 * 8 * 8, N_CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


def evaluate(model, loader):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            loss_sum += F.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
            total += y.numel()
    model.train()
    return loss_sum / total, correct / total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--read-ms", type=float, default=2.0)
    parser.add_argument("--n-train", type=int, default=4096)
    parser.add_argument("--n-val", type=int, default=1024)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0, help="-1: leave the run unseeded")
    args = parser.parse_args()

    if args.seed >= 0:
        random.seed(args.seed)
        np.random.seed(args.seed)
        torch.manual_seed(args.seed)

    train_set = SlowImages(args.n_train, args.read_ms)
    val_set = SlowImages(args.n_val, args.read_ms, offset=args.n_train)
    train_loader = DataLoader(
        train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.workers
    )
    val_loader = DataLoader(val_set, batch_size=64, shuffle=False, num_workers=args.workers)

    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    step = 0
    start = time.time()
    while step < args.steps:
        for x, y in train_loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % args.eval_every == 0:
                val_loss, acc = evaluate(model, val_loader)
                print(
                    f"step {step} train loss {loss.item():.4f} val loss {val_loss:.4f} "
                    f"acc {acc:.3f} ({time.time() - start:.1f}s)"
                )
            if step >= args.steps:
                break
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
