"""Lint files: read and parse each once, run every selected rule, honour ``# noqa``.

Bad input (a missing path, a binary, non-UTF-8 or oversized file, a syntax error, a broken
notebook) becomes a :class:`LintError` naming the file and the cause; the other files are still
linted. A rule that raises on a file becomes an error for that file and rule only.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import os
import re
import tokenize
import traceback
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from torchpace.findings import Finding, Location
from torchpace.lint.discovery import discover
from torchpace.lint.imports import Resolver
from torchpace.lint.loops import (
    FORWARD,
    PLAIN,
    bound_in,
    changed_objects,
    dotted,
    iterated,
    parameter_defaults,
    returned,
    walk,
)
from torchpace.lint.notebooks import DATABRICKS_HEADER, databricks_python, read_notebook
from torchpace.lint.results import FileResult, LintError
from torchpace.lint.rule import FileContext, Rule, argument, in_fallback, is_const
from torchpace.lint.selection import select
from torchpace.lint.tree import all_nodes

__all__ = ["FileResult", "LintError", "check", "lint_file", "lint_paths", "lint_source", "select"]

BOM = b"\xef\xbb\xbf"
MiB = 2**20
# 10 MiB of Python is generated code or data, not a training script (the largest hand-written
# modules of CPython and torch are under 1 MiB), and ``ast`` needs ~50x the source in memory.
MAX_PYTHON_BYTES = 10 * MiB
# A notebook's JSON also carries its outputs (plots as base64), so it may be far larger than
# its code; only the code cells are parsed, and they are held to MAX_PYTHON_BYTES.
MAX_NOTEBOOK_BYTES = 100 * MiB
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*))?", re.I)


_IMPORTS = (ast.Import, ast.ImportFrom)


def is_notebook(path: str) -> bool:
    return path.endswith(".ipynb")


def _too_large(size: int, limit: int) -> str:
    tenths = -(-size * 10 // MiB)  # rounded up: a file just over the limit must not read as equal
    return f"file too large ({tenths / 10:.1f} MiB; the limit is {limit // MiB} MiB)"


def _declared_text(source: bytes) -> str | None:
    """The text of a file whose coding declaration names an encoding other than UTF-8 that
    decodes it; None for anything else."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        return source.decode(encoding) if encoding not in {"utf-8", "utf-8-sig"} else None
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return None


def parse(
    path: str,
    data: bytes,
    *,
    where: Callable[[int], str] = "line {}".format,
    entries: frozenset[str] = frozenset(),
) -> FileContext | LintError:
    """Parse ``data`` once and precompute what every rule reads.

    ``where`` names a line in messages (a notebook says which cell).
    """
    if b"\0" in data:
        return LintError(path, "binary file (contains NUL bytes)")
    if len(data) > MAX_PYTHON_BYTES:
        return LintError(path, _too_large(len(data), MAX_PYTHON_BYTES))
    source = data[len(BOM) :] if data.startswith(BOM) else data
    text: bytes | str = source
    try:
        source.decode("utf-8")
    except UnicodeDecodeError as exc:
        declared = _declared_text(source)  # PEP 263: ``# -*- coding: latin-1 -*-``
        if declared is None:
            return LintError(path, f"not valid UTF-8 (byte {exc.start}: {exc.reason})")
        text, source = declared, declared.encode("utf-8")  # positions in UTF-8, as for others
    if source.startswith(DATABRICKS_HEADER):
        # a Databricks notebook exported as .py: its magics and shell lines are not Python
        decoded = text if isinstance(text, str) else text.decode("utf-8")
        text = databricks_python(decoded)
    try:
        # Invalid escape sequences warn at parse time; they are the user's business, not ours.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        return LintError(path, f"syntax error at {where(exc.lineno or 1)}: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:
        return LintError(path, f"cannot parse: {exc or type(exc).__name__}")
    return context(path, source, tree, entries)


def context(
    path: str, source: bytes, tree: ast.Module, entries: frozenset[str] = frozenset()
) -> FileContext:
    """The :class:`FileContext` of a file already parsed into ``tree`` (``apply``'s edits read
    the same option defaults as the rules, off their own tree)."""
    nodes, by_type = all_nodes(tree)
    names = Resolver.from_nodes([*by_type.get(ast.Import, ()), *by_type.get(ast.ImportFrom, ())])
    stars = [
        n
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)
    ]
    if stars and path:
        from torchpace.lint.project import star_bindings  # project.py imports this module

        for node in stars:  # what a project module's ``*`` brings in, where this file is silent
            for name, target in star_bindings(path, node).items():
                names.bindings.setdefault(name, target)
    calls = tuple((n, names.qualname(n.func)) for n in by_type.get(ast.Call, ()))
    return FileContext(path, source, tree, nodes, calls, names, by_type, entries)


