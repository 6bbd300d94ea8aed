"""What a lint rule is, and the per-file context every rule reads.

A rule is data plus one check function: a code, a name after the bad pattern, a message stating
the problem, the catalogue technique that removes it, and documentation in one template. The
check reads a :class:`FileContext` (the file parsed once) and yields :class:`Report` values; the
engine turns them into findings with positions.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from torchpace.findings import Edit, Fix
from torchpace.lint.imports import Resolver
from torchpace.lint.tree import children

if TYPE_CHECKING:
    from torchpace.lint.loops import LoopFacts, Scope
    from torchpace.lint.tensors import TensorFacts

DOC_HEADINGS = (
    "What it does",
    "Why is this slow",
    "Example",
    "Use instead",
    "Fix safety",
    "References",
)

T = TypeVar("T")


def per_file(reading: Callable[..., T]) -> Callable[..., T]:
    """``reading(ctx, **options)`` worked out once per file and options, kept on the context:
    what several rules ask of the same file (its hot code, its training loaders, whether it
    uses CUDA) is not worked out again for each of them."""
    name = f"{reading.__module__}.{reading.__qualname__}"
    defaults = {
        p.name: p.default
        for p in inspect.signature(reading).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }

    @functools.wraps(reading)
    def cached(ctx: FileContext, **options: Any) -> T:
        store: dict[Any, Any] = ctx.__dict__.setdefault("_tp_per_file", {})
        key = (name, *sorted({**defaults, **options}.items()))
        if key not in store:
            store[key] = reading(ctx, **options)
        return store[key]  # type: ignore[no-any-return]

    return cached


# Functions that run the function they are given as their first argument, in new processes.
_SPAWNS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})


@dataclass(frozen=True)
class Report:
    """A rule's hit: the node to point at and, where one is exact, a fix."""

    node: ast.AST
    fix: Fix | None = None


@dataclass(frozen=True)
class FileContext:
    """One file, parsed once. ``calls`` pairs every call with its function's canonical name."""

    path: str
    source: bytes  # the file's bytes, without a UTF-8 byte-order mark
    tree: ast.Module
    nodes: tuple[ast.AST, ...]
    calls: tuple[tuple[ast.Call, str | None], ...]
    names: Resolver
    by_type: dict[type, list[Any]]  # the nodes of each AST class, in walk order
    # Module-level functions another linted file calls on every step (lint.project).
    entries: frozenset[str] = frozenset()

    @cached_property
    def line_starts(self) -> tuple[int, ...]:
        """The byte offset of each line's first byte (only files with findings need it)."""
        return line_starts(self.source)

    @cached_property
    def loops(self) -> LoopFacts:
        """The file's training loops and hot code, analysed on first use."""
        from torchpace.lint.engine import is_notebook
        from torchpace.lint.loops import analyse
        from torchpace.lint.values import debug_flags_off

        return analyse(
            self.tree,
            self.by_type,
            self.names,
            self.entries,
            debug_flags_off(self),
            notebook=is_notebook(self.path),
        )

    @cached_property
    def env_bound(self) -> frozenset[int]:
        """``id`` of the nodes that run once per environment step (lint.environment)."""
        from torchpace.lint.environment import env_bound

        return env_bound(self)

    @cached_property
    def launch_bound(self) -> frozenset[int]:
        """``id`` of the nodes of training loops whose models are all small (lint.scale)."""
        from torchpace.lint.scale import launch_bound

        return launch_bound(self)

    @cached_property
    def little_tensor_work(self) -> frozenset[int]:
        """:attr:`launch_bound`, and the loops of narrow graph nets (lint.scale): the loops
        whose steps have no matmul or convolution big enough for a faster kernel to pay."""
        from torchpace.lint.scale import launch_bound

        return launch_bound(self, graphs=True)

    @cached_property
    def small_steps(self) -> frozenset[int]:
        """``id`` of the training loops whose steps do little tensor work (lint.scale)."""
        from torchpace.lint.scale import small_steps

        return small_steps(self)

    @cached_property
    def call_sites(self) -> dict[int, list[ast.Call]]:
        """``id`` of a function of this file → the calls of this file that run it (resolved as
        :meth:`LoopFacts.callees` does), found in one pass over the file's calls."""
        facts = self.loops
        sites: dict[int, list[ast.Call]] = {}
        for call, name in self.calls:
            for function in facts.callees(call, self.enclosing_scope(call)):
                sites.setdefault(id(function), []).append(call)
            # A function handed to a process or thread that runs it: ``mp.Process(target=
            # train, ...)``, ``mp.spawn(train, ...)``; the call that starts it stands for it.
            handed = [k.value for k in call.keywords if k.arg == "target"]
            if name in _SPAWNS and call.args:
                handed.append(call.args[0])
            for value in handed:
                if isinstance(value, ast.Name):
                    for function in facts.functions.get(value.id, []):
                        sites.setdefault(id(function), []).append(call)
        return sites

    def of_type(self, *types: type) -> list[Any]:
        """The file's nodes of exactly these AST classes, in walk order per class.

        Rules that look at one kind of node read this index, built once per file, instead of
        scanning every node: on torch's own sources that scan was a visible share of lint time.
        """
        index = self.by_type
        if len(types) == 1:
            return index.get(types[0], [])
        return [n for t in types for n in index.get(t, [])]

    @cached_property
    def parents(self) -> dict[int, ast.AST]:
        """``id(node)`` → the node that contains it."""
        return {id(c): n for n in self.nodes for c in children(n)}

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        """The nodes containing ``node``, innermost first."""
        parent = self.parents.get(id(node))
        while parent is not None:
            yield parent
            parent = self.parents.get(id(parent))

    def enclosing_scope(self, node: ast.AST) -> Scope:
        """The function ``node`` runs in, or the module."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return ancestor
        return self.tree

    def tensors(self, scope: Scope) -> TensorFacts:
        """Which names of ``scope`` hold tensors, analysed once per scope."""
        from torchpace.lint.tensors import TensorFacts

        found: TensorFacts | None = self.loops.tensor_cache.get(id(scope))
        if found is not None:
            return found
        if not self.loops.parents:
            self.loops.parents = self.parents
        return TensorFacts(self.loops, scope)

    def offset(self, line: int, col: int) -> int:
        """Byte offset of a 1-based line and a 0-based UTF-8 byte column."""
        return self.line_starts[line - 1] + col

    def segment(self, node: ast.AST) -> str:
        """The exact source text of ``node``."""
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return self.source[start:end].decode("utf-8")


def line_starts(source: bytes) -> tuple[int, ...]:
    """The byte offset of each line's first byte; ``\r\n``, ``\r`` and ``\n`` all end a line."""
    return (0, *(m.end() for m in _NEWLINE.finditer(source)))


