"""Classes issue 32's fourteenth change set showed (pytorch/torchtune's recipes; judged before any
rule changed against it). The fixture has the shape of the code it is cut from, shortened; the
test fails on the rules before the change."""

from __future__ import annotations

from lint_findings import findings

# The shape of torchtune's fine-tuning recipes (BSD-3-Clause): a recipe class builds its loader
# with torchdata's StatefulDataLoader in a setup method, over a dataset that tokenizes each
# sample as it is read, and its train() iterates it every epoch on the GPU.
RECIPE = """
import torch
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler


class FullFinetuneRecipeSingleDevice:
    def __init__(self, cfg):
        self._device = torch.device("cuda")

    def setup(self, cfg):
        self._model = build_model(cfg).to(self._device)
        self._optimizer = torch.optim.AdamW(self._model.parameters(), lr=2e-5)
        self._dataloader = self._setup_data(cfg.dataset, batch_size=cfg.batch_size)

    def _setup_data(self, ds, batch_size):
        sampler = StatefulDistributedSampler(ds, num_replicas=1, rank=0, shuffle=True)
        dataloader = StatefulDataLoader({args})
        return dataloader

    def train(self):
        for curr_epoch in range(3):
            for idx, batch in enumerate(self._dataloader):
                tokens = batch["tokens"].to(self._device)
                loss = self._model(tokens).mean()
                loss.backward()
                self._optimizer.step()
                self._optimizer.zero_grad(set_to_none=True)
"""


def test_torchdatas_stateful_loader_is_a_dataloader() -> None:
    # No workers: every sample is tokenized in the training process (TP101), as for a DataLoader.
    plain = "dataset=ds, batch_size=batch_size, sampler=sampler"
    line = RECIPE.splitlines().index("        dataloader = StatefulDataLoader({args})") + 1
    assert findings(RECIPE.format(args=plain), "TP101") == [("TP101", line)]
    # With workers and pinned memory it is left alone, as a DataLoader would be.
    good = plain + ", num_workers=4, pin_memory=True, persistent_workers=True"
    assert findings(RECIPE.format(args=good), "TP101") == []
