"""The doctor's instruments run inside the user's calls and must never raise into them; what they
report leaves out the doctor's own work (its peak-FLOP/s matmuls)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from conftest import run_python
from torchpace.doctor import session as doctor_session
from torchpace.doctor.session import watch


def _train(steps: int) -> None:
    torch.manual_seed(0)
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 16)
    for _ in range(steps):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_a_script_using_the_new_tf32_api_runs_to_the_end_under_the_doctor(tmp_path: Path) -> None:
    # torch >= 2.9's per-backend setting, as Hugging Face's tf32=True sets it: afterwards the
    # legacy getters (allow_tf32, get_float32_matmul_precision) raise.
    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        pytest.skip(f"torch {torch.__version__} has no fp32_precision API")
    script = tmp_path / "tf32.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn

            torch.backends.cuda.matmul.fp32_precision = "tf32"
            model = nn.Linear(16, 4)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            x = torch.randn(32, 16)
            for _ in range(12):
                loss = model(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            print("script finished")
            """
        )
    )
    out = tmp_path / "out.json"
    proc = run_python(
        "-m", "torchpace", "doctor", "--no-lint", "--steps", "0", "--warmup", "2",
        "--json", str(out), str(script), timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "script finished" in proc.stdout
    result = json.loads(out.read_text())
    assert result["instrument_errors"] == []
    assert result["settings"]["tf32_matmul"] is True
    assert result["settings"]["float32_matmul_precision"] == "high"


def test_an_instrument_that_raises_becomes_a_note_and_the_script_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object, **kwargs: object) -> dict[str, object]:
        raise RuntimeError("planted failure in the settings snapshot")

    monkeypatch.setattr(doctor_session, "snapshot", broken)
    with watch(steps=0, warmup=2, lint=False) as w:
        _train(8)  # the snapshot runs inside the second optimizer.step()
    (note,) = w.result["instrument_errors"]
    assert "end of warm-up" in note and "planted failure in the settings snapshot" in note
    assert w.result["steps"]["kept"] >= 1


_COLD_CACHE_PROGRAM = """
import json, sys
import torch
from torch import nn
from torchpace.measure import env
from torchpace.doctor.session import watch

PLANT = 1 << 30  # 1 GiB, touched: what a cold cache's peak-FLOP/s matmuls cost on a GPU
calls = []

def planted(device, dtype, n, reps=5):
    calls.append(str(dtype))
    buf = torch.ones(PLANT // 4)
    buf.add_(1.0)
    return 1.0

env._matmul_tflops = planted
model = nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 64)
with watch(steps=4, warmup=2, lint=False) as w:
    for _ in range(7):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
print(json.dumps({"calls": calls, "memory": w.result["memory"], "plant": PLANT}))
"""


def test_peak_memory_leaves_out_the_peak_flops_measurement_of_a_cold_cache(tmp_path: Path) -> None:
    program = tmp_path / "cold.py"
    program.write_text(_COLD_CACHE_PROGRAM)
    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as m:
        m.setenv("TORCHPACE_CACHE_DIR", str(tmp_path / "cache"))  # nothing cached: measured
        proc = run_python(str(program), timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["calls"], "the peak FLOP/s were not measured: the plant never ran"
    # The process holds torch and a tiny model (a few hundred MiB); the plant alone is 1 GiB.
    assert out["memory"]["peak_bytes"] < out["plant"], out["memory"]


def test_a_run_is_a_cuda_run_by_the_trained_models_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A script that initialised CUDA (a GPU check, a library) but trains on the CPU.
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    s = doctor_session.Session(steps=0, warmup=1, stop=False)
    assert s.trained_device() == torch.device("cuda", 0)  # no model seen yet: CUDA's word
    s.start()
    try:
        model = nn.Linear(2, 2)
        model(torch.randn(3, 2)).sum().backward()  # the first step ends the warm-up
        assert s.trained_device() == torch.device("cpu")
        assert s.device == torch.device("cpu")  # CUDA initialised, yet a CPU run
    finally:
        s.finish()


def test_a_conv_net_on_cuda_is_judged_against_the_tf32_peak() -> None:
    from torchpace.doctor.result import _math_mode

    conv = {"autocast": [], "conv_model": True, "tf32_cudnn": True}
    assert _math_mode({**conv, "float32_matmul_precision": "highest"}, cuda=True) == "tf32"
    assert _math_mode({**conv, "tf32_cudnn": False}, cuda=True) == "fp32"
    assert _math_mode({**conv, "float32_matmul_precision": "highest"}, cuda=False) == "fp32"


def test_a_failing_forward_or_optimizer_hook_is_noted_once_and_training_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchpace.doctor import hooks

    def broken(opt: object) -> object:
        raise RuntimeError("planted failure reading the optimizer")

    monkeypatch.setattr(hooks, "_optimizer_info", broken)
    monkeypatch.setattr(
        hooks.ModuleHooks, "_observe", lambda self, first: (_ for _ in ()).throw(KeyError("x"))
    )
    with watch(steps=0, warmup=2, lint=False) as w:
        _train(8)
    notes = w.result["instrument_errors"]
    assert any("optimizer step's start" in n and "planted failure" in n for n in notes)
    assert len(notes) == len(set(notes)) <= 3  # each failing place once, not once per call


def test_the_phases_of_a_step_never_add_up_to_more_than_the_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bookkeeping at each step's end (here planted: 20 ms, as a loaded machine can stretch
    # it) was in the phase clock's time but not in the step's: "other" came to 1.34 of the step.
    import time

    from torchpace.doctor import hooks

    def slow_signature() -> object:
        time.sleep(0.02)
        return None

    monkeypatch.setattr(hooks, "compile_signature", slow_signature)
    with watch(steps=6, warmup=2, lint=False) as w:
        _train(20)
    shares = {p: b["share"] for p, b in w.result["breakdown"].items()}
    assert sum(shares.values()) == pytest.approx(1.0, abs=0.02), shares
    assert all(0 <= v <= 1 for v in shares.values()), shares
