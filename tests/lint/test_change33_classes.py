"""Classes change-33 showed, fixed in general (issue 32, the twenty-fourth session). Each fixture
has the shape of the code a judge read, shortened and renamed; each test fails on the rules
before the change, and the controls hold on both."""

from __future__ import annotations

from lint_findings import findings

# A Transformers trainer subclass (TRL's DPO, KTO, GRPO trainers; a user's custom loss)
# overrides ``compute_loss(self, model, inputs, ...)``, which the Trainer calls on every
# micro-step: its metric reads wait for the device each time, though no loop of the file runs it.
TRAINER = """
import torch
from transformers import Trainer


class PairTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        chosen = model(**inputs["chosen"]).logits
        rejected = model(**inputs["rejected"]).logits
        margin = (chosen - rejected).mean()
        loss = -torch.nn.functional.logsigmoid(margin)
        self.store_metrics({"margin": margin.item()})
        return (loss, chosen) if return_outputs else loss
"""


def test_a_trainers_compute_loss_override_is_step_code() -> None:
    assert findings(TRAINER, "TP201") == [("TP201", 12)]


def test_a_method_named_compute_loss_without_the_trainers_arguments_is_not() -> None:
    other = TRAINER.replace(
        "def compute_loss(self, model, inputs,", "def compute_loss(self, batch,"
    )
    other = other.replace('inputs["chosen"]', 'batch["chosen"]').replace(
        'inputs["rejected"]', 'batch["rejected"]'
    )
    assert findings(other, "TP201") == []


# WeNet's loader: num_workers comes from an option whose default is 0, but the same call sets
# persistent_workers=True and a prefetch_factor, which the DataLoader refuses without workers:
# the run this call is written for starts workers (the launcher passes --num_workers).
WORKERS = """
import argparse
import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--num_workers", type=int, default=0)
parser.add_argument("--prefetch", type=int, default=100)
args = parser.parse_args()
model = AsrModel().cuda()
optimizer = torch.optim.Adam(model.parameters())
loader = DataLoader(
    train_dataset,
    batch_size=None,
    pin_memory=True,
    num_workers=args.num_workers,
    persistent_workers=True,
    prefetch_factor=args.prefetch,
)
for epoch in range(100):
    for batch in loader:
        loss = model(batch["feats"].cuda())
        loss.backward()
        optimizer.step()
"""


def test_workers_the_call_itself_asks_for_are_not_reported_missing() -> None:
    assert findings(WORKERS, "TP101") == []


def test_an_option_defaulting_to_0_alone_is_still_reported() -> None:
    plain = WORKERS.replace("    persistent_workers=True,\n", "").replace(
        "    prefetch_factor=args.prefetch,\n", ""
    )
    assert findings(plain, "TP101") == [("TP101", 16)]


# TRL's teacher-server request builder: the prompt lengths are copied to the host, summed and
# cast with ``.to(torch.long)`` (a cast, no device), then read element by element: host reads.
LENGTHS = """
import torch
from transformers import Trainer


class ServerTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        lengths = inputs["prompt_attention_mask"].detach().cpu().sum(dim=1).to(torch.long)
        for row, length in zip(inputs["input_ids"], lengths, strict=True):
            self.requests.append(int(length.item()))
        return model(**inputs).loss
"""


def test_a_host_tensor_cast_with_to_a_dtype_stays_on_the_host() -> None:
    assert findings(LENGTHS, "TP201") == [("TP201", 8)]


def test_a_host_tensor_moved_with_to_a_device_is_read_on_the_device() -> None:
    moved = LENGTHS.replace(".to(torch.long)", ".to(model.device)")
    assert findings(moved, "TP201") == [("TP201", 8), ("TP201", 10)]
