"""Which optimizers have a fused kernel, and where, is said once (catalog.FUSED_KERNELS) and read
by the doctor, prepare()'s verb, the tune, apply's edits and lint (issue 31: five copies disagreed:
the doctor said Adagrad fuses on CUDA, the verb CPU only, and the tune and lint left it out)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from torchpace.catalog import FUSED_KERNELS, fused_on


def test_the_table_is_torchs() -> None:
    # every class named exists, and takes fused=True on the devices the table gives (CPU here)
    for name, devices in FUSED_KERNELS.items():
        cls = getattr(torch.optim, name)
        if "cpu" in devices:
            cls([torch.nn.Parameter(torch.ones(2))], lr=0.1, fused=True)
    assert fused_on("Adagrad", "cpu") and not fused_on("Adagrad", "cuda:0")
    assert fused_on("AdamW", "cuda") and not fused_on("RMSprop", "cpu")


def test_the_doctor_reads_it() -> None:
    from torchpace.doctor.evidence import Evidence
    from torchpace.doctor.measured_patterns import fused_skip
    from torchpace.doctor.run_facts import OptimizerSetting, RunSummary, Settings

    ev = Evidence(
        summary=RunSummary(0.1, {}, None, measured_steps=10, compiled_steps=0),
        settings=Settings(optimizers=(OptimizerSetting("Adagrad", False, None),)),
        loaders=(),
        device="cuda",
        peaks={},
        flops_per_step=None,
        forward_site=None,
    )
    assert fused_skip(ev) == "Adagrad has no fused kernel on cuda"
    assert fused_skip(dataclasses.replace(ev, device="cpu")) is None


def test_the_verb_reads_it() -> None:
    from torchpace.speedups import optim

    assert {c.__name__: d for c, d in optim._FUSED_DEVICES.items()} == FUSED_KERNELS


def test_the_tune_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchpace.tune import candidates
    from torchpace.tune.candidates import from_facts

    monkeypatch.setattr(candidates, "bf16_supported", lambda device: False)  # no CUDA here

    facts = {"has_conv": False, "has_conv_bias": False, "has_attention": False}
    for device, offered in (("cpu", True), ("cuda", False)):
        yes, no = from_facts({**facts, "optimizers": ["Adagrad"]}, torch.device(device))
        assert ("fused optimizer" in [c.name for c in yes]) is offered, (device, no)


def test_applys_edits_read_it() -> None:
    from torchpace.script.edits import plan_edits
    from torchpace.train.plan import Plan

    source = b"import torch\nopt = torch.optim.Adagrad(params, lr=0.1)\n"
    for device, edited in (("cpu", True), ("cuda", False)):
        findings, _ = plan_edits(source, "train.py", Plan(fused_optimizer=True), device=device)
        assert ("fused-optimizer" in [f.technique for f in findings]) is edited, device


def test_lint_reads_it() -> None:
    from torchpace.lint.rules import memory

    # lint does not know the device: the kernels on every device
    assert {"torch.optim.Adam", "torch.optim.AdamW", "torch.optim.SGD"} == memory._FUSABLE


def test_apply_and_lint_agree_on_set_to_none_for_a_loop_that_adds_into_grad(
    tmp_path: Path,
) -> None:
    # Issue 31: lint's TP402 stayed silent on a file adding into .grad; apply made the edit and
    # the script failed with `None += Tensor`. One test of it now serves both.
    from torchpace.lint.engine import lint_file
    from torchpace.lint.rules import RULES
    from torchpace.script.edits import plan_edits
    from torchpace.train.plan import Plan

    adds = (
        b"import torch\nfor p, g in zip(params, grads):\n    p.grad += g\n"
        b"opt.zero_grad(set_to_none=False)\n"
    )
    plain = b"import torch\nopt.zero_grad(set_to_none=False)\n"
    for source, flagged in ((adds, False), (plain, True)):
        findings, _ = plan_edits(source, "train.py", Plan(grad_set_to_none=True))
        assert ("grad-set-to-none" in [f.technique for f in findings]) is flagged
        path = tmp_path / "train.py"
        path.write_bytes(source)
        result = lint_file(str(path), [r for r in RULES if r.code == "TP402"])
        assert (len(result.findings) == 1) is flagged  # type: ignore[union-attr]
