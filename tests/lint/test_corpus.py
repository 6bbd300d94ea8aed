"""Real code: lint the installed torch package's own source with every rule, crash-free.

torch's ~2,300 files are the largest body of PyTorch code on every machine that runs these tests,
and the least like the fixtures. The linting runs in a subprocess so that it can check torch was
never imported (other tests in this process import it).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import warnings
from pathlib import Path

import pytest

from conftest import run_python

# ~150 files: under 5 s of linting on a 2-core Xeon VM, with the rules of 2026-11-22.
SAMPLE = 150

LINT = """
import json, sys
from torchpace.lint import RULES, FileResult, LintError, lint_paths

paths = sys.argv[1:]
results = lint_paths(paths, RULES)  # the full tuple: rules that are off by default too
assert len(results) == len(paths), (len(results), len(paths))
assert all(isinstance(r, (FileResult, LintError)) for r in results)
print(json.dumps({
    "errors": {r.path: r.cause for r in results if isinstance(r, LintError)},
    # A rule that crashes on a file is reported beside that file's other findings.
    "rule_crashes": [str(e) for r in results if isinstance(r, FileResult) for e in r.errors],
    "torch_imported": "torch" in sys.modules,
}))
"""


def torch_sources() -> list[Path]:
    """The installed torch package's ``.py`` files, sorted, found without importing torch."""
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    return sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix())


def rejected_by_ast(paths: list[Path]) -> set[str]:
    """The files that ``ast.parse`` itself cannot parse: the only ones allowed a LintError."""
    bad = set()
    for path in paths:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError, RecursionError):
            bad.add(str(path))
    return bad


def check_corpus(paths: list[Path]) -> None:
    proc = run_python("-c", LINT, *map(str, paths), timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]  # an exception escaped lint_paths
    out = json.loads(proc.stdout)
    assert not out["torch_imported"], "linting imported torch"
    errors: dict[str, str] = out["errors"]
    internal = {p: c for p, c in errors.items() if "internal error" in c}
    assert not internal, internal
    assert out["rule_crashes"] == []
    assert set(errors) == rejected_by_ast(paths), errors  # unparsable files, and only those


def test_torch_source_sample_lints_without_crashing() -> None:
    files = torch_sources()
    sample = files[:: math.ceil(len(files) / SAMPLE)]  # spread over every subpackage
    check_corpus(sample)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_all_of_torch_source_lints_without_crashing() -> None:
    check_corpus(torch_sources())