def _char_col(line: bytes, byte_col: int) -> int:
    """1-based character column of a 0-based UTF-8 byte offset."""
    return len(line[:byte_col].decode("utf-8", errors="replace")) + 1


def _line(ctx: FileContext, lineno: int) -> bytes:
    starts = ctx.line_starts
    end = starts[lineno] if lineno < len(starts) else len(ctx.source)
    return ctx.source[starts[lineno - 1] : end]


def _suppressed(ctx: FileContext, lineno: int, code: str) -> bool:
    match = _NOQA.search(_line(ctx, lineno).decode("utf-8"))
    if match is None:
        return False
    codes = match.group("codes")
    return codes is None or code in {c.strip().upper() for c in codes.split(",")}


def _findings(ctx: FileContext, rule: Rule) -> list[Finding]:
    found = []
    for report in rule.check(ctx):
        node = report.node
        fix = report.fix if report.fix is None or not in_fallback(ctx, node) else None
        line, end_line = node.lineno, node.end_lineno  # type: ignore[attr-defined]
        if _suppressed(ctx, line, rule.code):
            continue
        col = _char_col(_line(ctx, line), node.col_offset)  # type: ignore[attr-defined]
        end_col = _char_col(_line(ctx, end_line), node.end_col_offset)  # type: ignore[attr-defined]
        location = Location(ctx.path, line, col, end_line, end_col)
        found.append(Finding(rule.code, rule.name, rule.technique, rule.message, location, fix))
    return found


def _internal_error(path: str, code: str, exc: Exception) -> LintError:
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    at = f"{os.path.basename(frame.filename)}:{frame.lineno}"
    return LintError(
        path, f"internal error in {code}: {type(exc).__name__}: {exc} (at {at}); please report it"
    )


def check(
    ctx: FileContext, rules: Iterable[Rule]
) -> tuple[tuple[Finding, ...], tuple[LintError, ...]]:
    """Run ``rules`` over one parsed file: findings sorted by position, ``# noqa`` honoured,
    and an error for each rule that raised (its findings for this file are dropped)."""
    found: list[Finding] = []
    errors: list[LintError] = []
    for rule in rules:
        try:
            found += _findings(ctx, rule)
        except Exception as exc:  # one broken rule must not stop the others or the run
            errors.append(_internal_error(ctx.path, rule.code, exc))
    found = list(dict.fromkeys(found))  # one rule may reach a node twice (call and decorator)
    found.sort(key=lambda f: (f.location.line, f.location.col, f.code))
    return tuple(found), tuple(errors)


def _lint_notebook(path: str, data: bytes, rules: Iterable[Rule]) -> FileResult | LintError:
    try:
        notebook = read_notebook(data)
    except ValueError as exc:
        return LintError(path, str(exc))
    ctx = parse(path, notebook.source, where=notebook.where)
    if isinstance(ctx, LintError):
        # A cell that is not Python (an automagic shell line, another kernel's syntax) must
        # not stop the rest of the notebook from being linted: such cells are left out, said.
        notebook = notebook.without_unparsable_cells()
        ctx = parse(path, notebook.source, where=notebook.where)
        if isinstance(ctx, LintError):
            return ctx
    findings, errors = check(ctx, rules)
    relocated = tuple(notebook.relocate(f) for f in findings)
    return FileResult(
        path,
        data,
        relocated,
        errors,
        notebook=True,
        skipped_cells=notebook.skipped,
        calls_out=calls_out(ctx),
    )


def lint_source(
    path: str, data: bytes, rules: Iterable[Rule], entries: frozenset[str] = frozenset()
) -> FileResult | LintError:
    """Lint one file's bytes: a notebook when ``path`` ends with ``.ipynb``, else Python."""
    if is_notebook(path):
        return _lint_notebook(path, data, rules)
    ctx = parse(path, data, entries=entries)
    if isinstance(ctx, LintError):
        return ctx
    findings, errors = check(ctx, rules)
    if ctx.source != (data[len(BOM) :] if data.startswith(BOM) else data):
        # Read through its coding declaration: fixes are positions in the UTF-8 text, not in
        # the file's bytes, so none is offered.
        findings = tuple(dataclasses.replace(f, fix=None) for f in findings)
    return FileResult(path, data, findings, errors, calls_out=calls_out(ctx))


