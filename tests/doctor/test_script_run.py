"""Running a script under the doctor: it sees what ``python script.py args`` would show it, the
doctor's instruments are all taken out afterwards, and the command line turns the script's
failures into exit statuses and messages a user can act on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.optim import optimizer as optimizer_module
from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _BaseDataLoaderIter

from conftest import run_python
from torchpace.doctor import script
from torchpace.doctor.syncs import TENSOR_SYNCS

SCRIPTS = Path(__file__).resolve().parent / "scripts"
DOCTOR_DIR = Path(script.__file__).parent


def _line(path: Path, marker: str) -> int:
    (line,) = [
        i
        for i, text in enumerate(path.read_text().splitlines(), 1)
        if text.endswith(f"# MARK: {marker}")
    ]
    return line


def _instruments() -> dict[str, Any]:
    """Everything the doctor patches or hooks, by identity or count."""
    patched = [
        *((torch.Tensor, name) for name in TENSOR_SYNCS),
        (torch.Tensor, "backward"),
        (torch.autograd, "backward"),
        (torch.optim.Optimizer, "__init__"),
        (DataLoader, "__init__"),
        (DataLoader, "__iter__"),
        (_BaseDataLoaderIter, "__next__"),
    ]
    module_hooks = nn.modules.module
    return {
        **{f"{owner.__name__}.{name}": getattr(owner, name) for owner, name in patched},
        "optimizer hooks": (
            len(optimizer_module._global_optimizer_pre_hooks),
            len(optimizer_module._global_optimizer_post_hooks),
        ),
        "module hooks": (
            len(module_hooks._global_forward_pre_hooks),
            len(module_hooks._global_forward_hooks),
        ),
        "tracer": sys.gettrace(),
    }


def test_the_script_runs_as_python_would_and_everything_is_restored(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(SCRIPTS.parent)  # so the script can be given by a relative path
    before = _instruments()
    argv, path0, main = list(sys.argv), sys.path[0], sys.modules["__main__"]

    ran = script.run("scripts/semantics.py", ["--flag", "value"], steps=2, warmup=1, lint=False)

    out = capfd.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("SEEN ")]
    assert json.loads(line.removeprefix("SEEN ")) == {
        "name": "__main__",
        "argv": ["scripts/semantics.py", "--flag", "value"],  # argv[0] as given
        "path0": str(SCRIPTS),
        "cwd": str(SCRIPTS.parent),
        "main_is_me": True,
    }
    assert (ran.exit_code, ran.outcome) == (0, "stopped after the measured steps")
    assert ran.result is not None and ran.result["steps"]["kept"] == 2
    assert ran.result["target"]["args"] == ["--flag", "value"]
    assert (sys.argv, sys.path[0], sys.modules["__main__"]) == (argv, path0, main)
    assert _instruments() == before


# -- the command line -----------------------------------------------------------------------------
def _doctor(*args: str) -> subprocess.CompletedProcess[str]:
    # 600 s: far over a run's few seconds, far under the hour a blocked script would take
    return run_python("-m", "torchpace", "doctor", *args, timeout=600)


def test_a_missing_script_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    proc = _doctor(str(missing))
    assert proc.returncode == 2
    assert f"script not found: {missing}" in proc.stderr


def test_a_script_that_does_not_parse_is_named_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\ndef main(:\n    pass\n")
    proc = _doctor(str(bad))
    assert proc.returncode == 2
    assert f"{bad}:3: the script does not parse" in proc.stderr


def test_a_script_error_shows_its_own_traceback_and_the_partial_report(tmp_path: Path) -> None:
    target = SCRIPTS / "raises.py"
    report = tmp_path / "report.json"
    html = tmp_path / "report.html"
    proc = _doctor(
        "--warmup", "1", "--steps", "50", "--json", str(report), "--html", str(html), str(target)
    )  # fmt: skip
    assert proc.returncode == 1
    raise_line, loop_line = _line(target, "raise"), _line(target, "loop")
    lines = proc.stderr.splitlines()
    # The first frame is the script's own, as under `python raises.py`: no runner frames above.
    assert lines[:2] == [
        "Traceback (most recent call last):",
        f'  File "{target}", line {loop_line}, in <module>',
    ]
    assert f'  File "{target}", line {raise_line}, in __getitem__' in lines
    assert lines[-1] == "RuntimeError: planted failure at sample 40"
    # The error came up through the doctor's timed DataLoader.__next__: its frame is left out.
    assert str(DOCTOR_DIR) not in proc.stderr
    assert "loaders.py" not in proc.stderr
    # 40 samples in batches of 4: 10 optimizer steps, so 1 warm-up, 1 probe and 8 measured.
    result = json.loads(report.read_text())
    assert result["outcome"] == "the script raised RuntimeError"
    assert result["run"]["optimizer_steps_seen"] == 10
    assert result["steps"]["measured"] == 8
    # The partial report is a page too, saying how the run ended.
    assert "the script raised RuntimeError" in html.read_text()


def test_the_scripts_exit_status_is_the_doctors(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    proc = _doctor(
        "--warmup", "1", "--steps", "50", "--json", str(report), str(SCRIPTS / "exits.py")
    )
    assert proc.returncode == 3
    assert "the script exited with status 3" in " ".join(
        proc.stdout.split()
    )  # the report was printed
    # sys.exit(3) after optimizer step 8: 1 warm-up, 1 probe and 6 measured steps.
    assert json.loads(report.read_text())["steps"]["measured"] == 6


def test_a_script_that_never_steps_an_optimizer_says_so() -> None:
    proc = _doctor(str(SCRIPTS / "no_step.py"))
    assert proc.returncode == 1
    assert "no_step.py done" in proc.stdout  # the script ran to its end
    assert "no training step observed" in proc.stderr
    assert "5 backward() calls" in proc.stderr


def test_first_step_timeout_interrupts_a_blocked_script() -> None:
    # The script blocks in one time.sleep(3600): only a real signal can interrupt it (without
    # one, _doctor's 600 s timeout fails the test).
    proc = _doctor("--first-step-timeout", "2", str(SCRIPTS / "sleeps_forever.py"))
    assert proc.returncode == 1
    assert "no training step and no backward() observed in 2 s" in proc.stderr
    assert proc.stdout == "sleeping\n"  # the script's own output, not swallowed


def test_first_step_timeout_works_when_sigint_was_ignored_at_start() -> None:
    # A process started in the background (`cmd &`, nohup) inherits SIGINT ignored; the
    # watchdog's signal must still interrupt the sleeping script.
    import signal

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchpace",
            "doctor",
            "--first-step-timeout",
            "2",
            str(SCRIPTS / "sleeps_forever.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "no training step and no backward() observed in 2 s" in proc.stderr


def test_sigterm_ends_the_run_with_what_was_measured(tmp_path: Path) -> None:
    # Issue 17: SIGTERM (a scheduler's preemption, `kill`) ended the doctor with nothing written,
    # where Ctrl-C writes the steps measured so far. A script that swallows Exception and
    # KeyboardInterrupt does not swallow it.
    import signal

    marker = tmp_path / "twenty-steps"
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom pathlib import Path\n"
        "model = torch.nn.Linear(32, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "for step in range(10**7):\n"
        "    try:\n"
        "        opt.zero_grad()\n        model(torch.randn(64, 32)).sum().backward()\n"
        "        opt.step()\n"
        f"        if step == 20:\n            Path({str(marker)!r}).touch()\n"
        "    except (Exception, KeyboardInterrupt):\n        pass\n"
    )
    out = tmp_path / "out.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torchpace",
            "doctor",
            "--steps",
            "0",
            "--no-lint",
            "--json",
            str(out),
            str(script),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    result = json.loads(out.read_text())
    assert result["steps"]["measured"] >= 15


def test_the_watchdogs_stop_a_stuck_script_even_one_that_swallows_interrupts(
    tmp_path: Path,
) -> None:
    # Issue 17: after its first step a stuck script hung the doctor for ever, and a script that
    # catches KeyboardInterrupt swallowed the first-step watchdog.
    stuck = tmp_path / "stuck.py"
    stuck.write_text(
        "import time, torch\n"
        "model = torch.nn.Linear(4, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for step in range(6):\n"
        "    opt.zero_grad()\n    model(torch.randn(8, 4)).sum().backward()\n    opt.step()\n"
        "while True:\n"
        "    try:\n        time.sleep(1000)\n    except (Exception, KeyboardInterrupt):\n"
        "        pass\n"
    )
    out = tmp_path / "out.json"
    # stuck for ever without the watchdogs: the 600 s timeout fails the test then
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchpace",
            "doctor",
            "--steps",
            "0",
            "--warmup",
            "1",
            "--step-timeout",
            "3",
            "--no-lint",
            "--json",
            str(out),
            str(stuck),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    # It stops after step 6, where the script hangs; on a machine so busy that a step of its
    # own (the probe's FLOP count) took over 3 s, after an earlier one (seen in a make test
    # beside two CPU-bound processes): either way the run ends and what was seen is written.
    said = re.search(r"no optimizer step for 3 s after step (\d+)", proc.stdout + proc.stderr)
    assert said and 1 <= int(said.group(1)) <= 6, proc.stderr[-2000:]
    assert json.loads(out.read_text())["run"]["optimizer_steps_seen"] >= int(said.group(1))
    never = tmp_path / "never.py"
    never.write_text(
        "import time\nwhile True:\n    try:\n        time.sleep(1000)\n"
        "    except (Exception, KeyboardInterrupt):\n        pass\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "torchpace", "doctor", "--first-step-timeout", "2", str(never)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "no training step and no backward() observed in 2 s" in proc.stderr


def _mark(name: str, marker: str) -> int:
    lines = (SCRIPTS / name).read_text().splitlines()
    (line,) = [i for i, text in enumerate(lines, 1) if text.endswith(f"# MARK: {marker}")]
    return line


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_training_in_child_processes_is_named_and_the_children_are_left_alone(start: str) -> None:
    # Issue 18: Hogwild trains in processes started with torch.multiprocessing; the doctor saw no
    # step. Forked children inherited the instruments, whose DoctorStop at the parent's step
    # count would have ended each child's training with a traceback.
    proc = _doctor("--first-step-timeout", "60", str(SCRIPTS / "hogwild.py"), "--start", start)
    assert "hogwild done, child exit codes [0, 0]" in proc.stdout, proc.stderr[-2000:]
    assert "DoctorStop" not in proc.stderr
    line = _mark("hogwild.py", "start")
    assert f"2 processes running train (started at hogwild.py:{line}, {start})" in proc.stderr
    assert "The doctor measures only the process it runs in, so it measured no step" in proc.stderr
    assert "ended the processes" not in proc.stderr  # the script joined them: none was left
    assert proc.returncode == 1  # no step measured in this process


def test_a_non_finite_figure_is_written_as_null_not_lost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from torchpace.doctor.command import _strict_json

    text = _strict_json({"a": {"b": [1.0, float("inf")]}, "c": float("nan"), "d": "x"})
    assert json.loads(text) == {"a": {"b": [1.0, None]}, "c": None, "d": "x"}
    assert "result.a.b[1], result.c" in capsys.readouterr().err


def test_the_step_limit_starts_at_the_first_backward_not_at_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found beside two CPU-bound processes: a 3 s --step-timeout ended a run whose imports took
    # longer, "backward() ran 0 times in 3 s", though the first-step limit was 60 s.
    from types import SimpleNamespace

    from torchpace.doctor import script

    now = [0.0]
    monkeypatch.setattr(script.time, "monotonic", lambda: now[0])
    rec = SimpleNamespace(boundaries=0, backward_calls=0)
    stalled = script._stall_watch(SimpleNamespace(rec=rec), 60.0, 3.0)  # type: ignore[arg-type]
    now[0] = 10.0  # importing still: past the step limit, inside the first-step limit
    assert stalled() is None
    now[0] = 61.0
    assert stalled() == "no training step and no backward() observed in 60 s"
    rec.backward_calls = 1  # the first backward: now the step limit runs
    assert stalled() is None
    now[0] = 63.0
    assert stalled() is None
    now[0] = 64.5
    assert (stalled() or "").startswith("backward() ran 1 times in 4 s, but no optimizer.step()")
