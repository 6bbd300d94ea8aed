"""A CIFAR-style training script written the way many are: it works, and it is slow.

Deliberately naive: it is the starting point torchpace's lint, doctor, tune and benchmarks are
measured from. Do not "fix" it; the slow patterns are the point (see the comments marked SLOW;
`SLOW(TPxxx)` marks what `torchpace lint` reports on that line).

    python examples/naive_cnn.py --steps 200
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader

from torchpace.workloads.cnn import ResNet, dataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--eval-batches", type=int, default=4)
    parser.add_argument(
        "--cifar-root", default=None, help="real CIFAR-10 batches, if you have them"
    )
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(args.seed)
    train_set = dataset("train", seed=args.seed, cifar_root=args.cifar_root)
    val_set = dataset("val", seed=args.seed, cifar_root=args.cifar_root)
    # SLOW: no worker processes, no pinned memory.
    train_loader = DataLoader(  # SLOW(TP101): no workers (pinning comes with them, TP102)
        train_set, batch_size=args.batch_size, shuffle=True
    )
    val_loader = DataLoader(val_set, batch_size=256)  # evaluation only: no TP101/TP102

    # SLOW: every conv has a bias right before a BatchNorm, which cancels it.
    model = ResNet(conv_bias=True).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    step = 0
    while step < args.steps:
        for images, labels in train_loader:  # SLOW(TP302): fp32 on CUDA
            images = images.to(device)
            labels = labels.to(device)
            # SLOW: noise made on the host, then copied to the device.
            noise = torch.randn(images.shape).to(device) * 0.01  # SLOW(TP207)
            optimizer.zero_grad(set_to_none=False)  # SLOW(TP402): zero-fills instead of freeing
            outputs = model(images + noise)  # SLOW: fp32, default memory format
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            running = loss.item()  # SLOW(TP201): a sync on every step
            if step % 10 == 0:
                print(f"step {step} loss {running:.4f}", flush=True)
            step += 1
            if step % args.eval_every == 0:
                model.eval()
                correct = 0
                total = 0
                for i, (images, labels) in enumerate(val_loader):  # SLOW(TP403): no torch.no_grad()
                    if i == args.eval_batches:
                        break
                    outputs = model(images.to(device))
                    correct += (outputs.argmax(1) == labels.to(device)).sum().item()
                    total += labels.shape[0]
                print(f"step {step} val_acc {correct / total:.4f}", flush=True)
                model.train()
            if step >= args.steps:
                break
    print(f"final loss {running:.4f}")


if __name__ == "__main__":
    main()