_NEWLINE = re.compile(rb"\r\n|\r|\n")

Check = Callable[[FileContext], Iterator[Report]]
Level = Literal["warning", "info"]


@dataclass(frozen=True)
class Rule:
    """A lint rule. ``default=False`` rules run only when selected by their full code."""

    code: str
    name: str
    message: str
    technique: str
    doc: str
    check: Check
    default: bool = True
    level: Level = "warning"


# Small helpers the rules share.


def start_of(node: ast.AST) -> tuple[int, int]:
    """(line, byte column) where ``node`` starts."""
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def end_of(node: ast.AST) -> tuple[int, int]:
    """(line, byte column) just after ``node``."""
    return node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    """The ``name=`` keyword of ``call``, or None."""
    return next((k for k in call.keywords if k.arg == name), None)


def has_star_args(call: ast.Call) -> bool:
    """True when ``*args`` or ``**kwargs`` could carry any setting: the analysis cannot tell."""
    return any(k.arg is None for k in call.keywords) or any(
        isinstance(a, ast.Starred) for a in call.args
    )


def argument(call: ast.Call, name: str, position: int) -> ast.expr | None:
    """The value passed for a parameter by keyword or by position, or None if not passed."""
    kw = keyword(call, name)
    if kw is not None:
        return kw.value
    if len(call.args) > position:
        return call.args[position]
    return None


def assigned_once(ctx: FileContext, node: ast.expr | None) -> ast.expr | None:
    """What a name is assigned, where the file assigns it once; anything else as it is."""
    if isinstance(node, ast.Name):
        sources = [
            n.value
            for n in ctx.of_type(ast.Assign)
            if any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets)
        ]
        return sources[0] if len(sources) == 1 else None
    return node


def parameter_names(scope: ast.AST | None) -> set[str]:
    """The parameters a function's body reads by name (none for the module)."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    args = scope.args
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}


def passed_for(
    ctx: FileContext, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> list[ast.expr | None] | None:
    """What each call of ``function`` in this file, by its name, passes for its parameter
    ``name`` (None where a call leaves it out); None when ``name`` is not positional."""
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if name not in params:
        return None
    position = params.index(name)
    return [
        argument(call, name, position)
        for call, _ in ctx.calls
        if isinstance(call.func, ast.Name) and call.func.id == function.name
    ]


def is_const(node: ast.AST | None, value: object) -> bool:
    """True when ``node`` is the literal ``value`` (``True`` is not ``1`` here)."""
    return (
        isinstance(node, ast.Constant) and type(node.value) is type(value) and node.value == value
    )


def replace(node: ast.AST, text: str) -> Edit:
    """An edit replacing the whole of ``node`` with ``text``."""
    return Edit(
        node.lineno,  # type: ignore[attr-defined]
        node.col_offset,  # type: ignore[attr-defined]
        node.end_lineno,  # type: ignore[attr-defined]
        node.end_col_offset,  # type: ignore[attr-defined]
        text,
    )


def insert_after(node: ast.AST, text: str) -> Edit:
    """An edit inserting ``text`` right after ``node``."""
    line, col = node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]
    return Edit(line, col, line, col, text)


def insert_before(node: ast.AST, text: str) -> Edit:
    """An edit inserting ``text`` right before ``node``."""
    line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
    return Edit(line, col, line, col, text)


# An ``if`` test that picks code by what the installed torch has: ``torch.__version__``,
# ``sys.version_info``, ``packaging.version``, ``hasattr(torch, "amp")``.
_VERSION_TEST = re.compile(r"version|hasattr|getattr")
_TRIES = tuple(getattr(ast, name) for name in ("Try", "TryStar") if hasattr(ast, name))


def in_fallback(ctx: FileContext, node: ast.AST) -> bool:
    """Whether ``node`` is inside a ``try`` statement or a version guard. A fix there could turn
    the fallback for an older torch into the call that just failed (issue 16: a TP301 rewrite
    in an ``except`` branch did), so such findings keep no fix."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, _TRIES):
            return True
        if isinstance(ancestor, (ast.If, ast.IfExp)):
            test = ctx.segment(ancestor.test)
            if _VERSION_TEST.search(test):
                return True
    return False