# The entry that says "a CUDA device is handed to this file's functions" (lint.project).
CUDA_ENTRY = "@cuda"


def _device_handed_on(ctx: FileContext, calls: Iterable[ast.Call]) -> list[tuple[str, str]]:
    """(module, CUDA_ENTRY) for each imported module whose function or class this CUDA file
    calls with a device (``engine.train_one_epoch(model, ..., device, epoch)``, DETR), and,
    from any function of the file, with a model that function moved to one (``model.cuda()``,
    then ``Solver(loaders, model, optimizer, args)``: demucs): the loop there trains on the
    device picked here."""
    out = []
    for call in calls:
        target = ctx.names.import_path(call.func)
        if target is None or "." not in target:
            continue
        given = [*call.args, *(k.value for k in call.keywords)]
        if any(
            "device" in (dotted(a) or "") for a in given if isinstance(a, (ast.Name, ast.Attribute))
        ):
            out.append((target.rsplit(".", 1)[0], CUDA_ENTRY))
    return out + _model_handed_on(ctx)


def _model_handed_on(ctx: FileContext) -> list[tuple[str, str]]:
    """The modules a function of the file hands a model it moved to a device to, together with
    an optimizer (``Solver(loaders, model, optimizer, args)``): code that trains it there. A
    model handed on alone may only be wrapped, saved or inspected. Only in a file that names
    CUDA."""
    from torchpace.lint.device import moves_to_a_device
    from torchpace.lint.loops import names_optimizer

    if b"cuda" not in ctx.source or b"opt" not in ctx.source:
        return []  # the cheap test: no move to CUDA named here, or no optimizer to hand on
    handing: list[tuple[ast.Call, str, set[str]]] = []  # the call, its module, names it hands
    for call, _ in ctx.calls:
        values = [*call.args, *(k.value for k in call.keywords)]
        given = {d for a in values if isinstance(a, (ast.Name, ast.Attribute)) and (d := dotted(a))}
        if not given or not any(map(names_optimizer, given)):
            continue
        target = ctx.names.import_path(call.func)
        if target is not None and "." in target:
            handing.append((call, target.rsplit(".", 1)[0], given))
    if not handing:
        return []  # most files: the cheap test before any move is read
    moved: set[tuple[int, str]] = set()  # (id of the scope, the model's name)
    for call, _ in ctx.calls:
        if (
            isinstance(call.func, ast.Attribute)
            and call.func.attr in ("cuda", "to")
            and moves_to_a_device(call, ctx.names)
            and (name := dotted(call.func.value)) is not None
        ):
            moved.add((id(ctx.enclosing_scope(call)), name))
    out = []
    for call, module, given in handing:
        scope = id(ctx.enclosing_scope(call))
        if any((scope, name) in moved for name in given):
            out.append((module, CUDA_ENTRY))
    return out


def _top_level_calls(ctx: FileContext) -> list[ast.Call]:
    """The calls top-level code makes, and those in the bodies of the file's module-level
    functions it calls by name (one level: a script's ``main()``)."""
    if not isinstance(ctx.tree, ast.Module):
        return []
    top = [n for n in walk(ctx.tree.body) if isinstance(n, ast.Call)]
    called = {c.func.id for c in top if isinstance(c.func, ast.Name)}
    functions = [
        n
        for n in ctx.tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in called
    ]
    return top + [n for f in functions for n in walk(f.body) if isinstance(n, ast.Call)]


