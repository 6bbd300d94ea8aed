"""Classes change-28 showed, fixed in general (issue 32, the twenty-third session). Each fixture
has the shape of the code a judge read, shortened and renamed; each test fails on the rules
before the change, and the controls hold on both."""

from __future__ import annotations

from lint_findings import findings

# parler-tts' training script encodes each split's audio into codec tokens before training:
# one loader a split, over that split's dataset, iterated once. Persistent workers would keep
# nothing: the next pass builds another loader over another dataset.
PER_SPLIT = """
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = Model().to(device)
opt = torch.optim.AdamW(model.parameters())
for split in raw_datasets:
    data_loader = DataLoader(raw_datasets[split], batch_size=8, num_workers=4, pin_memory=True)
    for batch in data_loader:
        loss = model(batch.to(device)).sum()
        loss.backward()
        opt.step()
"""


def test_a_loader_built_each_pass_over_that_passs_dataset_keeps_no_workers() -> None:
    assert findings(PER_SPLIT, "TP104") == []


def test_a_loader_built_each_epoch_over_the_same_dataset_is_still_reported() -> None:
    # each epoch starts its workers again: build it once, with persistent workers
    same = PER_SPLIT.replace("for split in raw_datasets:", "for epoch in range(10):")
    same = same.replace("DataLoader(raw_datasets[split],", "DataLoader(train_set,")
    assert findings(same, "TP104") == [("TP104", 9)]


def test_a_loader_of_each_pass_iterated_by_an_inner_epoch_loop_is_still_reported() -> None:
    inner = (
        PER_SPLIT.replace(
            "    for batch in data_loader:\n",
            "    for epoch in range(5):\n      for batch in data_loader:\n",
        )
        .replace("        loss", "          loss")
        .replace("        opt.step", "          opt.step")
    )
    assert findings(inner, "TP104") == [("TP104", 9)]
