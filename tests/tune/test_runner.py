"""Trials in fresh processes (run_trial + the worker), and the results file they are kept in."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchpace.train.plan import Plan
from torchpace.tune.results import ResultsFile, cache_path, tune_fingerprint
from torchpace.tune.runner import run_trial
from torchpace.tune.trial import TrialResult, TrialSpec

# A linear model on random tensors, batch 8: a trial takes ~2.5 s, mostly importing torch.
RECIPE = """
import torch
from torch import nn
from torch.utils.data import TensorDataset

batch_size = 8
lr = 0.01


def model():
    return nn.Linear(16, 4)


def dataset(split="train", seed=0):
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(256, 16, generator=g), torch.randn(256, 4, generator=g))


def loss(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x), y)
"""


def _recipe(tmp_path: Path, name: str = "recipe", body: str = "") -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(RECIPE + body)
    return str(path)


def _trial(tmp_path: Path, recipe: str, *, timeout_s: float = 120, **kw: object) -> TrialResult:
    spec = TrialSpec(name="t", recipe=recipe, plan=Plan().to_dict(), warmup=2, steps=5, **kw)  # type: ignore[arg-type]
    return run_trial(spec, timeout_s=timeout_s, workdir=tmp_path / "work")


def test_a_trial_measures_steps_losses_throughput_and_memory(tmp_path: Path) -> None:
    r = _trial(tmp_path, _recipe(tmp_path))
    assert r.status == "ok", r.reason
    assert len(r.step_seconds) == 5  # the measured steps only
    assert len(r.losses) == 7  # every step's, warm-up included
    assert r.median_step_s is not None and r.median_step_s > 0
    assert r.q1_step_s is not None and r.q3_step_s is not None
    assert r.q1_step_s <= r.median_step_s <= r.q3_step_s
    assert r.samples_per_step == 8 and r.batch_size == 8
    assert r.samples_per_s is not None and r.samples_per_s > 0
    assert r.first_step_seconds is not None and r.first_step_seconds > 0
    assert r.compile_seconds is None  # the plan does not compile
    assert r.peak_memory_bytes is not None and r.peak_memory_bytes > 0
    assert r.wall_seconds > 0


def test_an_exception_in_the_recipe_is_a_failed_trial_with_its_message(tmp_path: Path) -> None:
    body = "\n\ndef loss(model, batch):\n    raise ValueError('planted failure\\nsecond line')\n"
    r = _trial(tmp_path, _recipe(tmp_path, body=body))
    assert r.status == "failed"
    assert r.reason == "ValueError: planted failure second line"


@pytest.mark.parametrize(
    ("call", "words"),
    [("os._exit(3)", "exited with code 3"), ("os.kill(os.getpid(), 9)", "killed by SIGKILL")],
)
def test_a_worker_that_dies_is_a_failed_trial_naming_how(
    tmp_path: Path, call: str, words: str
) -> None:
    body = f"\n\ndef loss(model, batch):\n    import os\n    print('dying')\n    {call}\n"
    r = _trial(tmp_path, _recipe(tmp_path, body=body))
    assert r.status == "failed"
    assert words in r.reason, r.reason


def test_a_trial_past_its_time_is_killed_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    body = (
        "\nimport subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(300)\n"
    )
    recipe = _recipe(tmp_path, body=body)
    # The timeout must pass after the recipe has started its child: 3 s does quietly, but
    # beside two CPU-bound processes and a suite the worker's imports alone took longer (no
    # child.pid in make test): each try doubles it, as long as the kill comes before the child.
    for timeout in (3, 6, 12, 24, 48):
        t0 = time.perf_counter()
        r = _trial(tmp_path, recipe, timeout_s=timeout)
        assert r.status == "timeout"
        assert f"{timeout} s" in r.reason
        assert time.perf_counter() - t0 < timeout + 150  # killed, not waited for (300 s)
        if pid_file.exists() and pid_file.read_text().strip():
            break
    else:
        pytest.fail("the trial never reached its child in 48 s")
    assert _gone(int(pid_file.read_text()))  # the whole process group went


def _gone(pid: int) -> bool:
    """Dead, or a zombie waiting to be reaped by whoever adopted it (SIGKILL is asynchronous)."""
    for _ in range(50):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def test_a_peak_over_the_memory_budget_is_an_oom(tmp_path: Path) -> None:
    r = _trial(tmp_path, _recipe(tmp_path), memory_budget_bytes=1000)
    assert r.status == "oom"
    assert r.peak_memory_bytes is not None
    assert f"{r.peak_memory_bytes:,} bytes" in r.reason and "budget of 1,000 bytes" in r.reason


def test_a_loader_only_trial_times_batches_without_a_model_step(tmp_path: Path) -> None:
    r = _trial(tmp_path, _recipe(tmp_path), loader_only=True)
    assert r.status == "ok", r.reason
    assert len(r.step_seconds) == 5 and r.losses == ()
    assert r.samples_per_step == 8
    assert r.samples_per_s is not None and r.samples_per_s > 0


def _result(key: str, extra_bytes: int = 0) -> TrialResult:
    return TrialResult(
        key=key, name=key, status="ok", losses=(1.0, 0.5), extra={"pad": "x" * extra_bytes}
    )


def test_results_round_trip_and_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    results = ResultsFile(tmp_path / "sub" / "trials.jsonl")
    assert results.load() == {} and results.skipped == 0
    results.append(_result("a"))
    results.append(_result("b"))
    assert results.load() == {"a": _result("a"), "b": _result("b")}
    with results.path.open("ab") as f:  # a write killed half-way
        f.write(b'{"key": "c", "name": "c", "sta')
    assert set(results.load()) == {"a", "b"} and results.skipped == 1
    results.append(_result("d"))  # goes on a line of its own, after the torn one
    assert set(results.load()) == {"a", "b", "d"} and results.skipped == 1


def test_appends_from_two_processes_do_not_interleave(tmp_path: Path) -> None:
    path, ready, go = tmp_path / "trials.jsonl", tmp_path / "ready", tmp_path / "go"
    n, size = 150, 20_000  # lines far longer than a pipe's atomic 4 KiB
    code = (
        "import os, sys, time\n"
        "from torchpace.tune.results import ResultsFile\n"
        "from torchpace.tune.trial import TrialResult\n"
        f"open({str(ready)!r}, 'w').close()\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.001)\n"
        f"f = ResultsFile({str(path)!r})\n"
        f"for i in range({n}):\n"
        f"    f.append(TrialResult(key=f'child{{i}}', name='c', status='ok', "
        f"extra={{'pad': 'y' * {size}}}))\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    results = ResultsFile(path)
    while not ready.exists() and child.poll() is None:  # both start appending together
        time.sleep(0.001)
    go.touch()
    for i in range(n):
        results.append(_result(f"parent{i}", size))
    assert child.wait(timeout=60) == 0
    found = results.load()
    assert results.skipped == 0
    assert len(found) == 2 * n
    lines = path.read_bytes().splitlines()
    assert len(lines) == 2 * n and all(json.loads(line) for line in lines)


def test_the_fingerprint_follows_the_recipe_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = _recipe(tmp_path)
    first = tune_fingerprint(recipe, device="cpu")
    assert tune_fingerprint(recipe, device="cpu") == first
    Path(recipe).write_text(RECIPE + "\n# a changed line\n")
    assert tune_fingerprint(recipe, device="cpu") != first
    Path(recipe).write_text(RECIPE)
    assert tune_fingerprint(recipe, device="cpu") == first
    assert tune_fingerprint("cnn", device="cpu") != first  # a built-in: its module's source
    monkeypatch.setenv("TORCHPACE_CACHE_DIR", str(tmp_path / "cache"))
    assert cache_path(first) == tmp_path / "cache" / "tune" / first / "trials.jsonl"


def test_a_recipe_may_build_its_own_loader(tmp_path: Path) -> None:
    """``loaders(batch_size, **loader_kw)`` in place of ``dataset``: its loader is trained."""
    import torch

    from torchpace.recipes import load_recipe
    from torchpace.train.build import build

    path = tmp_path / "own_loader.py"
    path.write_text(
        "import torch\nfrom torch import nn\nbatch_size = 4\nlr = 0.1\n"
        "def model():\n    return nn.Linear(2, 1)\n"
        "def loaders(batch_size, **loader_kw):\n"
        "    data = torch.utils.data.TensorDataset(torch.randn(12, 2), torch.randn(12, 1))\n"
        "    return torch.utils.data.DataLoader(data, batch_size=batch_size, shuffle=True,"
        " **loader_kw)\n"
        "def loss(model, batch):\n    x, y = batch\n    return ((model(x) - y) ** 2).mean()\n"
    )
    recipe = load_recipe(str(path))
    _, _, loader = build(recipe, seed=3)
    _, _, again = build(recipe, seed=3)
    assert loader.batch_size == 4 and len(loader) == 3
    first = [b[0] for b in loader]
    assert all(torch.equal(a, b[0]) for a, b in zip(first, again, strict=True))  # seeded shuffle


PARENT = """
import sys
from pathlib import Path
from torchpace.train.plan import Plan
from torchpace.tune.command import _sigterm_ends_trials
from torchpace.tune.runner import run_trial
from torchpace.tune.trial import TrialSpec