def calls_out(ctx: FileContext) -> tuple[tuple[str, str], ...]:
    """(module, function) for each call the file's hot code makes to an imported module-level
    name or to an instance of an imported class (``Class.forward``), when its loops were
    analysed (a loop rule ran) and it may use an accelerator, and (module, ``@cuda``) for each
    imported function a CUDA file hands its device to (from anywhere in a file whose loops were
    analysed, from top-level code in one without loops: a notebook calling
    ``engine.train(..., device=device)``), and (module, ``@epoch-loader:`` + function) for each
    imported function whose loader a training loop re-iterates every epoch, and (module,
    ``@precision:`` + function) for each imported function the file runs in reduced precision:
    the entry points :mod:`torchpace.lint.project` follows into other files."""
    from torchpace.lint.device import may_use_accelerator, uses_cuda

    analysed = "loops" in ctx.__dict__ and bool(ctx.loops.scope_of or ctx.loops.hot)
    if analysed:
        handed = _device_handed_on(ctx, (call for call, _ in ctx.calls))
    else:  # a notebook or script with no training loop of its own: its top-level calls, and
        # those of its functions that top-level code calls (``main(args)`` calling
        # ``train_one_epoch(..., device=device)`` of utils.py), not a library's
        handed = _device_handed_on(ctx, _top_level_calls(ctx))
    precision = _precision_handed_on(ctx)
    forwards = _forward_helpers(ctx)
    epochs = None
    # a factory's loader handed to another file's function that re-iterates it on a device:
    # that file's device, not this one's
    elsewhere = _reiterated_elsewhere(ctx)
    if not analysed and not handed and not precision and not forwards:
        # no loop rule ran, or no loop, no entry point and no device handed on: unless an epoch
        # loop hands a factory's loader on (``train_one_epoch(model, opt, train_loader)``)
        epochs = _epoch_loader_factories(ctx, analysed)
        if not epochs and not elsewhere:
            return ()
    cuda = uses_cuda(ctx)  # may_use_accelerator would compute it again
    if not cuda and not may_use_accelerator(ctx):
        return tuple(dict.fromkeys(elsewhere))
    if epochs is None:
        epochs = _epoch_loader_factories(ctx, analysed)
    out = (handed if cuda else []) + precision + forwards + epochs + elsewhere
    if not analysed:
        return tuple(dict.fromkeys(out))
    instances = ctx.loops.instances
    for node, scope in ctx.loops.hot.values():
        if not isinstance(node, ast.Call):
            continue
        target = ctx.names.import_path(node.func)
        owner = instances.get(ctx.segment(node.func), "")
        # handed plain Python values only (``logger.update(loss=loss_value)``): PLAIN
        plain = PLAIN if _plain_call(ctx, node, scope) else ""
        if "." in owner and not owner.startswith("torch."):
            # ``net_g = SynthesizerTrn(...)`` (``from models import SynthesizerTrn``), then
            # ``net_g(x)``: a model class of another file, whose forward runs every step
            module, cls = owner.rsplit(".", 1)
            out.append((module, f"{cls}.forward"))
        elif target is not None and "." in target:
            module, function = target.rsplit(".", 1)
            out.append((module, plain + function))
        elif isinstance(node.func, ast.Attribute):
            # ``logger = utils.MetricLogger()`` then ``logger.update(...)`` (DETR): a method of
            # a class imported from another module, recorded as "Class.method"
            owner = instances.get(ctx.segment(node.func.value), "")
            if "." in owner:
                module, cls = owner.rsplit(".", 1)
                out.append((module, f"{plain}{cls}.{node.func.attr}"))
            elif dotted(node.func.value) == "self":
                # ``self.get_noise_pred_and_target(...)`` in a base trainer's loop: a subclass
                # in another file may override it (kohya's FLUX trainer)
                base = _class_of(ctx, node)
                if base is not None:
                    out.append((SUBCLASS, f"{base}.{node.func.attr}"))
    return tuple(dict.fromkeys(out))


# calls_out's module for a method a subclass in another file may override: "Class.method".
SUBCLASS = "@subclass"
# calls_out's prefix for a function of another module whose loader a training loop of this file
# iterates once per epoch (``train_loader = loader.construct_loader(cfg, "train")``, then
# ``for epoch ...: train_epoch(train_loader, ...)``): TP104 reads the loaders it builds.
EPOCH_LOADER = "@epoch-loader:"
# calls_out's prefix for a parameter of such a function whose default is 0 that the call gives
# another value ("create_train_loader.num_workers"): TP104 takes the loader to have workers.
GIVEN = "@given:"


# calls_out's prefix for a function of another module the file runs in reduced precision: called
# inside ``with torch.autocast(...)`` (SlowFast's ``contrastive_forward``), or handed a model
# wrapped with a mixed-precision policy (``model = FSDP(model, mixed_precision=policy)``, then
# ``train(args, model, ...)``, PyTorch's FSDP example): TP302 leaves that function's loops alone.
PRECISION = "@precision:"
_POLICY_KEYWORDS = frozenset({"mixed_precision", "mp_policy"})


