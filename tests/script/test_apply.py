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


def _loader_edits(source: bytes, plan: Plan) -> tuple[str, dict[int, str]]:
    """The script with the plan's loader edits on CUDA, and apply's loader instructions by line."""
    findings, notes = plan_edits(source, "x.py", plan, device="cuda")
    why = {n.line: n.text for n in notes if n.technique == "loader-workers"}
    return apply_fixes(source, findings).source.decode(), why


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
    capsys.readouterr()
    assert main(["apply", str(plan), str(script), "--write"]) == 0
    err = capsys.readouterr().err  # a second apply changes nothing; amp is by hand
    assert "has every edit apply can make for this plan; the rest is by hand" in err


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


def test_a_larger_batch_from_options_changes_both_defaults_together():
    # Issue 30: apply wrote batch_size=32 beside lr=args.lr * (32 / args.batch_size): passing
    # --batch-size later gave a batch and an LR that disagree. The defaults change instead.
    source = (ROOT / "examples" / "naive_seqcls.py").read_bytes()
    plan = Plan(batch_size=32, lr_scaling="sqrt", batching="length-bucket")
    (work,) = plan_edits(source, "naive_seqcls.py", plan)[1]  # the script stops after --steps
    assert "the batch changes from 16 to 32" in work.text and "pass --steps 100" in work.text
    once = _applied(source, plan)
    text = once.decode()
    assert 'add_argument("--batch-size", type=int, default=32)' in text
    assert 'add_argument("--lr", type=float, default=0.00141421)' in text  # 1e-3 * 2 ** 0.5
    assert "batch_size=args.batch_size," in text and "lr=args.lr)" in text
    # bucketing reads the loader's new batch size: it comes after the loader is built
    assert text.index("batch_size=args.batch_size,") < text.index("bucket_by_length(train_loader)")
    ast.parse(once)
    assert _applied(once, plan) == once
    linear = _applied(source, Plan(batch_size=64, lr_scaling="linear")).decode()
    assert "default=64)" in linear and 'add_argument("--lr", type=float, default=0.004)' in linear


_LOOP = """
model = Net()
loader = DataLoader(ds, batch_size={size}, shuffle=True)
opt = torch.optim.SGD(model.parameters(), lr={lr})
"""


@pytest.mark.parametrize(
    ("head", "size", "lr", "want"),
    [
        # a literal: the call changes, the LR is the rule's formula over the two literals
        ("", "64", "0.1", ["batch_size=128,", "lr=0.1 * (128 / 64)"]),
        # a literal beside an option's LR: the same formula, nothing reads a batch option
        ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr', default=0.1)\n"
         "args = p.parse_args()\n", "64", "args.lr",
         ["batch_size=128,", "lr=args.lr * (128 / 64)"]),
        # a config object: both fields' defaults change together
        ("class Config:\n    batch_size: int = 64\n    lr: float = 0.1\ncfg = Config()\n",
         "cfg.batch_size", "cfg.lr", ["batch_size: int = 128", "lr: float = 0.2",
                                      "batch_size=cfg.batch_size,", "lr=cfg.lr)"]),
        # an option's batch beside a literal LR: the LR follows the option
        ("import argparse\np = argparse.ArgumentParser()\n"
         "p.add_argument('--batch-size', type=int, default=64)\nargs = p.parse_args()\n",
         "args.batch_size", "0.1", ["default=128)", "lr=0.1 * (args.batch_size / 64)"]),
        # module constants
        ("BATCH = 64\nLR = 0.1\n", "BATCH", "LR", ["BATCH = 128", "LR = 0.2"]),
    ],
    ids=["literal", "literal-lr-option", "config", "option-literal-lr", "constants"],
)  # fmt: skip
def test_batch_and_lr_never_disagree(head, size, lr, want):
    source = ("import torch\nfrom torch.utils.data import DataLoader\n" + head
              + _LOOP.format(size=size, lr=lr)).encode()  # fmt: skip
    plan = Plan(batch_size=128, lr_scaling="linear")
    findings, notes = plan_edits(source, "x.py", plan)
    assert notes == [] and len(findings) == 1
    out = _applied(source, plan)
    text = out.decode()
    for piece in want:
        assert piece in text, text
    ast.parse(out)
    assert _applied(out, plan) == out  # a second apply changes nothing
    # The batch expression in the loader is only ever a literal where nothing else sets it.
    assert ("batch_size=128," in text) == (size == "64")


