"""What a value read in a call is by default, when the file says: the one home for option and
config defaults in lint (issue 32: rules read ``num_workers=args.workers`` as "some workers"
where ``--workers`` defaults to 0).

:func:`option_default` follows one name to the literal it starts as:

- ``args.x``: the ``default=`` of the ``add_argument`` that defines ``x`` in this file
  (``--x``, or ``dest="x"``);
- a bare name ``x``: the ``default=`` of a ``@click.option("--x", ...)`` on the function that
  reads it, else a module-level ``X = literal`` assigned once;
- ``cfg.x`` (any object): the default of a field ``x`` declared in exactly one class of this
  file (a dataclass or a config class: ``num_workers: int = 0``).

Anything else, or more than one candidate, is None: the rules stay as they were.
"""

from __future__ import annotations

import ast

from torchpace.lint.rule import FileContext, keyword


def _dest_of(call: ast.Call, names: list[str]) -> str:
    """argparse's dest: the first long option, else the first name."""
    longs = [
        a.value.lstrip("-").replace("-", "_")
        for a in call.args
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")
    ]
    return (longs or names)[0]


def _argparse_default(ctx: FileContext, attr: str) -> list[ast.expr | None]:
    found: list[ast.expr | None] = []
    for call, _ in ctx.calls:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "add_argument"):
            continue
        dest = keyword(call, "dest")
        names = [
            a.value.lstrip("-").replace("-", "_")
            for a in call.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        own = dest.value.value if dest and isinstance(dest.value, ast.Constant) else None
        if attr == own or (own is None and names and attr == _dest_of(call, names)):
            default = keyword(call, "default")
            found.append(default.value if default is not None else None)
    return found


def _click_default(ctx: FileContext, name: str) -> list[ast.expr | None]:
    found: list[ast.expr | None] = []
    for fn in ctx.of_type(ast.FunctionDef, ast.AsyncFunctionDef):
        if name not in {a.arg for a in fn.args.args + fn.args.kwonlyargs}:
            continue
        for deco in fn.decorator_list:
            if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute)):
                continue
            if deco.func.attr not in ("option", "argument"):
                continue
            opts: list[str] = [
                a.value
                for a in deco.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ]
            plain = [o for o in opts if not o.startswith("-")]  # an explicit parameter name
            longest = max(opts, key=len, default="")
            derived = plain[0] if plain else longest.lstrip("-").replace("-", "_")
            if derived == name:
                default = keyword(deco, "default")
                found.append(default.value if default is not None else None)
    return found


def _class_field(ctx: FileContext, attr: str) -> list[ast.expr | None]:
    found: list[ast.expr | None] = []
    for cls in ctx.of_type(ast.ClassDef):
        for stmt in cls.body:  # type: ignore[attr-defined]
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if stmt.target.id == attr:
                    found.append(_field_value(stmt.value))
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name) and target.id == attr:
                    found.append(stmt.value)
    return found


def _field_value(value: ast.expr | None) -> ast.expr | None:
    """A dataclass field's default: the value, or ``field(default=...)``'s."""
    if isinstance(value, ast.Call) and isinstance(value.func, (ast.Name, ast.Attribute)):
        name = value.func.id if isinstance(value.func, ast.Name) else value.func.attr
        if name == "field":
            default = keyword(value, "default")
            return default.value if default is not None else None
    return value


def _module_constant(ctx: FileContext, name: str) -> list[ast.expr | None]:
    tree = ctx.tree
    body = tree.body if isinstance(tree, ast.Module) else []
    assigned = [
        n
        for n in ctx.of_type(ast.Assign, ast.AnnAssign, ast.AugAssign)
        if any(
            isinstance(t, ast.Name) and t.id == name
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])  # type: ignore[attr-defined]
        )
    ]
    if len(assigned) != 1 or assigned[0] not in body or isinstance(assigned[0], ast.AugAssign):
        return []
    return [assigned[0].value]  # type: ignore[attr-defined]


def option_default(ctx: FileContext, node: ast.expr | None) -> ast.expr | None:
    """The default ``node`` starts as, where the file declares exactly one (module docs)."""
    found: list[ast.expr | None] = []
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        found = _argparse_default(ctx, node.attr) or _class_field(ctx, node.attr)
    elif isinstance(node, ast.Attribute):
        found = _class_field(ctx, node.attr)  # self.cfg.num_workers
    elif isinstance(node, ast.Name):
        found = _click_default(ctx, node.id) or _module_constant(ctx, node.id)
    return found[0] if len(found) == 1 else None


def int_value(ctx: FileContext, node: ast.expr | None) -> int | None:
    """``node`` as an int: a literal, or the literal default :func:`option_default` finds."""
    for candidate in (node, option_default(ctx, node)):
        if isinstance(candidate, ast.Constant) and type(candidate.value) is int:
            return candidate.value
    return None
