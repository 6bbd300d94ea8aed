"""A parsed file's nodes, indexed once: every node, the nodes by class, and each node's children.

``ast.iter_child_nodes`` rebuilds a node's children from its fields on every call; lint walks
the same subtrees many times (each loop, scope and rule), and that rebuilding was the largest
share of lint time on public training code (benchmarks/README.md, "Lint speed"). The index keeps
each node's children on the node (``_tp_kids``), in field order and without the ``Load``/
``Store`` context markers, which no rule reads as nodes. Nodes built after indexing fall back to
``ast.iter_child_nodes``.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from typing import Any

_KIDS = "_tp_kids"


# Fields that never hold a node (identifiers, numbers, strings, constants; by Python's ASDL),
# and the context markers: the index reads only the other fields of each class.
_LEAF_FIELDS = frozenset(
    {
        "ctx",
        "id",
        "attr",
        "arg",
        "asname",
        "module",
        "level",
        "conversion",
        "simple",
        "is_async",
        "type_comment",
        "kind",
        "rest",
        "kwd_attrs",
        "tag",
    }
)
# Classes whose ``name``, ``names`` or ``value`` field holds an identifier, a list of them or a
# constant, not nodes.
_LEAF_BY_CLASS: dict[type, frozenset[str]] = {
    ast.FunctionDef: frozenset({"name"}),
    ast.AsyncFunctionDef: frozenset({"name"}),
    ast.ClassDef: frozenset({"name"}),
    ast.alias: frozenset({"name"}),
    ast.ExceptHandler: frozenset({"name"}),
    ast.MatchStar: frozenset({"name"}),
    ast.MatchAs: frozenset({"name"}),
    ast.Global: frozenset({"names"}),
    ast.Nonlocal: frozenset({"names"}),
    ast.Constant: frozenset({"value"}),
    ast.MatchSingleton: frozenset({"value"}),
}
_NODE_FIELDS: dict[type, tuple[str, ...]] = {}


def _node_fields(kind: type) -> tuple[str, ...]:
    """The fields of AST class ``kind`` that may hold nodes, in field order."""
    leaves = _LEAF_FIELDS | _LEAF_BY_CLASS.get(kind, frozenset())
    fields = _NODE_FIELDS[kind] = tuple(f for f in kind._fields if f not in leaves)  # type: ignore[attr-defined]
    return fields


def all_nodes(tree: ast.AST) -> tuple[tuple[ast.AST, ...], dict[type, list[Any]]]:
    """Every node of ``tree``, breadth first, without the context markers, and the same nodes
    grouped by class; each node keeps its children for :func:`children`."""
    out: list[ast.AST] = [tree]
    by_type: dict[type, list[Any]] = {}
    node_type, i = ast.AST, 0
    node_fields = _NODE_FIELDS
    while i < len(out):
        node = out[i]
        i += 1
        kind = node.__class__
        if kind in by_type:
            by_type[kind].append(node)
        else:
            by_type[kind] = [node]
        fields = node_fields.get(kind)
        if fields is None:
            fields = _node_fields(kind)
        kids: list[ast.AST] = []
        for field in fields:
            value = getattr(node, field, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, node_type):
                        kids.append(item)
            elif isinstance(value, node_type):
                kids.append(value)
        node.__dict__[_KIDS] = kids
        out.extend(kids)
    return tuple(out), by_type


def children(node: ast.AST) -> list[ast.AST]:
    """``node``'s child nodes in field order (``ast.iter_child_nodes`` without context markers)."""
    kids = node.__dict__.get(_KIDS)
    return kids if kids is not None else list(ast.iter_child_nodes(node))


def subtree(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``: ``node`` and every node under it, breadth first."""
    todo = deque([node])
    while todo:
        node = todo.popleft()
        kids = node.__dict__.get(_KIDS)
        todo.extend(kids if kids is not None else ast.iter_child_nodes(node))
        yield node
