from __future__ import annotations

import json

import pytest

from conftest import run_python
from torchpace import __version__
from torchpace.cli import build_parser, main

SUBCOMMANDS = (
    "techniques",
    "env",
    "bench",
    "demo",
    "lint",
    "rules",
    "rule",
    "fit",
    "tune",
    "report",
)


def test_version_via_python_m() -> None:
    proc = run_python("-m", "torchpace", "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"torchpace {__version__}"


def test_every_subcommand_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    listed = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(SUBCOMMANDS) <= set(listed)
    for name in listed:
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        assert exc.value.code == 0
        assert "usage: torchpace" in capsys.readouterr().out


def test_techniques_lists_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["techniques", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"channels-last", "amp-bf16", "loader-workers"} <= {t["id"] for t in data}


def test_env_json_without_peak(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--json", "--no-peak", "--device", "cpu"]) == 0
    fp = json.loads(capsys.readouterr().out)
    assert fp["device"] == "cpu" and fp["cores"] >= 1 and fp["torch_version"]
    assert fp["peak_tflops_fp32"] is None


def test_unknown_workload_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "mnist"])
    assert exc.value.code == 2
    assert "invalid choice: 'mnist'" in capsys.readouterr().err


def test_bad_bench_arguments_name_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "cnn", "--steps", "3", "--block", "4"]) == 2
    assert "--steps must be at least two blocks" in capsys.readouterr().err
    assert main(["bench", "cnn", "--compare", "naive,fastest", "--steps", "8"]) == 2
    assert "unknown configuration" in capsys.readouterr().err


def test_missing_cuda_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the error path is for machines without it")
    assert main(["env", "--device", "cuda", "--no-peak"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_lint_imports_no_other_verb(tmp_path) -> None:
    """`torchpace lint` starts without the doctor's, tune's or report's modules (start-up time
    on a large corpus); an unknown command still names every verb."""
    script = tmp_path / "train.py"
    script.write_text("import torch\nx = torch.zeros(1)\n")
    probe = (
        "import sys\n"
        "from torchpace.cli import main\n"
        f"rc = main(['lint', {str(script)!r}])\n"
        "verbs = [m for m in sys.modules if m.split('.')[1:2] in (['doctor'], ['tune'],"
        " ['report'], ['script'], ['train'])]\n"
        "print(rc, sorted(verbs))\n"
    )
    proc = run_python("-c", probe)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "0 []", proc.stdout

    proc = run_python("-m", "torchpace", "lnt")
    assert proc.returncode == 2
    for verb in ("doctor", "tune", "report", "compare", "apply", "lint"):
        assert verb in proc.stderr
