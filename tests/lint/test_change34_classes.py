"""Classes change-34 showed, fixed in general (issue 32, the twenty-fifth session). Each fixture
has the shape of the code a judge read, shortened and renamed; each test fails on the rules
before the change, and the controls hold on both."""

from __future__ import annotations

from lint_findings import findings

# OpenAI's diffusion trainers (improved-diffusion, guided-diffusion, consistency models) have
# their own 16-bit path: a flag makes a half copy of the model with float32 master weights and
# loss scaling. The training loop's file only calls that machinery, by a name that says so.
TRAINER = """
import torch
from .fp16_util import MixedPrecisionTrainer


class TrainLoop:
    def __init__(self, model, data, lr, use_fp16=False):
        self.model = model.to("cuda")
        self.data = data
        self.mp_trainer = {machinery}
        self.opt = torch.optim.AdamW(self.mp_trainer.master_params, lr=lr)

    def run_loop(self):
        for batch in self.data:
            self.mp_trainer.zero_grad()
            loss = self.model(batch.to("cuda")).mean()
            self.mp_trainer.backward(loss)
            self.mp_trainer.optimize(self.opt)
"""


def test_the_projects_own_mixed_precision_trainer_manages_precision() -> None:
    machinery = "MixedPrecisionTrainer(model=self.model, use_fp16=use_fp16)"
    assert findings(TRAINER.format(machinery=machinery), "TP302") == []
    converted = "Master(self.model)\n        if use_fp16:\n            self.model.convert_to_fp16()"
    assert findings(TRAINER.format(machinery=converted), "TP302") == []


def test_a_name_that_only_contains_the_letters_is_not_machinery() -> None:
    # ``sample``, ``clamp``, ``example`` hold "amp" but not as a word
    # and ``is_bf16_supported`` asks a question
    for name in (
        "SampleTrainer",
        "clamp_trainer",
        "ExampleWrapper",
        "torch.cuda.is_bf16_supported",
    ):
        source = TRAINER.format(machinery=f"{name}(model=self.model)")
        assert findings(source, "TP302") == [("TP302", 14)]
