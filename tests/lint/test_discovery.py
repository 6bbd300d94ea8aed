"""Which files `torchpace lint` reads: sorted walks, excludes, .gitignore, named files."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpace.lint.discovery import discover
from torchpace.lint.results import LintError


def _tree(root: Path, *files: str) -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_walk_is_recursive_sorted_and_picks_python_and_notebooks(tmp_path: Path) -> None:
    _tree(tmp_path, "b.py", "a/z.py", "a/b/c.py", "n.ipynb", "stub.pyi", "data.txt", "A.py")
    assert discover(["."]) == ["A.py", "a/b/c.py", "a/z.py", "b.py", "n.ipynb"]


def test_default_excludes_apply_inside_a_walk_but_not_to_a_named_directory(
    tmp_path: Path,
) -> None:
    _tree(tmp_path, "src/m.py", ".venv/lib/x.py", "src/build/gen.py", "node_modules/y.py")
    assert discover(["."]) == ["src/m.py"]
    assert discover(["src/build"]) == ["src/build/gen.py"]


def test_tests_and_templates_are_skipped_in_a_walk_and_said(tmp_path: Path) -> None:
    # Lightning and accelerate (benchmarks/realworld/): most findings were in tests/ and in
    # bug-report templates, none of them about training code.
    _tree(
        tmp_path,
        "train.py",
        "tests/test_loop.py",
        "pkg/test_utils/helpers.py",
        "pkg/test_model.py",
        "pkg/model_test.py",
        "conftest.py",
        "examples/bug_report/bug_report_model.py",
        "latest.py",
    )
    skipped: list[str] = []
    assert discover(["."], skipped=skipped) == ["latest.py", "train.py"]
    assert sorted(skipped) == [
        "conftest.py",
        "examples/bug_report/",
        "pkg/model_test.py",
        "pkg/test_model.py",
        "pkg/test_utils/",
        "tests/",
    ]
    assert discover(["tests/test_loop.py"]) == ["tests/test_loop.py"]  # named: linted
    assert len(discover(["."], skip=[])) == 8
    assert discover(["."], skip=["train.py", "tests/"]) == [
        "conftest.py",
        "examples/bug_report/bug_report_model.py",
        "latest.py",
        "pkg/model_test.py",
        "pkg/test_model.py",
        "pkg/test_utils/helpers.py",
    ]


def test_the_code_copies_runs_leave_in_their_log_folders_are_skipped(tmp_path: Path) -> None:
    # PointNet++ commits log/<task>/<run>/<model>.py, a copy train_*.py writes beside each
    # checkpoint and nothing imports (issue 32: five false findings); wandb keeps the same
    _tree(
        tmp_path,
        "models/pointnet2_cls_msg.py",
        "log/classification/pointnet2_msg_normals/pointnet2_cls_msg.py",
        "experiments/logs/run1/train.py",
        "wandb/run-20240101_000000-abc/files/code/train.py",
        "logging_utils.py",
        "catalog/log.py",
    )
    skipped: list[str] = []
    assert discover(["."], skipped=skipped) == [
        "catalog/log.py",
        "logging_utils.py",
        "models/pointnet2_cls_msg.py",
    ]
    assert sorted(skipped) == ["experiments/logs/", "log/", "wandb/"]


def test_benchmarks_are_skipped_but_a_named_one_is_linted(tmp_path: Path) -> None:
    # Code that times a setting on purpose: ignite's cifar100_amp_benchmark/benchmark_fp32.py is
    # the float32 baseline of an AMP comparison, pycls's core/benchmark.py a synchronizing timing
    # loop (issue 32: 9 of 13 findings in such files false by the corpus's verdict rules).
    _tree(
        tmp_path,
        "train.py",
        "benchmarks/fp8/utils.py",
        "examples/amp_benchmark/benchmark_fp32.py",
        "pycls/core/benchmark.py",
        "pycls/core/benchmarking_notes.py",
        "bench.py",
        "benchmark/run.py",
        "examples/amp_benchmark/main.py",
    )
    skipped: list[str] = []
    assert discover(["."], skipped=skipped) == [
        "bench.py",
        "examples/amp_benchmark/main.py",
        "train.py",
    ]
    assert sorted(skipped) == [
        "benchmark/",
        "benchmarks/",
        "examples/amp_benchmark/benchmark_fp32.py",
        "pycls/core/benchmark.py",
        "pycls/core/benchmarking_notes.py",
    ]
    assert discover(["pycls/core/benchmark.py"]) == ["pycls/core/benchmark.py"]  # named: linted


def test_learning_rate_finders_are_skipped(tmp_path: Path) -> None:
    # pytorch-cifar100's lr_finder.py: a short sweep run once to pick a rate before the training
    # run (issue 32, change-29: its 4 findings judged negligible); the training script is linted
    _tree(tmp_path, "train.py", "lr_finder.py", "tools/torch_lr_finder_v2.py", "finder.py")
    skipped: list[str] = []
    assert discover(["."], skipped=skipped) == ["finder.py", "train.py"]
    assert sorted(skipped) == ["lr_finder.py", "tools/torch_lr_finder_v2.py"]


def test_gitignore_files_nested_with_negation(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        "keep.py",
        "gen_a.py",
        "out/x.py",
        "pkg/gen_b.py",
        "pkg/gen_keep.py",
        "pkg/local.py",
        "pkg/sub/local.py",
    )
    (tmp_path / ".gitignore").write_text("# generated\ngen_*.py\nout/\n")
    (tmp_path / "pkg" / ".gitignore").write_text("!gen_keep.py\n/local.py\n")
    assert discover(["."]) == ["keep.py", "pkg/gen_keep.py", "pkg/sub/local.py"]


def test_gitignore_above_the_walked_directory_applies_inside_a_git_repository(
    tmp_path: Path,
) -> None:
    _tree(tmp_path, "src/a.py", "src/gen/b.py", "src/gen/c.py")
    (tmp_path / ".gitignore").write_text("src/gen/\n")
    (tmp_path / "src" / ".gitignore").write_text("!gen/c.py\n")  # cannot undo an ignored dir
    assert discover(["src"]) == ["src/a.py", "src/gen/b.py", "src/gen/c.py"]  # no repository
    (tmp_path / ".git" / "info").mkdir(parents=True)
    assert discover(["src"]) == ["src/a.py"]
    assert discover(["src/gen"]) == ["src/gen/b.py", "src/gen/c.py"]  # named, so linted
    (tmp_path / ".git" / "info" / "exclude").write_text("a.py\n")
    assert discover(["src"]) == []


def test_a_named_file_is_linted_even_when_ignored_and_each_file_once(tmp_path: Path) -> None:
    _tree(tmp_path, "gen_a.py", "build/b.py", "script")
    (tmp_path / ".gitignore").write_text("gen_*.py\n")
    assert discover(["gen_a.py", "build/b.py", "script", ".", "./gen_a.py"]) == [
        "gen_a.py",
        "build/b.py",
        "script",
    ]


def test_missing_and_special_paths_are_errors_in_place(tmp_path: Path) -> None:
    _tree(tmp_path, "a.py")
    assert discover(["nope.py", "a.py", "/dev/null"]) == [
        LintError("nope.py", "no such file or directory"),
        "a.py",
        LintError("/dev/null", "not a regular file"),
    ]
