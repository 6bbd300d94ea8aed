"""Classes change-35 showed, fixed in general (issue 32, the twenty-fifth session). Each fixture
has the shape of the code a judge read, shortened and renamed; each test fails on the rules
before the change, and the controls hold on both."""

from __future__ import annotations

from lint_findings import findings

# DeepSNAP's examples evaluate each split in turn: ``for loader in loaders`` around ``for batch
# in loader``, with autograd left on. One ``no_grad`` around the outer loop is the fix, so one
# finding says it; the inner loop was reported as well.
SPLITS = """
import torch

device = torch.device("cuda")
model = Net().to(device)


def test(model, loaders):
    model.eval()
    accs = []
    for loader in loaders:
        correct = 0
        for batch in loader:
            batch.to(device)
            pred = model(batch).argmax(1)
            correct += pred.eq(batch.y).sum()
        accs.append(correct)
    return accs


for epoch in range(100):
    train(model)
    print(test(model, [train_loader, val_loader]))
"""


def test_an_evaluation_over_splits_is_reported_once() -> None:
    assert findings(SPLITS, "TP403") == [("TP403", 11)]


def test_an_evaluation_over_one_loader_keeps_its_finding() -> None:
    one = SPLITS.replace(
        "    for loader in loaders:\n", "    for _ in [0]:\n        loader = loaders\n"
    )
    one = SPLITS.replace("for loader in loaders:", "if loaders:\n        loader = loaders")
    assert findings(one, "TP403") == [("TP403", 14)]


# Options whose defaults ``parser.set_defaults(...)`` gives (DeepSNAP's examples, MAE's
# ``set_defaults(pin_mem=True)``): argparse reads them over the ``add_argument``'s own default.
LOADER = """
import argparse
import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=0)
{set_defaults}
args = parser.parse_args()
model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(train_set, batch_size=64, num_workers=args.workers, pin_memory=True)
for x, y in loader:
    loss = model(x.cuda()).sum()
    loss.backward()
    optimizer.step()
"""


def test_set_defaults_gives_the_options_default() -> None:
    assert findings(LOADER.format(set_defaults=""), "TP101") == [("TP101", 12)]
    given = LOADER.format(set_defaults="parser.set_defaults(workers=8)")
    assert findings(given, "TP101") == []
