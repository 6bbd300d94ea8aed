"""What a value read in a call is by default, when the file says: the one home for reading a
script's options and config defaults, for lint's rules, ``apply``'s edits and ``compare``'s
step options (issue 32: rules read ``num_workers=args.workers`` as "some workers" where
``--workers`` defaults to 0; issue 31: edits and compare each read ``add_argument`` again).

:func:`origin` follows one name to where it is set:

- ``args.x``: the ``default=`` of the ``add_argument`` that defines ``x`` in this file
  (``--x``, or ``dest="x"``), or in the project file ``args`` comes from (``args =
  ArgsInit().save_exp()`` with ``ArgsInit`` imported from ``args.py``), a "flag";
- a bare name ``x``: the ``default=`` of a ``@click.option("--x", ...)`` on the function that
  reads it (a "flag"), else a module-level ``X = literal`` assigned once (a "constant");
- ``cfg.x`` (any object): the default of a field ``x`` declared in exactly one class of this
  file (a dataclass or a config class: ``num_workers: int = 0``), a "config".

Anything else, or more than one candidate, is None: the rules stay as they were.
:func:`options` lists every ``add_argument`` of the file with its names and default.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace

from torchpace.lint.loops import rewrites_globals
from torchpace.lint.project import imported_files, options_files, per_context
from torchpace.lint.rule import FileContext, keyword, parameter_names
from torchpace.lint.tree import subtree


@dataclass(frozen=True)
class Option:
    """One ``add_argument`` call: its option strings, argparse's ``dest``, its ``default=``."""

    names: tuple[str, ...]  # as written: ("-b", "--batch-size")
    dest: str
    default: ast.expr | None
    help: str = ""  # its help= text, where a literal
    choices: tuple[str, ...] = ()  # the strings of its choices=, where a literal list

    @property
    def flag(self) -> str:
        """The name a command line passes it by: the first long option, else the first name."""
        return next((n for n in self.names if n.startswith("--")), self.names[0])


@dataclass(frozen=True)
class Origin:
    """Where a value is set: ``value`` is the default's expression (None where the option or
    field has none), ``kind`` "flag", "config" or "constant", ``flag`` the option string."""

    value: ast.expr | None
    kind: str
    flag: str | None = None
    # set in another project file: ``value``'s positions are not this file's
    elsewhere: bool = False


def _dest_of(call: ast.Call, names: list[str]) -> str:
    """argparse's dest: the first long option, else the first name."""
    longs = [
        a.value.lstrip("-").replace("-", "_")
        for a in call.args
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")
    ]
    return (longs or names)[0]


def options(ctx: FileContext) -> list[Option]:
    """Every ``add_argument`` call of the file, in walk order."""
    found: list[Option] = []
    for call, _ in ctx.calls:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "add_argument"):
            continue
        written = tuple(
            a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        )
        if not written:
            continue
        dest = keyword(call, "dest")
        own = dest.value.value if dest and isinstance(dest.value, ast.Constant) else None
        names = [w.lstrip("-").replace("-", "_") for w in written]
        default = keyword(call, "default")
        value = default.value if default is not None else _action_default(call)
        said = keyword(call, "help")
        text = said.value.value if said and isinstance(said.value, ast.Constant) else ""
        dest_name = str(own) if own is not None else _dest_of(call, names)
        listed = keyword(call, "choices")
        offered = listed.value if listed is not None else None
        choices = tuple(
            e.value
            for e in (offered.elts if isinstance(offered, (ast.List, ast.Tuple, ast.Set)) else ())
            if isinstance(e, ast.Constant) and isinstance(e.value, str)
        )
        found.append(
            Option(written, dest_name, value, text if isinstance(text, str) else "", choices)
        )
    return _with_set_defaults(ctx, found)


def _with_set_defaults(ctx: FileContext, found: list[Option]) -> list[Option]:
    """``parser.set_defaults(workers=8, pin_mem=True)``: argparse's defaults for those dests,
    over what their ``add_argument`` says (MAE's ``--no_pin_mem`` with ``set_defaults(pin_mem=
    True)``; DeepSNAP's examples give every hyperparameter so). A dest no ``add_argument``
    declares is no option: no command line sets it."""
    given: dict[str, ast.expr] = {}
    for call, _ in ctx.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "set_defaults":
            given.update((k.arg, k.value) for k in call.keywords if k.arg is not None)
    if not given:
        return found
    return [replace(o, default=given[o.dest]) if o.dest in given else o for o in found]


def _action_default(call: ast.Call) -> ast.expr | None:
    """The default a ``store_true`` (False) or ``store_false`` (True) option has unsaid."""
    action = keyword(call, "action")
    kind = action.value.value if action and isinstance(action.value, ast.Constant) else None
    if kind in ("store_true", "store_false"):
        return ast.Constant(kind == "store_false")
    return None