def _precision_handed_on(ctx: FileContext) -> list[tuple[str, str]]:
    """(module, PRECISION + function) for each imported function the file runs in reduced
    precision (see :data:`PRECISION`)."""
    if b"autocast" not in ctx.source and b"mixed_precision" not in ctx.source:
        return []  # most files: no parse of their calls needed
    wrapped = {
        target
        for node in ctx.of_type(ast.Assign)
        if isinstance(node.value, ast.Call)
        and any(
            k.arg in _POLICY_KEYWORDS and not is_const(k.value, None) for k in node.value.keywords
        )
        for target in map(dotted, node.targets)
        if target is not None
    }
    out = []
    for call, _ in ctx.calls:
        found = _project_function(ctx, call.func)
        if found is None:
            continue
        given = {dotted(a) for a in (*call.args, *(k.value for k in call.keywords))}
        if given & wrapped or _under_autocast(ctx, call):
            out.append((found[0], PRECISION + found[1]))
    return out


# Calls whose result is a plain Python value, whatever they are given.
_PLAIN_FUNCTIONS = frozenset({"float", "int", "len", "round", "str", "bool", "abs"})
_PLAIN_METHODS = frozenset({"item", "tolist", "get_last_lr", "get_lr"})


def _plain_call(ctx: FileContext, call: ast.Call, scope: ast.AST) -> bool:
    """``call`` hands only plain Python values (:func:`_plain_value`) and passes something."""
    values = [*call.args, *(k.value for k in call.keywords)]
    if not values or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    return all(_plain_value(ctx, v, scope) for v in values)


def _plain_value(
    ctx: FileContext,
    node: ast.expr,
    scope: ast.AST,
    depth: int = 0,
    seen: frozenset[str] = frozenset(),
) -> bool:
    """A number or string, certainly not a tensor: a literal, ``loss.item()``, ``float(x)``, an
    optimizer's ``param_groups[0]["lr"]``, arithmetic of those, a dict of them, or a name the
    scope binds only to those (:func:`~torchpace.lint.loops.bound_in`; ``seen``: the names
    being read, a running ``max_lr = max(max_lr, group["lr"])`` adding nothing new)."""
    if depth > 3:
        return False
    if isinstance(node, (ast.Constant, ast.JoinedStr)):
        return True
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            return func.attr in _PLAIN_METHODS
        if isinstance(func, ast.Name) and func.id in ("max", "min"):  # of plain values
            return bool(node.args) and all(
                _plain_value(ctx, a, scope, depth + 1, seen) for a in node.args
            )
        return isinstance(func, ast.Name) and func.id in _PLAIN_FUNCTIONS
    if isinstance(node, ast.Subscript):
        root: ast.expr = node
        while isinstance(root, ast.Subscript):
            root = root.value
        if isinstance(root, ast.Attribute) and root.attr == "param_groups":
            return True
        if isinstance(root, ast.Name) and _over_param_groups(root.id, scope):
            return True  # ``for group in optimizer.param_groups: ... group["lr"]``
        return isinstance(root, ast.Call) and _plain_value(ctx, root, scope, depth + 1, seen)
    if isinstance(node, ast.BinOp):
        return _plain_value(ctx, node.left, scope, depth + 1, seen) and _plain_value(
            ctx, node.right, scope, depth + 1, seen
        )
    if isinstance(node, ast.UnaryOp):
        return _plain_value(ctx, node.operand, scope, depth + 1, seen)
    if isinstance(node, ast.DictComp):
        return _plain_value(ctx, node.value, scope, depth + 1, seen)
    if isinstance(node, ast.Dict):
        return all(_plain_value(ctx, v, scope, depth + 1, seen) for v in node.values)
    if isinstance(node, ast.Name):
        if node.id in seen:
            return True
        bound = bound_in(ctx, node.id, scope)
        inner = seen | {node.id}
        return bool(bound) and all(
            _plain_value(ctx, v, scope, depth + 1, inner) for v in bound or ()
        )
    return False


def _over_param_groups(name: str, scope: ast.AST) -> bool:
    """``name`` is the target of a loop of ``scope`` over an optimizer's ``param_groups``."""
    return any(
        isinstance(n, ast.For)
        and isinstance(n.target, ast.Name)
        and n.target.id == name
        and isinstance(n.iter, ast.Attribute)
        and n.iter.attr == "param_groups"
        for n in walk(getattr(scope, "body", []))
    )


