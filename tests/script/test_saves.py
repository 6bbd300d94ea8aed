"""A script that saves or copies its whole model runs under torchpace as it does alone, and its
checkpoint holds nothing of torchpace's: pytorch/examples' word_language_model failed under
``compare`` with "Can't pickle <function DataLoader.__init__>", because ``torch.save(model)``
pickled the interposer's forward hook with the model (runtime.modules)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from torchpace.cli import main

SCRIPT = str(Path(__file__).parent / "scripts" / "saves_whole_model.py")


def _load(path: Path) -> torch.nn.Module:
    model = torch.load(path, weights_only=False)
    assert isinstance(model, torch.nn.Module)
    for m in model.modules():
        for hooks in (m._forward_pre_hooks, m._forward_hooks):
            assert not hooks, f"{type(m).__name__} kept hooks: {list(hooks.values())}"
        assert "forward" not in vars(m)
    assert model(torch.randn(2, 8)).shape == (2, 1)
    return model


@pytest.mark.parametrize(
    "plan",
    [{"version": 1}, {"version": 1, "grad_set_to_none": True, "fused_optimizer": True}],
    ids=["as-written", "a-plan"],
)
def test_a_run_with_a_plan_saves_and_copies_the_whole_model(tmp_path: Path, plan: dict) -> None:
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan))
    ckpt = tmp_path / "model.pt"
    assert main(["run", "--plan", str(plan_path), SCRIPT, "--", str(ckpt)]) == 0
    _load(ckpt)


def test_the_doctor_lets_a_script_save_its_whole_model_mid_run(tmp_path: Path) -> None:
    ckpt = tmp_path / "model.pt"
    rc = main(["doctor", "--steps", "10", "--json", str(tmp_path / "d.json"), SCRIPT, "--",
               str(ckpt)])  # fmt: skip
    assert rc == 0
    doc = json.loads((tmp_path / "d.json").read_text())
    assert not doc.get("instrument_errors"), doc.get("instrument_errors")
    _load(ckpt)  # saved at step 3, while the doctor's hooks were on the model


def test_a_compiled_forward_stays_out_of_the_pickle() -> None:
    from torchpace.runtime.modules import module_state
    from torchpace.speedups.compile import COMPILED_HERE

    model = torch.nn.Linear(2, 2)

    def compiled(*args: object) -> None:  # stands in for torch.compile's wrapper
        return None

    setattr(compiled, COMPILED_HERE, True)
    state = module_state({**vars(model), "forward": compiled})
    assert "forward" not in state
    mine = {**vars(model), "forward": print}  # the script's own: left as it is
    assert module_state(mine)["forward"] is print
