"""Classify variable-length sequences, padding every batch to its longest sequence.

Deliberately naive (see the comments marked SLOW;
`SLOW(TPxxx)` marks what `torchpace lint` reports on that line); torchpace is measured from here.

    python examples/naive_seqcls.py --steps 200
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader

from torchpace.workloads.seqcls import PAD, SeqClassifier, dataset


def pad_batch(items):
    # SLOW: every batch is padded to its longest sequence; lengths are long-tailed, so most of
    # the compute goes into padding. No bucketing, no fixed shapes.
    longest = max(len(tokens) for tokens, _ in items)
    batch = torch.full((len(items), longest), PAD, dtype=torch.long)
    for i, (tokens, _) in enumerate(items):
        batch[i, : len(tokens)] = tokens
    labels = torch.tensor([label for _, label in items])
    return batch, labels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--eval-batches", type=int, default=8)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(args.seed)
    train_loader = DataLoader(  # SLOW(TP101): no workers (pinning comes with them, TP102)
        dataset("train", seed=args.seed),
        batch_size=args.batch_size,
        shuffle=True,
        collate_fn=pad_batch,
    )
    val_loader = DataLoader(  # evaluation only: no TP101/TP102
        dataset("val", seed=args.seed), batch_size=64, collate_fn=pad_batch
    )
    model = SeqClassifier().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    step = 0
    while step < args.steps:
        for tokens, labels in train_loader:  # SLOW(TP302): fp32 on CUDA
            tokens, labels = tokens.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = criterion(model(tokens), labels)
            loss.backward()
            optimizer.step()
            n_pad = (tokens == PAD).sum().item()  # SLOW(TP201): a sync every step, for a statistic
            if step % 10 == 0:
                print(
                    f"step {step} loss {loss.item():.4f} padding {n_pad / tokens.numel():.0%}",
                    flush=True,
                )
            step += 1
            if step % args.eval_every == 0:
                correct = seen = 0
                for i, (vtokens, vlabels) in enumerate(val_loader):  # SLOW(TP403): no no_grad
                    if i == args.eval_batches:
                        break
                    pred = model(vtokens.to(device)).argmax(1).cpu()
                    correct += (pred == vlabels).sum().item()
                    seen += len(vlabels)
                print(f"step {step} val_acc {correct / seen:.4f}", flush=True)
            if step >= args.steps:
                break
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
