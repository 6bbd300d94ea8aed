"""The folders of torchpace stand in one order: each imports only the folders below it (issue 31:
doctor <-> script, doctor <-> report, report <-> tune, script <-> tune and train <-> tune imported
each other, and script/trial.py <-> tune/worker.py made a file circle). Every import counts, at
module level or inside a function, as each is a dependency all the same."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "torchpace"

# Top first. The verbs' results are rendered by ``report``, which every verb may use; what several
# verbs need while a script runs is in ``runtime`` (patching, the stop signal, batches, user
# code, the step phases, a script's kind and work); ``train`` is prepare()/fit() and the plan.
LAYERS = (
    "doctor",
    "script",
    "tune",
    "report",
    "runtime",
    "train",
    "bench",
    "workloads",
    "speedups",
    "measure",
    "lint",
    "techniques",
    "catalog",
)
VERBS = ("doctor", "script", "tune", "report", "runtime", "train")
TOP = ("cli", "__main__", "__init__")  # the command line and the package's lazy attributes


def _imports(path: Path) -> set[str]:
    """The torchpace modules ``path`` imports, anywhere in it, as dotted names."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "torchpace":
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "torchpace")
    return found


def _folder_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (SRC / parts[1]).is_dir() else None


def _edges() -> dict[tuple[str, str], list[str]]:
    """(importing folder, imported folder) -> the files that import across."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if len(rel.parts) < 2:
            continue
        for module in _imports(path):
            target = _folder_of(module)
            if target is not None and target != rel.parts[0]:
                edges.setdefault((rel.parts[0], target), []).append(str(rel))
    return edges


def test_every_folder_has_a_place_in_the_order() -> None:
    folders = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS), f"place these in LAYERS: {sorted(folders ^ set(LAYERS))}"


def test_each_folder_imports_only_the_folders_below_it() -> None:
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = {
        f"{a} -> {b}": sorted(set(files))
        for (a, b), files in _edges().items()
        if rank[b] <= rank[a]
    }
    assert not upward, f"imports against the order {' -> '.join(LAYERS)}: {upward}"


def test_no_two_folders_import_each_other() -> None:
    edges = _edges()
    both = sorted({tuple(sorted(pair)) for pair in edges if pair[::-1] in edges})
    assert not both, both


def test_the_modules_at_the_top_of_the_package_use_no_verb() -> None:
    # _files, findings, recipes…: small pieces every verb reads; a verb in one of them would
    # make a circle through it
    bad = {}
    for path in sorted(SRC.glob("*.py")):
        if path.stem in TOP:
            continue
        verbs = sorted({_folder_of(m) for m in _imports(path)} & set(VERBS))
        if verbs:
            bad[path.name] = verbs
    assert not bad, bad


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    # the rule's own reader: a lazy import is a dependency too
    f = tmp_path / "m.py"
    f.write_text(
        "def f():\n    from torchpace.tune.search import tune\n    import torchpace.doctor\n"
    )
    assert _imports(f) == {
        "torchpace.tune.search",
        "torchpace.tune.search.tune",
        "torchpace.doctor",
    }
