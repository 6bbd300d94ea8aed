"""Numeric options are checked when the command line is read (issue 17): a bad value exits 2
with a message naming the option, before anything runs or is written."""

from __future__ import annotations

import pytest

from torchpace.cli import main


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fit", "examples/naive_cnn.py", "--steps", "0"], "--steps: must be at least 1, not 0"),
        (["fit", "examples/naive_cnn.py", "--steps", "-5"], "--steps: must be at least 1, not -5"),
        (["fit", "examples/naive_cnn.py", "--epochs", "0"], "--epochs: must be at least 1, not 0"),
        (["fit", "x.py", "--checkpoint-every", "0"], "--checkpoint-every: must be at least 1"),
        (["fit", "x.py", "--batch-size", "0"], "--batch-size: must be at least 1, not 0"),
        (["fit", "x.py", "--nproc", "0"], "--nproc: must be at least 1, not 0"),
        (["fit", "x.py", "--eval-every", "-1"], "--eval-every: must be at least 1, not -1"),
        (["bench", "--block", "0"], "--block: must be at least 1, not 0"),
        (["bench", "--steps", "0"], "--steps: must be at least 1, not 0"),
        (["bench", "--warmup", "-1"], "--warmup: must be at least 0, not -1"),
        (["doctor", "--warmup", "0", "x.py"], "--warmup: must be at least 1, not 0"),
        (["doctor", "--steps", "-1", "x.py"], "--steps: must be at least 0, not -1"),
        (["doctor", "--top", "-1", "x.py"], "--top: must be at least 0, not -1"),
        (["tune", "x.py", "--steps", "0"], "--steps: must be at least 1, not 0"),
        (["tune", "x.py", "--warmup", "0"], "--warmup: must be at least 1, not 0"),
        (["lint", "--jobs", "0"], "--jobs: must be at least 1, not 0"),
    ],
)
def test_bad_numbers_exit_2_naming_the_option(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_a_full_disk_met_while_working_is_a_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 17: a full disk in tune (appending a trial to the cache) was a traceback.
    import errno
    import os

    from torchpace.tune import command as tune_command

    def full(args: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/cache/tune/x/trials.jsonl")

    monkeypatch.setattr(tune_command, "run", full)
    assert main(["tune", "cnn"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "torchpace: error: No space left on device: /cache/tune/x/trials.jsonl "
        "(free some space and run it again)\n"
    )


def test_an_interrupt_while_the_verbs_load_is_a_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found by benchmarks/fault_injection.py: a SIGINT 3.6 s into `torchpace tune`, while the
    # parser imported the verbs' modules, ended the process by signal 2 with no message.
    from torchpace import cli

    def slow_imports(command: str | None = None) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", slow_imports)
    assert main(["tune", "cnn"]) == 130
    assert capsys.readouterr().err == "torchpace: interrupted\n"


def test_tune_with_too_few_steps_says_so_before_any_trial(
    tmp_path: object, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 17: `tune --steps 4` failed after 40 s of baseline trials, naming neither --steps
    # nor the minimum. The convergence guard needs a tail of steps: said up front.
    from torchpace.tune import search

    def no_trial(*args: object, **kwargs: object) -> None:
        raise AssertionError("a trial ran before the argument check")

    monkeypatch.setattr(search, "run_trial", no_trial)
    assert main(["tune", "cnn", "--steps", "4", "--warmup", "3", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--steps 4 with --warmup 3 is too few" in err and "give --steps 5 or more" in err
