"""TP102 and batches of a few hundred kilobytes (issue 32): the lint corpus's judges called
pinning 28- and 32-pixel images and padded token ids "negligible: saves microseconds" every
time; a size the file does not spell out is never taken as small."""

from __future__ import annotations

from torchpace.lint import RULES, FileResult, lint_source

CIFAR = """
import torch
import torchvision
import torchvision.transforms as transforms
from torch.utils.data import DataLoader

device = "cuda" if torch.cuda.is_available() else "cpu"
transform_train = transforms.Compose([
    transforms.RandomCrop(32, padding=4),
    transforms.RandomHorizontalFlip(),
    transforms.ToTensor(),
    transforms.Normalize((0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)),
])
trainset = torchvision.datasets.CIFAR10(root="./data", train=True, transform=transform_train)
trainloader = DataLoader(trainset, batch_size=128, shuffle=True, num_workers=2)
for epoch in range(200):
    for inputs, targets in trainloader:
        inputs, targets = inputs.to(device), targets.to(device)
        loss = criterion(net(inputs), targets)
        loss.backward()
        optimizer.step()
"""


def _codes(source: str) -> set[str]:
    result = lint_source("train.py", source.encode(), RULES)
    assert isinstance(result, FileResult), result
    return {f.code for f in result.findings}


def test_cifar_at_32_pixels_is_not_asked_to_pin():
    # kuangliu/pytorch-cifar: 128x3x32x32 floats, 1.5 MB a batch, judged negligible
    assert "TP102" not in _codes(CIFAR)
    assert "TP102" not in _codes(CIFAR.replace("CIFAR10", "MNIST"))


def test_a_resize_or_a_transform_the_file_does_not_spell_out_is_not_small():
    resized = CIFAR.replace("transforms.RandomCrop(32, padding=4)", "transforms.Resize(224)")
    assert "TP102" in _codes(resized)  # mrdbourke's pytorch_2_intro: CIFAR-10 at 224, judged true
    weights = CIFAR.replace(
        "transform=transform_train", "transform=weights.transforms()"
    )  # a model's own preprocessing resizes
    assert "TP102" in _codes(weights)
    other = CIFAR.replace("torchvision.datasets.CIFAR10", "torchvision.datasets.ImageFolder")
    assert "TP102" in _codes(other)


def test_a_transform_given_by_position_is_read_as_the_transform():
    # torchvision's CIFAR10(root, train, transform, target_transform, download): the third
    # positional argument is the image transform, the fourth the label's
    by_position = CIFAR.replace(
        'root="./data", train=True, transform=transform_train', '"./data", True, transform_train'
    )
    assert "TP102" not in _codes(by_position)
    resized = by_position.replace("transforms.RandomCrop(32, padding=4)", "transforms.Resize(224)")
    assert "TP102" in _codes(resized)


TEXT = """
import torch
from torch.utils.data import DataLoader
from transformers import DataCollatorWithPadding

collator = DataCollatorWithPadding(tokenizer)
loader = DataLoader(tokenized["train"], batch_size=32, collate_fn=COLLATE, num_workers=4)
for epoch in range(3):
    for batch in loader:
        batch = {k: v.to("cuda") for k, v in batch.items()}
        model(**batch).loss.backward()
        optimizer.step()


def pad(examples):
    return tokenizer.pad(examples, padding="longest", return_tensors="pt")
"""


def test_padded_token_ids_are_not_asked_to_pin():
    assert "TP102" not in _codes(TEXT.replace("COLLATE", "collator"))
    assert "TP102" not in _codes(TEXT.replace("COLLATE", "pad"))
    assert "TP102" in _codes(TEXT.replace("COLLATE", "my_collate"))  # not known to be tokens