def _forward_helpers(ctx: FileContext) -> list[tuple[str, str]]:
    """(module, FORWARD + name) for each imported name a module's forward code calls, where a
    rule has read that code (TP207 reads it in every file with a module's forward)."""
    if "loops" not in ctx.__dict__:
        return []  # no rule analysed the file: its forwards were not read
    from torchpace.lint.forwards import forward_code

    out = []
    for node, _ in forward_code(ctx):
        if isinstance(node, ast.Call):
            found = _project_function(ctx, node.func)
            if found is not None:
                out.append((found[0], FORWARD + found[1]))
    return out


def _project_function(ctx: FileContext, func: ast.expr) -> tuple[str, str] | None:
    """(module, name) of an imported function ``func`` calls that may be the project's: any
    module's but torch's."""
    target = ctx.names.import_path(func)
    if target is None or "." not in target or target.startswith("torch."):
        return None
    module, name = target.rsplit(".", 1)
    return module, name


def _under_autocast(ctx: FileContext, node: ast.AST) -> bool:
    """``node`` runs inside ``with torch.autocast(...)`` (any spelling of an autocast context)."""
    return any(
        isinstance(a, (ast.With, ast.AsyncWith))
        and any(
            isinstance(item.context_expr, ast.Call)
            and "autocast" in (dotted(item.context_expr.func) or "").lower()
            for item in a.items
        )
        for a in ctx.ancestors(node)
    )


def _epoch_loader_factories(ctx: FileContext, analysed: bool) -> list[tuple[str, str]]:
    """(module, EPOCH_LOADER + function) for each imported function whose result a repeated
    training loop of the file iterates, or an epoch loop hands by name to a function of another
    project file (``train_one_epoch(model, optimizer, train_loader, ...)``:
    :func:`~torchpace.lint.dataloaders.handed_each_epoch`, as TP104 reads a DataLoader the file
    builds); and (module, GIVEN + "function.parameter") for each parameter with the default 0
    that the call gives another value (``create_train_loader(dataset, batch_size, NUM_WORKERS)``
    of ``def create_train_loader(..., num_workers=0)``)."""
    from torchpace.lint.dataloaders import handed_each_epoch, iterated_values

    values: list[ast.expr] = []
    unpacked: list[tuple[ast.Call, int]] = []  # a factory's call, and where its loader is
    if analysed:
        for loop in ctx.of_type(ast.For, ast.AsyncFor):
            if id(loop) in ctx.loops.repeated and ctx.loops.is_step_loop(
                loop, ctx.enclosing_scope(loop)
            ):
                values += iterated_values(ctx, loop)
                unpacked += _unpacked_factories(ctx, loop)
    values += [
        v
        for loop, v in handed_each_epoch(ctx)
        if isinstance(v, ast.Call)
        and _project_function(ctx, v.func) is not None
        and _builds_a_loader(ctx, v)
        and not _changed_each_pass(v, loop)
    ]
    out: list[tuple[str, str]] = []
    for value in values:
        found = _project_function(ctx, value.func) if isinstance(value, ast.Call) else None
        if found is not None:
            assert isinstance(value, ast.Call)
            out.append((found[0], EPOCH_LOADER + found[1]))
            out += [(found[0], f"{GIVEN}{found[1]}.{p}") for p in _zeros_given(ctx, value)]
    for value, index in unpacked:
        found = _project_function(ctx, value.func)
        if found is not None:
            # ``function.1``: the loader is the second of what it returns, the one re-iterated
            out.append((found[0], f"{EPOCH_LOADER}{found[1]}.{index}"))
            out += [(found[0], f"{GIVEN}{found[1]}.{p}") for p in _zeros_given(ctx, value)]
    return out