_options_of = per_context(options, list[Option]())

# Options named for diagnostics: logging more, debugging, profiling, tracing, plotting, and
# synchronizing each step for exact host timings (timm's ``--synchronize-step``).
DEBUG_NAME = re.compile(
    r"(^|_)(verbose|debug\w*|dbg|profil\w*|trace|tracing|print\w*|show\w*|visuali[sz]\w*"
    r"|plot\w*|anomaly\w*|sanity\w*|synchroni[sz]e\w*)($|_)",
    re.I,
)

# What the help of an option for diagnostics says it does: visualising, plotting, measuring or
# monitoring something, debugging, profiling, a logging tool's name.
DEBUG_HELP = re.compile(
    r"\b(visuali[sz]\w*|plot\w*|measur\w*|monitor\w*|debug\w*|profil\w*|diagnos\w*"
    r"|visdom|tensorboard)\b",
    re.I,
)


def debug_flags_off(ctx: FileContext) -> frozenset[str]:
    """The dests of this file's options for diagnostics that are off unless asked for, by
    their name (``--verbose`` with ``store_true``, ``--debug`` defaulting to None or 0) or by
    their help (``--visdom``, "use visdom for loss visualization"; ``--gns``, "measure the
    gradient noise scale"): code under ``if args.verbose:`` is not what a run does by default
    (issue 32's verdict rules: "an opt-in debug flag")."""
    options = _options_of(ctx)
    off = {
        o.dest
        for o in options
        if (DEBUG_NAME.search(o.dest) or DEBUG_HELP.search(o.help))
        and (o.default is None or (isinstance(o.default, ast.Constant) and not o.default.value))
    }
    # ``opt.debug`` of an options object this file does not declare (CenterNet's trainers read
    # the ``opts`` of another file): a flag named for debugging or for an evaluation-only mode
    # alone is off unless asked for
    declared = {o.dest for o in options}
    # not an attribute the file sets itself (``self.verbose = verbose``: a constructor's
    # argument, whose value a caller of this file chooses), nor one of ``self``
    attributes = ctx.of_type(ast.Attribute)
    stored = {n.attr for n in attributes if isinstance(n.ctx, ast.Store)}
    off |= {
        n.attr
        for n in attributes
        if DEBUG_ONLY.match(n.attr)
        and n.attr not in declared | stored
        and not (isinstance(n.value, ast.Name) and n.value.id == "self")
    }
    return frozenset(off)


# The names of debugging switches, and of switches to an evaluation-only mode (CenterNet's
# ``if opt.test: self.save_result(...)`` in its shared train/val loop), whatever the file that
# declares them.
DEBUG_ONLY = re.compile(r"(debug|dbg|verbose|test|test_only|eval|eval_only|evaluate)$", re.I)


def _argparse_default(ctx: FileContext, attr: str, owner: str | None = None) -> list[Origin]:
    """The ``add_argument`` of ``attr`` in this file; else in the project files this file hands
    its parser to (kohya's scripts call ``train_util.add_training_arguments(parser)``); else,
    for ``owner.attr``, in the project file the options object ``owner`` comes from
    (deep_gcns' ``args = ArgsInit().save_exp()``, whose ``args.py`` declares the options)."""

    def declared(f: FileContext) -> list[Origin]:
        return [
            Origin(o.default, "flag", o.flag, f is not ctx)
            for o in _options_of(f)
            if o.dest == attr
        ]

    found = declared(ctx) or [found for f in imported_files(ctx) for found in declared(f)]
    if found or owner is None:
        return found
    return [found for f in options_files(ctx, owner) for found in declared(f)]


def _click_default(ctx: FileContext, name: str) -> list[Origin]:
    found: list[Origin] = []
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
                flag = longest if longest.startswith("-") else None
                found.append(Origin(default.value if default is not None else None, "flag", flag))
    return found


def _class_field(ctx: FileContext, attr: str) -> list[Origin]:
    found: list[Origin] = []
    for cls in ctx.of_type(ast.ClassDef):
        for stmt in cls.body:  # type: ignore[attr-defined]
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if stmt.target.id == attr:
                    found.append(Origin(_field_value(stmt.value), "config"))
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name) and target.id == attr:
                    found.append(Origin(stmt.value, "config"))
    return found


def _field_value(value: ast.expr | None) -> ast.expr | None:
    """A dataclass field's default: the value, or ``field(default=...)``'s."""
    if isinstance(value, ast.Call) and isinstance(value.func, (ast.Name, ast.Attribute)):
        name = value.func.id if isinstance(value.func, ast.Name) else value.func.attr
        if name == "field":
            default = keyword(value, "default")
            return default.value if default is not None else None
    return value


