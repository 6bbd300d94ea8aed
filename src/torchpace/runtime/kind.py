"""Tell a recipe from a training script without executing it: from the file's syntax tree.

A *recipe* binds the factories at module level (``model``, ``loss``, ``dataset`` or ``loaders``,
``batch_size``, ``lr``): torchpace builds the run from them. A *script* does something when run:
it has an ``if __name__ == "__main__":`` block, or a call or loop at module level. A file that is
neither (a library module, a half-written recipe) is an error that says which one to make it.
This module does not import torch.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Literal

from torchpace.recipes import REQUIRED, RecipeError

Kind = Literal["recipe", "script"]
_ALTERNATIVES = {"dataset": ("dataset", "loaders")}


def _bound_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level (functions, classes, assignments, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
    return names


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    sides = [node.test.left, *node.test.comparators]
    has_name = any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
    has_main = any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    return has_name and has_main


def _runs_something(tree: ast.Module) -> bool:
    """A ``__main__`` block, or a module-level call or loop outside any definition."""
    for node in tree.body:
        if _is_main_guard(node):
            return True
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor, ast.With)):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, (ast.Call, ast.Await)):
            return True
    return False


def missing_factories(names: set[str]) -> list[str]:
    """The recipe factories ``names`` lacks (``dataset`` is satisfied by ``loaders``)."""
    return [f for f in REQUIRED if not any(a in names for a in _ALTERNATIVES.get(f, (f,)))]


def kind_of(path: str | Path) -> Kind:
    """ "recipe" or "script" for the Python file at ``path``; RecipeError when it is neither or
    cannot be read."""
    p = Path(path)
    try:
        source = p.read_bytes()
    except OSError as e:
        raise RecipeError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        tree = ast.parse(source, filename=str(p))
    except SyntaxError as e:
        raise RecipeError(f"{path}:{e.lineno}: the file does not parse: {e.msg}") from None
    names = _bound_names(tree)
    missing = missing_factories(names)
    if not missing:
        return "recipe"
    if _runs_something(tree):
        return "script"
    if len(missing) < len(REQUIRED):  # some factories: a recipe being written
        lacks = ", ".join(f"`{m}`" for m in missing)
        raise RecipeError(
            f"recipe {path} has no {lacks}: define {REQUIRED[missing[0]]}"
            + (" (and the others)" if len(missing) > 1 else "")
            + '; or, if it is a training script, give it an `if __name__ == "__main__":` block'
        )
    raise RecipeError(
        f"{path} is neither a recipe (no model, dataset, loss, batch_size or lr at module level) "
        'nor a training script (no `if __name__ == "__main__":` block and nothing run at '
        "module level): give the script you run with `python`, and its arguments after --"
    )