def test_two_options_change_together_wherever_the_loader_and_optimizer_are_built():
    source = b"""import argparse
import torch
from torch.utils.data import DataLoader
p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--learning-rate", type=float, default=3e-4)

def loaders(args):
    loader = DataLoader(ds, batch_size=args.batch_size, shuffle=True)
    return loader

def main(args):
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    train_loader = loaders(args)
"""
    out = _applied(source, Plan(batch_size=256, lr_scaling="sqrt")).decode()
    assert '"--batch-size", type=int, default=256)' in out
    assert '"--learning-rate", type=float, default=0.0006)' in out


def test_an_optimizer_over_parameter_groups_has_its_lr_changed_with_the_batch():
    # Cut from the tune corpus's toy BERT: AdamW over two weight-decay groups, so no optimizer
    # is built over model.parameters(). apply said "by hand: ... the LR scaled by the sqrt rule
    # (x 1.41)", with no LR value, though both are options.
    source = b"""import argparse
import torch
from torch.utils.data import DataLoader

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()
    loader = DataLoader(ds, batch_size=args.batch_size, shuffle=True, collate_fn=collate)
    model = ToyBert()
    no_decay = ["bias", "norm"]
    params = [
        {"params": [p for n, p in model.named_parameters() if not any(d in n for d in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(d in n for d in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(params, lr=args.lr)
"""
    findings, notes = plan_edits(source, "x.py", Plan(batch_size=64, lr_scaling="sqrt"))
    assert notes == [] and len(findings) == 1, notes
    out = _applied(source, Plan(batch_size=64, lr_scaling="sqrt")).decode()
    assert '"--batch-size", type=int, default=64)' in out
    assert '"--lr", type=float, default=0.00424264)' in out  # 3e-3 * 2 ** 0.5
    assert "batch_size=args.batch_size," in out and "lr=args.lr)" in out
    # Two optimizers over groups (a GAN's G and D): which LR goes with the batch is not known.
    two = source.replace(b"    optimizer = torch", b"    other = torch.optim.SGD(params, lr=0.1)\n"
                         b"    optimizer = torch")  # fmt: skip
    findings, notes = plan_edits(two, "x.py", Plan(batch_size=64, lr_scaling="sqrt"))
    assert findings == [] and [n.technique for n in notes] == ["max-batch-size"]


def test_a_batch_that_no_loader_shows_is_an_instruction_with_both_values_and_the_flags():
    # Cut from the tune corpus's small GPT: batches sliced at random, no DataLoader. apply said
    # "train with batch size 64 and the LR scaled by the sqrt rule", with no value or flag.
    source = b"""import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--max-iters", type=int, default=500)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=3e-3)
args = parser.parse_args()
model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
for it in range(args.max_iters):
    xb, yb = get_batch("train", args.batch_size)
"""
    findings, notes = plan_edits(source, "x.py", Plan(batch_size=64, lr_scaling="sqrt"))
    assert findings == [] and len(notes) == 2, notes
    assert "--batch-size 64 --lr 0.006" in notes[0].text  # 3e-3 * (64 / 16) ** 0.5
    assert "pass --max-iters 125" in notes[1].text


def test_a_plan_left_by_hand_is_not_said_to_be_applied(tmp_path: Path, capsys) -> None:
    # apply said "already has every edit the plan makes" above a by-hand batch instruction.
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "def make(ds):\n    return DataLoader(ds, batch_size=16, shuffle=True)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nloader = make(ds)\n"
    )
    plan = tmp_path / "plan.json"
    Plan(batch_size=32).save(plan)
    assert main(["apply", str(plan), str(script)]) == 0
    err = capsys.readouterr().err
    assert "every edit the plan makes" not in err and "the rest is by hand" in err
    assert "by hand: max-batch-size: train with batch size 32" in err


def test_click_options_change_together_as_lint_reads_them():
    # apply reads a value's origin with lint's own reader (lint.values.origin, issue 31: it
    # had a copy of its own that knew argparse only), so a click option's default is an option
    # here as it is to lint's rules.
    source = b"""import click
import torch
from torch.utils.data import DataLoader

@click.command()
@click.option("--batch-size", default=64)
@click.option("--lr", default=0.1)
def main(batch_size, lr):
    model = Net()
    loader = DataLoader(ds, batch_size=batch_size, shuffle=True)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
"""
    findings, notes = plan_edits(source, "x.py", Plan(batch_size=128, lr_scaling="linear"))
    assert notes == [] and len(findings) == 1, notes
    assert "the default of --batch-size" in findings[0].message
    out = _applied(source, Plan(batch_size=128, lr_scaling="linear")).decode()
    assert '@click.option("--batch-size", default=128)' in out
    assert '@click.option("--lr", default=0.2)' in out
    assert "batch_size=batch_size," in out and "lr=lr)" in out


