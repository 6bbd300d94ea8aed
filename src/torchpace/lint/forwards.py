"""Modules' forwards: code that runs on every training step, whether or not a loop lint can
follow calls the model.

A model is often built where lint cannot follow it: by a factory (``exp.get_model()``), into a
dict of models (``model[key](x)``), from a configuration (Hydra's ``instantiate``), in a file no
training loop imports. Its ``forward`` still runs on every step of the run that trains it, and
so do the methods of its class and the functions of its file that the forward calls (one call
deep for those). :func:`forward_code` is that code, read in a file that moves something to a
device (:func:`in_forwards`), since a model file only knows its device from its inputs
(``.to(x.device)``). Left out:

- a forward the project's hot code already reads (a loop of the project calls the model): that
  reading knows the branches the loop's call takes (``reverse=False``);
- a forward under ``@torch.no_grad()`` (an inference module's), or one that puts the model it
  wraps in eval mode (``self.model.eval()``: an explainer's, DIG's DeepLIFT or GradCAM), also
  where another file's loop calls it (``loops.evaluates_its_model``);
- what only evaluation runs: the ``else`` of ``if self.training:`` and the body of ``if not
  self.training:``, also of another module's flag (``self.module[0].training``);
- what is built once and kept: the body of ``if self.cache is None:`` (alone or in an ``or``),
  and what follows ``if self.pe is not None: ... return`` where it builds ``self.pe`` again
  (ESPnet's ``extend_pe``, which returns while the kept table is long enough);
- an error's handler (``except RuntimeError:``, an out-of-memory fallback);
- an autograd ``Function`` with an ONNX ``symbolic`` (a stub traced for export), and the
  modules of a folder or file named for exporting or serving the model (``onnxexport/``).

The methods a forward picks from a dict of its own (``{"TransE": self.TransE, ...}[name](...)``)
are read as the methods it calls.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import PurePath

from torchpace.lint.device import may_use_accelerator
from torchpace.lint.loops import (
    FORWARD,
    FUNCTION_DEFS,
    Function,
    Scope,
    disables_grad,
    dotted,
    evaluates_its_model,
    failure_check,
    none_test,
    returns_if_kept,
    stores,
    walk,
)
from torchpace.lint.rule import FileContext, per_file
from torchpace.lint.tree import subtree

# A file, or the folder it is in, named for exporting or serving a model: what its modules'
# forwards run is traced or served, not trained (``onnxexport/model_onnx.py``, ``export.py``).
# A word of the file's name, or the whole of its folder's: the folders above, and a project's
# own name (``yolo-deploy/``), are the user's.
_EXPORT_WORDS = frozenset({"onnx", "export", "deploy", "serving"})
_EXPORT_FOLDER = re.compile(r"(onnx[_-]?)?exports?|deploy(ment)?|onnx|serving", re.IGNORECASE)


def _exported(path: PurePath) -> bool:
    words = {w.lower() for w in re.split(r"[_\-.]", path.stem)}
    return bool(words & _EXPORT_WORDS) or (
        len(path.parts) > 1 and _EXPORT_FOLDER.fullmatch(path.parent.name) is not None
    )


@per_file
def forward_code(ctx: FileContext) -> list[tuple[ast.AST, Scope]]:
    """Every node of the file's modules' forwards and what they call (module doc), with the
    function it is in."""
    classes = [c for c in ctx.of_type(ast.ClassDef) if c.bases]
    called = {e.removeprefix(FORWARD) for e in ctx.entries if e.startswith(FORWARD)}
    if not called and not any(
        isinstance(m, FUNCTION_DEFS) and m.name == "forward" for c in classes for m in c.body
    ):
        return []  # most files: no module's forward
    functions = {n.name: n for n in ctx.tree.body if isinstance(n, FUNCTION_DEFS)}
    hot = ctx.loops.hot
    seen: set[int] = set()
    out: list[tuple[ast.AST, Scope]] = []
    roots: list[tuple[Function, dict[str, Function]]] = []
    if _exported(PurePath(ctx.path)):
        return []  # an export or serving copy of the model (so-vits-svc's ``onnxexport/``)
    for cls in classes:
        methods = {n.name: n for n in cls.body if isinstance(n, FUNCTION_DEFS)}
        forward = methods.get("forward")
        if forward is None or any(disables_grad(ctx.names, d) for d in forward.decorator_list):
            continue
        if "symbolic" in methods and "backward" not in methods:
            continue  # an autograd Function with an ONNX symbolic: its forward is a stub traced
            # for export (YOLO's ``ORT_NMS``), never a training step
        if evaluates_its_model(forward):
            continue  # an explainer's or a predictor's forward: it puts the model it wraps in
            # eval mode, so what it runs is inference, not a training step
        roots.append((forward, methods))
    # What another file's forward calls (``loops.FORWARD``): a function of this file, or a
    # class whose ``__init__`` the call runs.
    for top in ctx.tree.body:
        if getattr(top, "name", None) not in called:
            continue
        if isinstance(top, FUNCTION_DEFS) and not any(
            disables_grad(ctx.names, d) for d in top.decorator_list
        ):
            roots.append((top, {}))
        elif isinstance(top, ast.ClassDef):
            methods = {n.name: n for n in top.body if isinstance(n, FUNCTION_DEFS)}
            if "__init__" in methods:
                roots.append((methods["__init__"], methods))
    for root, methods in roots:
        if any(id(stmt) in hot for stmt in root.body):
            continue  # the loop's own reading, which knows the branches its calls take
        queue: list[tuple[Function, int]] = [(root, 0)]
        while queue:
            fn, depth = queue.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            handled = {
                id(n) for h in subtree(fn) if isinstance(h, ast.ExceptHandler) for n in subtree(h)
            }
            for node in walk(_training_branches(fn.body)):
                if id(node) in handled:
                    continue  # an error's handler: not every step
                out.append((node, fn))
                if isinstance(node, ast.Dict):
                    # ``score_of = {"TransE": self.TransE, ...}``, then
                    # ``score_of[self.model_name](...)``: one of the methods runs, each may
                    queue += [
                        (methods[v.attr], depth)
                        for v in node.values
                        if isinstance(v, ast.Attribute)
                        and dotted(v.value) == "self"
                        and v.attr in methods
                    ]
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if isinstance(func, ast.Attribute) and dotted(func.value) == "self":
                    if func.attr in methods:
                        queue.append((methods[func.attr], depth))  # a method of the class
                elif isinstance(func, ast.Name) and func.id in functions and depth < 1:
                    queue.append((functions[func.id], depth + 1))  # a function of the file
    return out


def in_forwards(ctx: FileContext, keep: Callable[[ast.AST], bool]) -> list[tuple[ast.AST, Scope]]:
    """The nodes of :func:`forward_code` that ``keep`` (a cheap test of the node alone) accepts,
    in a file that may use an accelerator (or whose functions another file's forwards call);
    asked about the file only when some are found."""
    found = [(node, scope) for node, scope in forward_code(ctx) if keep(node)]
    if not found:
        return []
    # A helper another file's forward calls runs on that file's device (loops.FORWARD: only
    # from a file that may use an accelerator), though its own file may never name one.
    helper = any(e.startswith(FORWARD) for e in ctx.entries)
    return found if helper or may_use_accelerator(ctx) else []


def _training_branches(body: list[ast.stmt]) -> list[ast.AST]:
    """``body`` without what only evaluation runs and what runs once and is kept (module doc),
    at any depth of ``if`` statements; an ``if``'s test runs either way."""
    out: list[ast.AST] = []
    for index, stmt in enumerate(body):
        if isinstance(stmt, ast.If):
            kept = returns_if_kept(stmt)
            if kept is not None and stores(body[index + 1 :], kept):
                # ``if self.pe is not None: ... return``, then the table is built and kept
                # (ESPnet's ``extend_pe``): what follows runs on the first call
                out += _training_branches(stmt.body)
                break
            mode = _training_test(stmt.test)
            if mode is not None:
                out += _training_branches(stmt.body if mode else stmt.orelse)
                continue
            out.append(stmt.test)
            if not _fills_once(stmt.test) and not failure_check(stmt.test):
                out += _training_branches(stmt.body)
            out += _training_branches(stmt.orelse)
            continue
        out.append(stmt)
    return out


def _training_test(test: ast.expr) -> bool | None:
    """True for ``self.training`` (or ``self.module[0].training``), False for its negation,
    None for anything else."""
    if isinstance(test, ast.Attribute) and test.attr == "training":
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return False if _training_test(test.operand) else None
    return None


def _fills_once(test: ast.expr) -> bool:
    """``self.x is None`` alone or in an ``or`` (``self.rel is None or self.rel.shape[1] !=
    n``): the body builds what the module keeps, on the first call (or when the size
    changes)."""
    tests = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
    return any((none_test(t) or "").startswith("self.") for t in tests)


__all__ = ["forward_code", "in_forwards"]