def _reiterated_elsewhere(ctx: FileContext) -> list[tuple[str, str]]:
    """(module, EPOCH_LOADER + function) for each project factory whose loader the file binds
    to a name and hands, by that name, to a function of another project file that may use an
    accelerator and iterates the parameter in a training loop run more than once (VoiceFilter's
    ``trainloader = create_dataloader(hp, args, train=True)``, then ``train(args, ...,
    trainloader, ...)``, whose ``while True: for ... in trainloader:`` starts the workers again
    on every pass). Only the calls the file's own run makes (top-level code, and the functions
    it calls by name, a script's ``main()``): a library's functions hand nothing on by
    themselves, and reading every call would parse another file for each."""
    from torchpace.lint.device import may_use_accelerator
    from torchpace.lint.project import definition_of

    # the names the file assigns a call of a project function to (most files: none)
    to_calls = {
        t.id
        for node in ctx.of_type(ast.Assign)
        if isinstance(node.value, ast.Call) and _project_function(ctx, node.value.func)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    if not to_calls:
        return []
    run = [call for call in _top_level_calls(ctx) if _project_function(ctx, call.func)]
    out: list[tuple[str, str]] = []
    for call in run:
        # first what is cheap to read here: a name the call hands on, bound once to a call of
        # a project function that builds a loader (most calls hand none)
        scope = ctx.enclosing_scope(call)
        handed: list[tuple[int | str, ast.Call, tuple[str, str]]] = []
        named: list[tuple[int | str, ast.expr]] = [*enumerate(call.args)]
        named += [(k.arg, k.value) for k in call.keywords if k.arg]
        for key, arg in named:
            if not isinstance(arg, ast.Name) or arg.id not in to_calls:
                continue
            bound = bound_in(ctx, arg.id, scope)
            if not (bound and len(bound) == 1 and isinstance(factory := bound[0], ast.Call)):
                continue
            made = _project_function(ctx, factory.func)
            if made is not None and _builds_a_loader(ctx, factory):
                handed.append((key, factory, made))
        if not handed or _builds_a_loader(ctx, call):
            continue  # a factory itself is read where its result is iterated
        found = definition_of(ctx, call, ast.FunctionDef)
        if found is None:
            continue
        where, function = found
        params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        keywords = {*params, *(a.arg for a in function.args.kwonlyargs)}
        for key, factory, (module, name) in handed:
            param = params[key] if isinstance(key, int) and key < len(params) else key
            if not isinstance(param, str) or param not in keywords:
                continue
            if _reiterates(where, function, param) and may_use_accelerator(where):
                out.append((module, EPOCH_LOADER + name))
                out += [(module, f"{GIVEN}{name}.{p}") for p in _zeros_given(ctx, factory)]
    return out


def _reiterates(
    ctx: FileContext, function: ast.FunctionDef | ast.AsyncFunctionDef, param: str
) -> bool:
    """``function`` iterates its parameter ``param`` in a training loop that runs more than
    once (inside ``while True:`` or an epoch loop)."""
    from torchpace.lint.rules.loading import inside_loops_run_once  # the rules import this module

    return any(
        isinstance(loop, (ast.For, ast.AsyncFor))
        and dotted(iterated(loop.iter)) == param
        and id(loop) in ctx.loops.repeated
        and not inside_loops_run_once(ctx, loop)
        and ctx.loops.is_step_loop(loop, function)
        for loop in walk(function.body)
    )


def _unpacked_factories(
    ctx: FileContext, loop: ast.For | ast.AsyncFor
) -> list[tuple[ast.Call, int]]:
    """The calls of imported project functions that the name ``loop`` iterates is unpacked
    from, in the loop's scope (``train_data, train_loader = data_provider(args, "train")``),
    or through a method or function of this file that returns what it unpacks from one
    (Time-Series-Library's ``self._get_data(flag="train")``, whose ``data_set, data_loader =
    data_provider(self.args, flag)`` it returns), each with the position in the factory's
    returned tuple of the loader the loop iterates (not a memory bank's loader beside it)."""
    name = dotted(iterated(loop.iter))
    if name is None:
        return []
    scope = ctx.enclosing_scope(loop)
    out: list[tuple[ast.Call, int]] = []
    for value, index in _unpacked_into(ctx, scope, name):
        if _project_function(ctx, value.func) is not None:
            out.append((value, index))
            continue
        callee = value.func.attr if isinstance(value.func, ast.Attribute) else dotted(value.func)
        for function in ctx.loops.functions.get(callee or "", ()):
            for r in returned(function):
                if not (isinstance(r, ast.Tuple) and index < len(r.elts)):
                    continue
                inner = dotted(r.elts[index])
                if inner is not None:
                    out += [
                        (v, j)
                        for v, j in _unpacked_into(ctx, function, inner)
                        if _project_function(ctx, v.func) is not None
                    ]
    return [(v, i) for v, i in out if not _handed_no_workers(ctx, v)]


def _handed_no_workers(ctx: FileContext, call: ast.Call) -> bool:
    """``call`` hands the factory an options object (``args``, ``self.args``), and the options
    this file parses give the worker count a default of 0 (DLRM's
    ``make_random_data_and_loader(args, ...)`` with ``--num-workers`` of 0): the loader it
    builds from them has no workers to restart."""
    from torchpace.lint.values import int_value

    if not any(
        isinstance(a, (ast.Name, ast.Attribute))
        for a in (*call.args, *(k.value for k in call.keywords))
    ):
        return False  # no options object handed on
    options = ast.Name("args", ast.Load())  # what matters is the option's name
    return any(
        int_value(ctx, ast.Attribute(value=options, attr=attr, ctx=ast.Load())) == 0
        for attr in ("num_workers", "workers")
    )


def _unpacked_into(ctx: FileContext, scope: ast.AST, name: str) -> list[tuple[ast.Call, int]]:
    """The calls whose result ``scope``'s own assignments unpack into ``name``, with its
    position (``data_set, data_loader = data_provider(args, flag)``: 1 for ``data_loader``)."""
    body = (
        scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
    )
    return [
        (node.value, [dotted(e) for e in t.elts].index(name))
        for node in walk(body)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
        for t in node.targets
        if isinstance(t, ast.Tuple) and name in [dotted(e) for e in t.elts]
    ]


def _builds_a_loader(ctx: FileContext, value: ast.expr) -> bool:
    """``value`` calls a project function that builds a loader (a call named ``...Loader``
    in its body): only such a function's file is read again for TP104, not every function an
    epoch loop hands a name (``set_training_dir(...)``)."""
    from torchpace.lint.project import definition_of

    if not isinstance(value, ast.Call):
        return False
    key = _project_function(ctx, value.func)
    known: dict[tuple[str, str] | None, bool] = ctx.__dict__.setdefault("_tp_builds_loader", {})
    if key is not None and key in known:
        return known[key]  # the same function, called again
    found = definition_of(ctx, value, ast.FunctionDef)
    builds = found is not None and any(
        isinstance(n, ast.Call) and (dotted(n.func) or "").endswith("Loader")
        for n in walk(found[1].body)
    )
    if key is not None:
        known[key] = builds
    return builds


def _changed_each_pass(value: ast.expr, loop: ast.For | ast.AsyncFor) -> bool:
    """``loop`` writes an attribute of, or calls a ``set_...`` method on, a name handed to the
    factory call ``value`` (``train_set.set_epoch(epoch)`` with ``create_train_loader(train_set,
    ...)``): the dataset changes each pass, which only workers started again see (TP104)."""
    if not isinstance(value, ast.Call):
        return False
    given = {
        a.id for a in (*value.args, *(k.value for k in value.keywords)) if isinstance(a, ast.Name)
    }
    return any(isinstance(o, ast.Name) and o.id in given for o in changed_objects(loop.body))


def _zeros_given(ctx: FileContext, call: ast.Call) -> list[str]:
    """The parameters of the project function ``call`` calls whose default is 0 and that the
    call gives another value."""
    from torchpace.lint.project import definition_of
    from torchpace.lint.values import int_value

    found = definition_of(ctx, call, ast.FunctionDef)
    if found is None:
        return []
    function = found[1]
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    return [
        name
        for name, default in parameter_defaults(function).items()
        if is_const(default, 0)
        and (given := argument(call, name, params.index(name) if name in params else 99))
        is not None
        and int_value(ctx, given) != 0  # not a constant or an option default of 0
    ]


def _class_of(ctx: FileContext, node: ast.AST) -> str | None:
    """The module-level class whose method ``node`` is in."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, ast.ClassDef):
            return ancestor.name if ancestor in ctx.tree.body else None
    return None


def lint_file(
    path: str, rules: Iterable[Rule], entries: frozenset[str] = frozenset()
) -> FileResult | LintError:
    """Lint one file; ``entries``: its functions another file calls per step (lint.project)."""
    limit = MAX_NOTEBOOK_BYTES if is_notebook(path) else MAX_PYTHON_BYTES
    try:
        size = os.stat(path).st_size
        if size > limit:  # checked before reading: never load a huge file into memory
            return LintError(path, _too_large(size, limit))
        data = Path(path).read_bytes()
    except OSError as exc:
        return LintError(path, exc.strerror or str(exc))
    return lint_source(path, data, rules, entries)


def lint_paths(paths: Sequence[str], rules: Sequence[Rule]) -> list[FileResult | LintError]:
    """Lint every file under ``paths`` serially; errors are returned in order, never raised."""
    return [
        item if isinstance(item, LintError) else lint_file(item, rules) for item in discover(paths)
    ]