def test_where_the_batch_cannot_be_placed_the_instruction_has_both_values_and_the_flags():
    source = b"""import argparse
import torch
from torch.utils.data import DataLoader
p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--learning-rate", type=float, default=3e-4)
args = p.parse_args()
model = Net()
loader = DataLoader(ds, batch_size=args.batch_size * 2, shuffle=True)
opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
"""
    findings, notes = plan_edits(source, "x.py", Plan(batch_size=256, lr_scaling="sqrt"))
    assert findings == [] and len(notes) == 1
    assert "batch size 256" in notes[0].text and "together" in notes[0].text


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


def test_a_plan_field_no_edit_writes_is_said_with_why_not_dropped():
    # apply printed nothing for preallocate, checkpointed modules, micro-batches or a schedule:
    # the plan's technique vanished from the user's view. The registry says why each has no edit.
    from torchpace import techniques

    source = (DATA / "apply.in.py").read_bytes()
    plan = Plan(preallocate=True, checkpoint_modules=("Block",), accumulate=4, schedule="onecycle")
    _, notes = plan_edits(source, "x.py", plan)
    said = {n.technique: n.text for n in notes}
    for tid in ("fixed-shapes", "activation-checkpointing", "ddp-no-sync", "lr-schedule"):
        edit = techniques.get(tid).plan.edit  # type: ignore[union-attr]
        assert said[tid] == f"not written into the script: {edit.why}"
    assert "checkpoint_activations" in said["activation-checkpointing"]
    _, notes = plan_edits(source, "x.py", FULL)  # the log cadence is fit()'s: never said here
    assert not {n.technique for n in notes} & {"avoid-syncs", "fixed-shapes"}


STREAM = b"""\
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset


class Stream(IterableDataset):
    def __iter__(self):
        for line in open("corpus.txt"):
            yield torch.tensor([len(line)])


class OnDevice(Dataset):
    def __getitem__(self, i):
        return torch.randn(8).cuda()


class Shards(IterableDataset):
    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        yield from range(info.id if info else 0, 100, info.num_workers if info else 1)


stream = DataLoader(Stream(), batch_size=8)
on_device = DataLoader(OnDevice(), batch_size=8)
shards = DataLoader(Shards(), batch_size=8)
"""


def test_workers_are_not_written_where_lint_says_they_would_break_the_loader():
    # Issue 31: an edit is only as safe as the rule says. TP101 stays silent on an unsharded
    # IterableDataset (each worker would yield the whole stream) and on a dataset that makes CUDA
    # tensors (a worker cannot); apply leaves those loaders alone and says why.
    out, why = _loader_edits(STREAM, Plan(loader_workers=2))
    assert "shards = DataLoader(Shards(), batch_size=8, num_workers=2" in out
    assert "stream = DataLoader(Stream(), batch_size=8)\n" in out
    assert "on_device = DataLoader(OnDevice(), batch_size=8)\n" in out
    assert "each worker would yield the whole stream" in why[22]
    assert "worker processes cannot" in why[23]


def test_the_autotuner_is_not_written_into_a_script_that_chooses_cudnns_setup():
    # Issue 31: lint's TP303 leaves a script alone that asks for determinism; apply does too.
    plain = b"import torch\n\nmodel = torch.nn.Conv2d(3, 8, 3).cuda()\n"
    chosen = plain + b"torch.backends.cudnn.deterministic = True\n"
    plan = Plan(fast_math=True)
    assert b"cudnn.benchmark = True" in _applied(plain, plan, "cuda")
    findings, notes = plan_edits(chosen, "x.py", plan, device="cuda")
    out = apply_fixes(chosen, findings).source
    assert b"cudnn.benchmark" not in out and b"set_float32_matmul_precision" in out
    assert [n.text for n in notes if n.technique == "cudnn-benchmark"] == [
        "left alone: the script chooses cuDNN's setup"
    ]


def test_fused_is_not_written_beside_differentiable():
    # Issue 31, as TP405 reads it: fused kernels are not differentiable; torch raises on both.
    source = b"import torch\n\nopt = torch.optim.Adam(params, lr=1e-3, differentiable=True)\n"
    findings, _ = plan_edits(source, "x.py", Plan(fused_optimizer=True), device="cuda")
    assert findings == []
    plain = source.replace(b", differentiable=True", b"")
    assert b"fused=True" in _applied(plain, Plan(fused_optimizer=True), "cuda")


