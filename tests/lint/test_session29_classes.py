"""Classes of false findings and misses from the recorded verdicts (issue 32), session 29: each
cut from the code it was seen in, and checked the other way round."""

from __future__ import annotations

from lint_findings import notebook_findings

# PyTorch Step-by-Step, chapter 8: two cells define the same in-memory dataset class (its
# __getitem__ only indexes a list of tensors) and bind train_var_data to it; a small-batch loader
# over it has nothing for a worker to do (judged false twice at change-39).
DATASET = """
import torch
from torch.utils.data import DataLoader, Dataset

class CustomDataset(Dataset):
    def __init__(self, x, y):
        self.x = [torch.as_tensor(s).float() for s in x]
        self.y = torch.as_tensor(y).float().view(-1, 1)

    def __getitem__(self, index):
        {item}

    def __len__(self):
        return len(self.x)

train_var_data = CustomDataset(var_points, var_directions)
"""
LOADER = "train_var_loader = DataLoader(train_var_data, batch_size=16, shuffle=True)"
TRAIN = """
model = Net().to("cuda")
optimizer = torch.optim.Adam(model.parameters())
for x, y in train_var_loader:
    loss = loss_fn(model(x.to("cuda")), y.to("cuda"))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


def test_a_dataset_bound_again_in_a_later_cell_is_read_at_every_binding() -> None:
    indexes = "return (self.x[index], self.y[index])"
    reads = "return (torch.load(self.x[index]), self.y[index])"
    cells = [DATASET.format(item=indexes), LOADER, DATASET.format(item=indexes), LOADER, TRAIN]
    assert notebook_findings(cells, "TP101") == []
    # one binding's items read files: workers would take that off the step
    cells[2] = DATASET.format(item=reads)
    assert notebook_findings(cells, "TP101") == [("TP101", 2, 1), ("TP101", 4, 1)]