def _unpacked(target: ast.expr, value: ast.expr, name: str) -> ast.expr | None:
    """What ``name`` is bound to by ``target = value``: the value itself, or its element in a
    tuple assignment of as many values (``D, H, C = 2, 100, 3``); None if not bound there."""
    if isinstance(target, ast.Name):
        return value if target.id == name else None
    pairs = (
        zip(target.elts, value.elts, strict=True)
        if isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts)
        else ()
    )
    return next((v for t, v in pairs if isinstance(t, ast.Name) and t.id == name), None)


def _binds(node: ast.AST, name: str) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
        for t in targets
        for n in subtree(t)
    )


def _module_constant(ctx: FileContext, name: str) -> list[Origin]:
    """A module-level name bound once: ``X = literal``, or unpacked from a tuple of values;
    none in a file that runs a config into its globals (:func:`rewrites_globals`)."""
    if rewrites_globals(ctx.by_type):
        return []
    tree = ctx.tree
    body = tree.body if isinstance(tree, ast.Module) else []
    assigned = [n for n in ctx.of_type(ast.Assign, ast.AnnAssign, ast.AugAssign) if _binds(n, name)]
    if len(assigned) != 1 or assigned[0] not in body or isinstance(assigned[0], ast.AugAssign):
        return []
    node = assigned[0]
    if isinstance(node, ast.AnnAssign):
        return [Origin(node.value, "constant")]
    for target in node.targets:
        value = _unpacked(target, node.value, name)
        if value is not None:
            return [Origin(value, "constant")]
    return []


def module_bindings(ctx: FileContext, name: str) -> list[ast.expr] | None:
    """What a module-level name is bound to, where plain module-level assignments ``name =
    value`` are all that bind it (also more than once: a notebook cell run again with
    ``n_hidden = 8``); None where anything else binds it, or the file runs a config into its
    globals (:func:`rewrites_globals`)."""
    if rewrites_globals(ctx.by_type):
        return None
    body = ctx.tree.body if isinstance(ctx.tree, ast.Module) else []
    stores = sum(1 for n in ctx.of_type(ast.Name) if n.id == name and isinstance(n.ctx, ast.Store))
    values = [
        n.value
        for n in ctx.of_type(ast.Assign)
        if n in body
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and n.targets[0].id == name
    ]
    return values if values and len(values) == stores else None


def origin(ctx: FileContext, node: ast.expr | None) -> Origin | None:
    """Where ``node``'s value is set, where the file declares exactly one place (module docs)."""
    found: list[Origin] = []
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        found = _argparse_default(ctx, node.attr, node.value.id) or _class_field(ctx, node.attr)
    elif isinstance(node, ast.Attribute):
        found = _class_field(ctx, node.attr)  # self.cfg.num_workers
    elif isinstance(node, ast.Name):
        found = (
            _click_default(ctx, node.id)
            or _module_constant(ctx, node.id)
            or _local_constant(ctx, node)
        )
    return found[0] if len(found) == 1 else None


def _local_constant(ctx: FileContext, node: ast.Name) -> list[Origin]:
    """A name the scope it is read in binds once, with a plain ``name = literal`` (in a
    function that is not given it, or in the module's ``if __name__ == "__main__":`` block:
    rasbt's ``num_workers = 0`` then ``DataLoader(..., num_workers=num_workers)``)."""
    scope = ctx.enclosing_scope(node)
    if node.id in parameter_names(scope) or (
        isinstance(scope, ast.Module) and rewrites_globals(ctx.by_type)
    ):
        return []
    stores = [
        n
        for n in ctx.of_type(ast.Name)
        if n.id == node.id and isinstance(n.ctx, ast.Store) and ctx.enclosing_scope(n) is scope
    ]
    if len(stores) != 1 or any(node.id in n.names for n in ctx.of_type(ast.Global, ast.Nonlocal)):
        return []
    parent = ctx.parents.get(id(stores[0]))
    if (
        isinstance(parent, ast.Assign)
        and parent.targets == [stores[0]]
        and isinstance(parent.value, ast.Constant)
    ):
        return [Origin(parent.value, "constant")]
    return []


def option_default(ctx: FileContext, node: ast.expr | None) -> ast.expr | None:
    """The default ``node`` starts as, where the file declares exactly one (module docs)."""
    where = origin(ctx, node)
    return None if where is None else where.value


def int_value(ctx: FileContext, node: ast.expr | None) -> int | None:
    """``node`` as an int: a literal, or the literal default :func:`option_default` finds."""
    for candidate in (node, option_default(ctx, node)):
        if isinstance(candidate, ast.Constant) and type(candidate.value) is int:
            return candidate.value
    return None