def test_the_matmul_flag_goes_after_import_torch_not_before():
    # hifi-gan's train.py (held-out corpus half): code runs between its first import and
    # `import torch`; the flag written after the first import block raised NameError.
    source = (
        b"import warnings\n"
        b"warnings.simplefilter(action='ignore', category=FutureWarning)\n"
        b"import itertools\n"
        b"import torch\n"
        b"import torch.nn.functional as F\n\n"
        b"model = torch.nn.Linear(4, 4)\n"
    )
    out = _applied(source, Plan(fast_math=True), "cuda").decode()
    lines = out.splitlines()
    assert lines.index('torch.set_float32_matmul_precision("high")') > lines.index("import torch")
    ast.parse(out)
    # torch imported only inside a function: said, not written where it would raise
    inner = b"def main():\n    import torch\n    torch.ones(1).cuda()\n"
    findings, notes = plan_edits(inner, "x.py", Plan(fast_math=True), device="cuda")
    assert not [f for f in findings if f.technique == "tf32"]
    assert [n.technique for n in notes if n.technique == "tf32"] == ["tf32"]


EVAL_LOADER = b"""\
import torch
from torch.utils.data import DataLoader

train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
val_loader = DataLoader(val_set, batch_size=256)
preload = next(iter(DataLoader(train_set, batch_size=len(train_set))))
for epoch in range(10):
    for x, y in train_loader:
        loss = model(x.cuda()).sum()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        for x, y in val_loader:
            model(x.cuda())
"""


def test_workers_go_only_into_the_loaders_that_feed_training():
    # The H200 run of 2026-11-27 (docs/gpu.md): apply wrote persistent workers into naive_cnn's
    # evaluation loader too, processes kept for the whole run to serve a few batches. Lint's
    # TP101 reading says which loaders feed training; apply edits those and says why not others.
    out, why = _loader_edits(EVAL_LOADER, Plan(loader_workers=2))
    assert "shuffle=True, num_workers=2, pin_memory=True, persistent_workers=True)" in out
    assert "val_loader = DataLoader(val_set, batch_size=256)\n" in out
    assert "DataLoader(train_set, batch_size=len(train_set))))\n" in out
    assert set(why) == {5, 6} and all("does not feed training" in w for w in why.values())


WORKERS_OPTION = b"""\
import argparse
import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=0)
args = parser.parse_args()
train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=args.workers)
more = DataLoader(more_set, batch_size=64, shuffle=True, num_workers=args.workers)
other = DataLoader(other_set, batch_size=64, shuffle=True, num_workers=workers_for(other_set))
for epoch in range(10):
    for loader in (train_loader, more, other):
        for x, y in loader:
            loss = model(x.cuda()).sum()
            loss.backward()
            optimizer.step()
"""


def test_workers_read_from_an_option_change_the_options_default():
    # Issue 32's first false class, seen from apply: num_workers=args.workers with a default of
    # 0. Writing a literal over it took the count away from the command line; the option's
    # default changes instead (once for both loaders), and persistent_workers follows the value
    # at run time, since True with --workers 0 raises. A count apply cannot follow stays as
    # written, with an instruction, and gets no persistent_workers that could raise.
    out, why = _loader_edits(WORKERS_OPTION, Plan(loader_workers=3))
    assert 'parser.add_argument("--workers", type=int, default=3)' in out
    assert (
        out.count("num_workers=args.workers, pin_memory=True, persistent_workers=args.workers > 0)")
        == 2
    )
    assert "num_workers=workers_for(other_set), pin_memory=True)" in out
    assert why == {
        10: "num_workers=workers_for(other_set) is left as written: make it 3 where it is set"
    }
    again, _ = plan_edits(out.encode(), "x.py", Plan(loader_workers=3), device="cuda")
    assert apply_fixes(out.encode(), again).source.decode() == out


REENTERED = b"""import torch
from torch.utils.data import DataLoader


def evaluate(model, loader, n):
    with torch.no_grad():
        for i, (x, y) in enumerate(loader):
            if i >= n:
                break
            model(x.cuda())


model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_loader = DataLoader(train_set, batch_size=8, shuffle=True)
for epoch in range(10):
    for step, (x, y) in enumerate(train_loader):
        model(x.cuda()).mean().backward()
        optimizer.step()
        if step % 10 == 0:
            evaluate(model, train_loader, 5)
"""


def test_workers_for_a_loader_iterated_inside_its_own_loop_are_not_kept_alive():
    # as lint's TP104 reads it: persistent workers keep one iterator, which evaluate()'s pass
    # would reset, so the training epoch would never end
    plan = Plan(loader="auto", loader_workers=2)
    out, _ = _loader_edits(REENTERED, plan)
    assert "num_workers=2" in out and "persistent_workers" not in out
    _, notes = plan_edits(REENTERED, "x.py", plan, device="cuda")
    assert any(n.technique == "persistent-workers" and n.line == 15 for n in notes)
    plain = REENTERED.replace(b"evaluate(model, train_loader, 5)", b"pass")
    assert "persistent_workers=True" in _loader_edits(plain, plan)[0]
