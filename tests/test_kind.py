"""A .py file is a recipe or a script by its syntax tree; it is never executed to find out."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpace.recipes import RecipeError
from torchpace.runtime.kind import kind_of

ROOT = Path(__file__).resolve().parents[1]

RECIPE = """
from torchpace.workloads.cnn import ResNet as model, dataset
batch_size = 64
lr = 1e-3
def loss(model, batch):
    return model(batch[0]).sum()
"""
SCRIPT_MAIN = """
import torch
def main():
    pass
if __name__ == "__main__":
    main()
"""
SCRIPT_TOP_LEVEL = """
import torch
model = torch.nn.Linear(2, 2)
for step in range(10):
    model(torch.zeros(2)).sum().backward()
"""
HALF_RECIPE = """
def model():
    pass
lr = 0.1
"""
LIBRARY = """
import torch
class Net(torch.nn.Module):
    pass
def helper():
    return 1
"""


def _file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "f.py"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text, kind",
    [(RECIPE, "recipe"), (SCRIPT_MAIN, "script"), (SCRIPT_TOP_LEVEL, "script")],
)
def test_recipe_or_script_from_the_syntax_tree(tmp_path, text, kind):
    assert kind_of(_file(tmp_path, text)) == kind


def test_the_project_files_are_told_apart():
    for name in ("naive_cnn", "naive_lm", "naive_seqcls"):
        assert kind_of(ROOT / "examples" / f"{name}.py") == "script"
    assert kind_of(ROOT / "tests" / "script" / "scripts" / "planted.py") == "script"


def test_a_half_written_recipe_names_what_it_lacks(tmp_path):
    with pytest.raises(RecipeError, match="has no `dataset`, `loss`, `batch_size`: define"):
        kind_of(_file(tmp_path, HALF_RECIPE))


def test_a_library_module_is_neither_and_the_error_says_what_to_give(tmp_path):
    with pytest.raises(RecipeError, match=r"neither a recipe .* nor a training script"):
        kind_of(_file(tmp_path, LIBRARY))


def test_deciding_never_runs_the_file(tmp_path):
    marker = tmp_path / "ran"
    script = f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit('ran')\n"
    assert kind_of(_file(tmp_path, script)) == "script"
    assert not marker.exists()


def test_a_file_that_does_not_parse_names_the_line(tmp_path):
    with pytest.raises(RecipeError, match=r"f.py:2: the file does not parse"):
        kind_of(_file(tmp_path, "x = 1\ndef (\n"))
