"""`torchpace apply`: a plan as a byte-exact, idempotent source change through lint's fix
machinery, with instructions for what has no sound static edit."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import pytest

from torchpace.cli import main
from torchpace.lint.fixes import apply_fixes
from torchpace.script.edits import plan_edits
from torchpace.train.plan import Plan

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]
FULL = Plan(
    amp="bf16",
    channels_last=True,
    fused_optimizer=True,
    grad_set_to_none=True,
    fast_math=True,
    compile="default",
    loader_workers=1,
    batching="length-bucket",
)


def _applied(source: bytes, plan: Plan, device: str = "cpu") -> bytes:
    findings, _ = plan_edits(source, "x.py", plan, device=device)
    result = apply_fixes(source, findings)
    assert not result.refused
    return result.source


def test_golden_edits_of_every_kind():
    source = (DATA / "apply.in.py").read_bytes()
    assert _applied(source, FULL) == (DATA / "apply.out.py").read_bytes()


@pytest.mark.parametrize("name", ["naive_cnn", "naive_lm", "naive_seqcls"])
def test_the_naive_scripts_patched_parse_and_a_second_apply_changes_nothing(name):
    source = (ROOT / "examples" / f"{name}.py").read_bytes()
    once = _applied(source, FULL)
    assert once != source
    ast.parse(once)
    assert _applied(once, FULL) == once


def test_crlf_line_endings_are_kept():
    source = (DATA / "apply.in.py").read_bytes().replace(b"\n", b"\r\n")
    out = _applied(source, FULL)
    assert b"\r\n" in out and b"\n" not in out.replace(b"\r\n", b"")
    assert out == (DATA / "apply.out.py").read_bytes().replace(b"\n", b"\r\n")


def test_cuda_values_and_instructions_for_what_has_no_static_edit():
    source = (DATA / "apply.in.py").read_bytes()
    plan = Plan(amp="fp16", loader="auto", fast_math=True, batch_size=64, fold_conv_bias=True)
    findings, notes = plan_edits(source, "x.py", plan, device="cuda")
    out = apply_fixes(source, findings).source.decode()
    assert "torch.backends.cudnn.benchmark = True" in out
    assert 'torch.set_float32_matmul_precision("high")' in out
    assert "pin_memory=True" in out
    assert {n.technique for n in notes} == {"amp-fp16", "conv-bias-before-bn"}
    assert "DataLoader(data, batch_size=64, shuffle=True" in out
    assert "lr=0.1 * (64 / 8) ** 0.5" in out if plan.lr_scaling == "sqrt" else "(64 / 8)" in out


def test_write_rewrites_in_place_keeping_permissions_and_diff_prints(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_bytes((DATA / "apply.in.py").read_bytes())
    os.chmod(script, 0o750)
    plan = tmp_path / "plan.json"
    FULL.save(plan)
    assert main(["apply", str(plan), str(script)]) == 0
    assert "+    with torch.autocast(" in capsys.readouterr().out
    assert script.read_bytes() == (DATA / "apply.in.py").read_bytes()  # --diff writes nothing
    assert main(["apply", str(plan), str(script), "--write"]) == 0
    assert script.read_bytes() == (DATA / "apply.out.py").read_bytes()
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert main(["apply", str(plan), str(script), "--write"]) == 0
    assert "already has every edit" in capsys.readouterr().err


def test_a_script_that_does_not_parse_is_a_one_line_error(tmp_path, capsys):
    script = tmp_path / "bad.py"
    script.write_text("def (:\n")
    plan = tmp_path / "plan.json"
    FULL.save(plan)
    assert main(["apply", str(plan), str(script)]) == 2
    assert "bad.py:1: the script does not parse" in capsys.readouterr().err


def test_apply_never_imports_torch(tmp_path):
    import subprocess
    import sys

    plan = tmp_path / "plan.json"
    FULL.save(plan)
    code = (
        "import sys; from torchpace.cli import main; "
        f"main(['apply', {str(plan)!r}, {str(DATA / 'apply.in.py')!r}]); "
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_larger_batch_is_written_with_its_lr_scaled_by_the_rule():
    source = (ROOT / "examples" / "naive_seqcls.py").read_bytes()
    plan = Plan(batch_size=32, lr_scaling="sqrt", batching="length-bucket")
    assert plan_edits(source, "naive_seqcls.py", plan)[1] == []
    once = _applied(source, plan)
    text = once.decode()
    assert "batch_size=32," in text and "batch_size=args.batch_size" not in text
    assert "lr=args.lr * (32 / args.batch_size) ** 0.5" in text
    # bucketing reads the loader's new batch size: it comes after the loader is built
    assert text.index("batch_size=32") < text.index("bucket_by_length(train_loader)")
    ast.parse(once)
    assert _applied(once, plan) == once
    linear = _applied(source, Plan(batch_size=64, lr_scaling="linear")).decode()
    assert "lr=args.lr * (64 / args.batch_size))" in linear


def test_a_larger_batch_stays_an_instruction_where_the_lr_cannot_be_placed(tmp_path):
    source = b"""import torch
from torch.utils.data import DataLoader

def make(ds):
    return DataLoader(ds, batch_size=16, shuffle=True)

opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = make(ds)
"""
    findings, notes = plan_edits(source, "x.py", Plan(batch_size=32))
    assert findings == [] and [n.technique for n in notes] == ["max-batch-size"]


def test_apply_defaults_to_the_device_the_script_trains_on(tmp_path: Path, capsys) -> None:
    from torchpace.script.edits import script_device

    assert script_device(b"import torch\nm = torch.nn.Linear(2, 2).cuda()\n", "a.py") == "cuda"
    assert script_device(b"import torch\nm = torch.nn.Linear(2, 2)\n", "b.py") == "cpu"
    assert script_device(b"def broken(:\n", "c.py") == "cpu"
    # A CUDA script, no --device: autocast's device_type is the script's, not "cpu".
    source = (DATA / "apply.in.py").read_text()
    script = tmp_path / "train.py"
    cuda = source.replace("nn.LazyLinear(2))", "nn.LazyLinear(2)).cuda()")
    assert cuda != source
    script.write_text(cuda)
    plan = tmp_path / "plan.json"
    Plan(amp="bf16").save(plan)
    assert main(["apply", str(plan), str(script)]) == 0
    assert 'autocast(device_type="cuda"' in capsys.readouterr().out