spec = TrialSpec(name="t", recipe=sys.argv[1], plan=Plan().to_dict(), warmup=2, steps=5)
with _sigterm_ends_trials():
    run_trial(spec, timeout_s=300, workdir=Path(sys.argv[2]))
"""


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_a_tune_killed_from_outside_takes_its_trial_with_it(
    tmp_path: Path, signal_name: str
) -> None:
    # Issue 17: SIGTERM or SIGKILL of `tune` left the trial worker (its own session) running,
    # with no parent. SIGTERM now unwinds like Ctrl-C and kills the worker's group; after a
    # SIGKILL the worker sees its parent gone and kills its own group.
    import os
    import signal

    pid_file = tmp_path / "child.pid"
    body = (
        "\nimport subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(300)\n"
    )
    recipe = _recipe(tmp_path, body=body)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, recipe, str(tmp_path / "work")])
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.1)
    os.kill(parent.pid, getattr(signal, signal_name))
    code = parent.wait(timeout=30)
    assert code == (143 if signal_name == "SIGTERM" else -9)
    assert _gone(int(pid_file.read_text()))


@pytest.mark.parametrize(
    "line",
    [
        "[1, 2]",
        "null",
        '"text"',
        '{"key": 5, "name": "t", "status": "ok"}',
        '{"key": "k", "name": "t", "status": "done"}',
        '{"key": "k", "name": "t", "status": "ok", "losses": "abc"}',
        '{"key": "k", "name": "t", "status": "ok", "median_step_s": "fast"}',
        '{"key": "k", "name": "t", "status": "ok", "batch_size": 8.5}',
        '{"key": "k", "name": "t", "status": "ok", "colour": "red"}',
    ],
)
def test_a_hostile_cache_line_is_skipped_not_a_crash(tmp_path: Path, line: str) -> None:
    # Issue 17: a non-object or wrong-typed line made every later tune fail with a traceback.
    good = TrialResult("g", "good", "ok", losses=(1.0, 0.5), batch_size=8)
    path = tmp_path / "trials.jsonl"
    path.write_text(line + "\n" + json.dumps(good.to_dict()) + "\n")
    results = ResultsFile(path)
    assert results.load() == {"g": good}
    assert results.skipped == 1
