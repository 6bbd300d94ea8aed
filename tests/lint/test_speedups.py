"""The shortcuts lint takes for speed read what the plain walks read (issue 32's speed goal).

Each is checked against its definition on the rule fixtures, which are cut from real training
code, and on torchpace's own sources: a shortcut that drops a node would change findings on
code nobody here has seen.
"""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import pytest

from torchpace.lint import parallel
from torchpace.lint.loops import LOOPS, _in_loop_bodies, _scopes, walk
from torchpace.lint.tree import all_nodes, children

HERE = Path(__file__).parent
SOURCES = sorted((HERE / "fixtures").glob("*.py")) + sorted(
    (HERE.parent.parent / "src" / "torchpace" / "lint").rglob("*.py")
)
NESTED = """
for epoch in range(3):
    for x, y in loader:
        while busy(x):
            step(x)
        else:
            done()
    def inner():
        for z in zs:
            use(z)
    [f(v) for v in vs]
    lam = lambda: g(epoch)
else:
    after()
for w in ws:
    pass
while cond():
    tick()
"""


# CPython shares one instance of each operator (``ast.Add()``) across a tree.
_SHARED = (ast.operator, ast.boolop, ast.cmpop, ast.unaryop)


def _trees() -> list[tuple[str, ast.Module]]:
    return [("nested", ast.parse(NESTED))] + [
        (p.name, ast.parse(p.read_text(encoding="utf-8"))) for p in SOURCES
    ]


@pytest.mark.parametrize(("name", "tree"), _trees(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_index_keeps_every_child_but_the_context_markers(name: str, tree: ast.Module) -> None:
    nodes, by_type = all_nodes(tree)
    expected = [n for n in ast.walk(tree) if not isinstance(n, ast.expr_context)]
    assert len(nodes) == len(expected), name
    for node in nodes:
        plain = [k for k in ast.iter_child_nodes(node) if not isinstance(k, ast.expr_context)]
        assert children(node) == plain, (name, ast.dump(node)[:80])
    assert sum(len(v) for v in by_type.values()) == len(nodes)


@pytest.mark.parametrize(("name", "tree"), _trees(), ids=lambda v: v if isinstance(v, str) else "")
def test_loop_bodies_are_walked_once_with_the_same_nodes(name: str, tree: ast.Module) -> None:
    all_nodes(tree)
    for scope in _scopes(tree):
        shared = {id(n) for n in ast.walk(scope) if isinstance(n, _SHARED)}
        by_definition = {
            id(node)
            for loop in walk(scope.body)
            if isinstance(loop, LOOPS)
            for node in walk(loop.body)
        }
        once = [id(n) for n in _in_loop_bodies(scope.body) if not isinstance(n, _SHARED)]
        assert len(once) == len(set(once)), name  # no node twice
        assert set(once) == by_definition - shared, name


def test_nested_loop_bodies_by_hand() -> None:
    tree = ast.parse(NESTED)
    all_nodes(tree)
    called = {ast.unparse(n.func) for n in _in_loop_bodies(tree.body) if isinstance(n, ast.Call)}
    # In a loop's body: its calls, a nested loop's header, body and else; not a nested
    # function's or lambda's body, not a loop's own else, not a loop's own header.
    assert called == {"busy", "step", "done", "f", "tick"}, called
    assert "after" not in called and "use" not in called and "g" not in called


def test_the_collector_is_restored_after_a_failing_lint() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), parallel.few_collections():
        assert gc.get_threshold() == parallel.GC_THRESHOLD
        assert gc.get_freeze_count() > 0
        raise RuntimeError("a rule crashed the worker")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_per_file_reading_runs_once_per_file_and_options() -> None:
    from torchpace.lint.engine import parse
    from torchpace.lint.rule import FileContext, per_file

    runs: list[tuple[str, bool]] = []

    @per_file
    def reading(ctx: FileContext, *, waits: bool = True) -> int:
        runs.append((ctx.path, waits))
        return len(runs)

    one, two = parse("one.py", b"x = 1\n"), parse("two.py", b"y = 2\n")
    assert isinstance(one, FileContext) and isinstance(two, FileContext)
    assert reading(one) == reading(one, waits=True) == 1  # the default is the same options
    assert reading(one, waits=False) == 2
    assert reading(two) == 3
    assert runs == [("one.py", True), ("one.py", False), ("two.py", True)]
