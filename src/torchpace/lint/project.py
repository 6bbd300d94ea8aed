"""Project-level facts: helpers in one linted file that another calls on every step, and model
classes defined in another file.

A training loop often calls helpers kept in another file of the same project: DINO's
``utils.clip_gradients(model, clip)`` reads every parameter's norm with ``.item()``, MAE's
``misc.all_reduce_mean(loss)`` builds a tensor on the host and moves it, once per step. Per file,
the loop's file sees a call it cannot follow and the helper's file sees no loop, so both stayed
silent (issue 16, benchmarks/realworld/).

Linting records, per file whose loops were analysed and that may use an accelerator, the calls
its hot code makes to functions imported from another module (``import utils`` +
``utils.f()``, ``from util.misc import f`` + ``f()``, ``from .solver import Solver`` in a
package; :func:`torchpace.lint.engine.calls_out`), and the modules it hands its CUDA device or a
model it moved there to (``Solver(loaders, model, optimizer)`` after ``model.cuda()``).
:func:`step_callees` resolves each module to a linted file beside the caller or in a directory
above it (up to :data:`MAX_LEVELS`), and the command lints those files once more with the
functions as hot entry points (:func:`torchpace.lint.loops.analyse`), on the device their caller
uses. Module-level functions are followed, methods of a class another file's loop uses (a
model's ``forward``, ``logger.update``), the ``forward`` of the module classes of other files
that such a model builds in its ``__init__`` (up to :data:`MODEL_DEPTH` files deep), and the
overrides a subclass in another file makes of a method its base class's training loop calls on
``self`` (a base trainer's ``train()`` calling ``self.get_noise_pred_and_target(...)``), and the
functions of other files whose DataLoaders a training loop re-iterates every epoch
(``train_loader = loader.construct_loader(cfg, "train")``: TP104 reads what they build), and
those it runs in reduced precision (inside ``with torch.autocast(...)``, or handed a model wrapped
with a mixed-precision policy: TP302 leaves their loops alone). The functions and classes of
another file that a module's forward calls (FastSpeech 2's ``get_mask_from_lengths``), and that
the step code of a file linted again calls in a further file (VITS's
``commons.rand_slice_segments``), are read there as a forward's code is
(:data:`~torchpace.lint.loops.FORWARD`; :func:`forward_callees`), not as a loop's. No file
is parsed twice unless another file's loop or forward calls into it.
"""

from __future__ import annotations

import ast
import builtins
import functools
import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from torchpace.lint.engine import (
    EPOCH_LOADER,
    GIVEN,
    MAX_PYTHON_BYTES,
    PRECISION,
    SUBCLASS,
    parse,
)
from torchpace.lint.imports import Resolver
from torchpace.lint.loops import FORWARD, PLAIN, dotted, root_name
from torchpace.lint.results import FileResult
from torchpace.lint.rule import FileContext, argument, per_file
from torchpace.lint.tree import children, subtree

T = TypeVar("T")

# How far above the calling file a module is looked for: scripts import siblings (``import
# utils``) or packages rooted one or two directories up (``from util.misc import f``).
MAX_LEVELS = 3


def project_key(path: str | Path) -> str:
    return os.path.normcase(os.path.abspath(path))


def _candidates(module: str, folder: Path, level: int = 0) -> Iterator[Path]:
    """The files ``import module`` from a file in ``folder`` may mean, nearest first: beside it
    or up to :data:`MAX_LEVELS` directories above (``level`` > 0: a relative import, from the
    caller's package)."""
    parts = [p for p in module.split(".") if p]
    bases = [folder, *folder.parents]
    for base in bases[level - 1 : level] if level else bases[: MAX_LEVELS + 1]:
        yield base.joinpath(*parts).with_suffix(".py") if parts else base / "__init__.py"
        yield base.joinpath(*parts, "__init__.py")


def module_file(module: str, caller: Path, linted: dict[str, str]) -> str | None:
    """The linted file that ``import module`` from ``caller`` most likely means (``.solver``, a
    relative import, from the caller's package)."""
    name = module.lstrip(".")
    level = len(module) - len(name)
    found = _candidates(name, caller.parent, level)
    return next((k for c in found if (k := project_key(c)) in linted), None)


def step_callees(results: Sequence[FileResult]) -> dict[str, frozenset[str]]:
    """For each linted file, the names of its module-level functions that another linted file
    calls on every training step (module doc), from the first pass's ``calls_out``."""
    linted = {project_key(r.path): r.path for r in results if not r.notebook}
    sources = {project_key(r.path): r.source for r in results if not r.notebook}
    found: dict[str, set[str]] = defaultdict(set)
    hooks: dict[tuple[str, str], set[str]] = defaultdict(set)  # (file, class) → self-called
    forwards: list[tuple[str, str, str]] = []  # (caller, callee, FORWARD + name)
    for r in results:
        for module, function in r.calls_out:
            if module == SUBCLASS:
                cls, method = function.split(".", 1)
                hooks[(project_key(r.path), cls)].add(method)
                continue
            target = module_file(module, Path(r.path), linted)
            if target is not None and target != project_key(r.path):
                kinds = (EPOCH_LOADER, GIVEN, PRECISION, FORWARD, PLAIN)
                kind = next((m for m in kinds if function.startswith(m)), "")
                head, dot, rest = function.removeprefix(kind).partition(".")
                target, head = _defining(target, head, linted, sources)
                if kind == FORWARD:
                    forwards.append((project_key(r.path), target, kind + head))
                else:
                    found[target].add(kind + head + dot + rest)
    _add_submodule_forwards(found, linted)
    for caller, target, entry in forwards:
        if caller not in found:  # else linted again with its loops' calls: they decide
            found[target].add(entry)
    if hooks:
        # a module-level ``class X(... Base ...)`` naming one of the classes: the cheap test
        # before a file is parsed for its subclasses
        bases = re.compile(
            rb"^class\s+\w+\s*\([^)]*\b("
            + b"|".join(re.escape(c.encode()) for _, c in hooks)
            + rb")\b",
            re.MULTILINE,
        )
        for r in results:
            if not r.notebook and bases.search(r.source):
                for entry in _overrides(r, hooks):
                    found[project_key(r.path)].add(entry)
    return {linted[k]: frozenset(v) for k, v in found.items()}


def forward_callees(
    again: Sequence[FileResult], results: Sequence[FileResult], entered: dict[str, frozenset[str]]
) -> dict[str, frozenset[str]]:
    """For the files linted again with entry points (``again``), the functions and classes of
    further linted files (of ``results``) their step code calls, as
    :data:`~torchpace.lint.loops.FORWARD` entries: read there as a forward's code is (TP207's
    host-built tensors), not as a loop's hot code. A file ``entered`` already keeps its entries
    beside the new ones."""
    linted = {project_key(r.path): r.path for r in results if not r.notebook}
    sources = {project_key(r.path): r.source for r in results if not r.notebook}
    found: dict[str, set[str]] = defaultdict(set)
    for r in again:
        for module, function in r.calls_out:
            if module.startswith("@") or (
                function.startswith("@") and not function.startswith((FORWARD, PLAIN))
            ):
                continue
            name = function.removeprefix(FORWARD).removeprefix(PLAIN)
            if "." in name:
                continue  # a method of an instance: its class is not read as a forward's
            target = module_file(module, Path(r.path), linted)
            if target is None or target == project_key(r.path):
                continue
            target, name = _defining(target, name, linted, sources)
            had = entered.get(linted[target], frozenset())
            if name not in had and FORWARD + name not in had:
                found[target].add(FORWARD + name)
    # A file entered already is linted once more with all of its entries.
    return {linted[k]: frozenset(v) | entered.get(linted[k], frozenset()) for k, v in found.items()}


def _defines(source: bytes, name: str) -> bool:
    """Whether the file's text has a module-level ``class name`` or ``def name``: the cheap
    test before a file is parsed to follow a re-export."""
    return name in _top_level_names(source)


@functools.lru_cache(maxsize=256)
def _top_level_names(source: bytes) -> frozenset[str]:
    return frozenset(m.decode() for m in _TOP_LEVEL.findall(source))


_TOP_LEVEL = re.compile(rb"^(?:class|def|async\s+def)\s+(\w+)", re.M)


# How many re-exports a name is followed through: a package's __init__ naming a module's class.
REEXPORT_DEPTH = 3


def _defining(
    key: str, name: str, linted: dict[str, str], sources: dict[str, bytes] | None = None
) -> tuple[str, str]:
    """The linted file that defines ``name``, which the file ``key`` may only re-export
    (ssd.pytorch's ``layers/modules/__init__.py``: ``from .multibox_loss import MultiBoxLoss``),
    and the name it has there; ``key`` itself where it defines the name, or where the chain
    leaves the linted files. ``sources``: the files' bytes the first pass already read."""
    for _ in range(REEXPORT_DEPTH):
        path = Path(linted[key])
        version = _version(path)
        if version is None:
            return key, name
        try:
            source = sources[key] if sources and key in sources else path.read_bytes()
        except OSError:
            return key, name
        if _defines(source, name):
            return key, name
        imported = next(
            (
                (node, alias.name)
                for node in _top_imports(*version)  # the import lines only, not the whole file
                if isinstance(node, ast.ImportFrom)
                for alias in node.names
                if (alias.asname or alias.name) == name
            ),
            None,
        )
        if imported is None:
            return key, name
        node, original = imported
        found = find_module(node.module or "", path, node.level)
        if found is None or project_key(found) not in linted:
            return key, name
        key, name = project_key(found), original
    return key, name


# How many files deep a model's submodules are followed: a model, its blocks, their layers.
MODEL_DEPTH = 3


def _add_submodule_forwards(found: dict[str, set[str]], linted: dict[str, str]) -> None:
    """Add to ``found`` the ``forward`` of every module class of another linted file that the
    ``__init__`` of a model class whose forward runs every step builds (ogb's ``GNN`` builds
    ``GNN_node_Virtualnode`` of conv.py; VITS's generator its flows of modules.py): what a model
    builds in ``__init__`` its forward runs, so those forwards run every step too. Up to
    :data:`MODEL_DEPTH` files deep; only module classes, never helper functions as hot code
    (following those a second file deep found more false findings than true ones; they are read
    as a forward's code instead, :func:`forward_callees`)."""
    todo = [(key, name) for key, names in found.items() for name in names]
    depth = {item: 1 for item in todo}
    while todo:
        key, name = todo.pop()
        cls_name, _, method = name.partition(".")
        if method != "forward" or depth[(key, name)] >= MODEL_DEPTH:
            continue
        ctx = _parsed(Path(linted[key]))
        cls = None if ctx is None else _top_level(ctx, cls_name)
        if ctx is None or not isinstance(cls, ast.ClassDef):
            continue
        for call in _built_in_init(ctx, cls):
            for path, other in imported_from(ctx, call):
                target = project_key(path)
                if target not in linted or target == key:
                    continue
                target, other = _defining(target, other, linted)  # through a package's __init__
                path = Path(linted[target])
                if target == key:
                    continue
                defined = defined_in(path, other)
                if defined is None or not isinstance(defined[1], ast.ClassDef):
                    continue
                if plain_class(defined[0], defined[1]):
                    continue  # a logger, a config: no forward
                entry = f"{other}.forward"
                if entry not in found[target]:
                    found[target].add(entry)
                    depth[(target, entry)] = depth[(key, name)] + 1
                    todo.append((target, entry))


def _init_calls(cls: ast.ClassDef) -> list[ast.Call]:
    """The calls of ``cls.__init__`` and of the methods it calls on ``self``, transitively
    (pytorch_geometric_temporal's ``A3TGCN2.__init__`` builds its layers in
    ``self._setup_layers()``)."""
    methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
    todo = [methods["__init__"]] if "__init__" in methods else []
    seen = {"__init__"}
    out: list[ast.Call] = []
    while todo:
        for call in (n for n in subtree(todo.pop()) if isinstance(n, ast.Call)):
            out.append(call)
            func = call.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
                and func.attr in methods
                and func.attr not in seen
            ):
                seen.add(func.attr)
                todo.append(methods[func.attr])
    return out


def _built_in_init(ctx: FileContext, cls: ast.ClassDef) -> list[ast.Call]:
    """The calls of capitalised names (classes, by their name) in the ``__init__`` of ``cls``
    (and the methods it calls on ``self``) and of the classes of the same file it builds there,
    transitively (VITS's
    ``SynthesizerTrn`` builds its ``ResidualCouplingBlock``, which builds ``modules.Flip()``)."""
    out: list[ast.Call] = []
    seen = {cls.name}
    todo = [cls]
    while todo:
        node = todo.pop()
        for call in _init_calls(node):
            if not isinstance(call.func, (ast.Name, ast.Attribute)):
                continue
            last = (dotted(call.func) or "").rsplit(".", 1)[-1]
            if not last[:1].isupper():
                continue
            out.append(call)
            own = _top_level(ctx, last) if isinstance(call.func, ast.Name) else None
            if isinstance(own, ast.ClassDef) and own.name not in seen:
                seen.add(own.name)
                todo.append(own)
    return out


def _overrides(result: FileResult, hooks: dict[tuple[str, str], set[str]]) -> Iterator[str]:
    """``Class.method`` for each class of this file that subclasses a class of another file
    whose training loop calls ``self.method()``, and overrides that method: the loop runs the
    override every step (a base trainer's ``train()`` and a model family's trainer that
    subclasses it)."""
    ctx = _parsed(Path(result.path))
    if ctx is None:
        return
    for node in ctx.tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        methods = {
            m.name for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        for base in node.bases:
            probe = ast.Call(func=base, args=[], keywords=[])
            for path, cls in imported_from(ctx, probe):
                for method in hooks.get((project_key(path), cls), set()) & methods:
                    yield f"{node.name}.{method}"


# --------------------------------------------------------------------------- model classes

# Conv layers, as TP303 counts them in a file (convs._CONV_MODULES; repeated here to keep this
# module free of rule imports), and the functional convolutions that a module of another file
# runs on what it is handed (:func:`_conv_layer` says when they count).
_CONV_LAYERS = frozenset(
    f"torch.nn.{kind}{d}" for kind in ("Conv", "ConvTranspose") for d in ("1d", "2d", "3d")
) | frozenset(  # a module that keeps its own weights and convolves with them in its forward
    # (StyleGAN 2's modulated convolutions): cuDNN runs and tunes those the same way
    f"torch.nn.functional.{kind}{d}d"
    for kind in ("conv", "conv_transpose")
    for d in "123"
)
# torchvision.models functions that are not model constructors.
_NOT_MODELS = frozenset({"get_model", "get_model_weights", "get_weight", "list_models"})


def find_module(module: str, caller: Path, level: int = 0) -> Path | None:
    """The file ``import module`` means from ``caller`` (see :func:`_candidates`); the files
    of one folder import the same modules, so each lookup is made once per folder and run
    (the folder made absolute: a relative one means another folder once the process moves)."""
    return _find_module(module, caller.parent.absolute(), level)


@functools.lru_cache(maxsize=4096)
def _find_module(module: str, folder: Path, level: int) -> Path | None:
    return next((c for c in _candidates(module, folder, level) if c.is_file()), None)


def imported_from(ctx: FileContext, call: ast.Call) -> Iterator[tuple[Path, str]]:
    """The project files and names that ``call``'s callee may come from: ``utils.f()`` with
    ``import utils``, ``f()`` with ``from utils import f`` (absolute, relative, or with ``*``)."""
    caller = Path(ctx.path)
    target = ctx.names.dotted(call.func)
    if target is not None and "." in target:
        module, name = target.rsplit(".", 1)
        path = find_module(module, caller)
        if path is not None:
            yield path, name
        return
    if not isinstance(call.func, ast.Name):
        return
    wanted = call.func.id
    for node in ctx.of_type(ast.ImportFrom):
        names = {a.asname or a.name: a.name for a in node.names}
        if "*" not in names and wanted not in names:
            continue
        path = find_module(node.module or "", caller, node.level)
        if path is not None:
            yield path, names.get(wanted, wanted)


def star_bindings(path: str, node: ast.ImportFrom) -> dict[str, str]:
    """The names ``from module import *`` at the top of the file at ``path`` brings in from
    the imports of a project module (``from loader.DataGenerater import *``, whose
    ``import torch.utils.data as Data`` makes ``Data.DataLoader`` a DataLoader here): its own
    import bindings, one level; none for a module that is not a project file."""
    found = find_module(node.module or "", Path(path), node.level)
    version = None if found is None else _version(found)
    return {} if version is None else _import_bindings(*version)


@functools.lru_cache(maxsize=64)
def _import_bindings(path: Path, mtime_ns: int, size: int) -> dict[str, str]:
    """The bindings of the file's top-level import statements (:func:`_top_imports`)."""
    return Resolver.from_nodes(list(_top_imports(path, mtime_ns, size))).bindings


@functools.lru_cache(maxsize=256)
def _top_imports(path: Path, mtime_ns: int, size: int) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """The file's top-level import statements, parsed alone: the lines that start at column 0
    with ``import`` or ``from``, with their continuation lines (a whole module can be large,
    and only its imports are wanted)."""
    try:
        lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return ()
    imports: list[ast.stmt] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.startswith(("import ", "from ")):
            continue
        statement = [line]
        depth = line.count("(") - line.count(")")
        while i < len(lines) and (depth > 0 or statement[-1].rstrip().endswith("\\")):
            depth += lines[i].count("(") - lines[i].count(")")
            statement.append(lines[i])
            i += 1
        try:
            imports += ast.parse("\n".join(statement)).body
        except (SyntaxError, ValueError):
            continue
    return tuple(n for n in imports if isinstance(n, (ast.Import, ast.ImportFrom)))


def definition(ctx: FileContext, call: ast.Call) -> tuple[FileContext, ast.stmt] | None:
    """The module-level class or function ``call`` calls, with the parsed file that defines
    it: this file's own, or one imported from a project file (:func:`imported_from`)."""
    if isinstance(call.func, ast.Name):
        own = _top_level(ctx, call.func.id)
        if own is not None:
            return (ctx, own)
    for path, name in imported_from(ctx, call):
        found = defined_in(path, name)
        if found is not None:
            return found
    return None


def defined_in(path: Path, name: str) -> tuple[FileContext, ast.stmt] | None:
    """The module-level class or function ``name`` of the file at ``path``, with that file; or,
    where the file only re-exports it (``utils/__init__.py``: ``from .comm import synchronize``),
    of the project file it comes from, as :func:`_defining` follows it (``REEXPORT_DEPTH``)."""
    for _ in range(REEXPORT_DEPTH):
        version = _version(path)
        other = None if version is None else _parsed_version(*version)
        if other is None:
            return None
        found = _top_level(other, name)
        if found is not None:
            return (other, found)
        assert version is not None
        imported = next(
            (
                (node, alias.name)
                for node in _top_imports(*version)
                if isinstance(node, ast.ImportFrom)
                for alias in node.names
                if (alias.asname or alias.name) == name
            ),
            None,
        )
        if imported is None:
            return None
        node, name = imported
        source = find_module(node.module or "", path, node.level)
        if source is None:
            return None
        path = source
    return None


Defined = TypeVar("Defined", ast.ClassDef, ast.FunctionDef)

# Bases that make a class no module: Python's own, and the standard library's abstract and
# typing helpers. A base from anywhere else (a library's model, a class of the project) may be one.
_PLAIN_BASES = frozenset({"object", "Exception", "dict", "list", "tuple", "str"})
_PLAIN_MODULES = ("abc.", "typing.", "enum.", "collections.", "dataclasses.")


def plain_class(where: FileContext, cls: ast.ClassDef) -> bool:
    """``cls`` derives from nothing but ``object`` or the standard library (``class Logger:``,
    ``class Meter(ABC):``): no ``nn.Module``, so no weights and nothing a device computes."""
    for base in cls.bases:
        name = where.names.qualname(base) or ""
        if name.startswith(_PLAIN_MODULES):
            continue
        if (
            isinstance(base, ast.Name)
            and base.id in _PLAIN_BASES
            and base.id not in where.names.bindings
            and _top_level(where, base.id) is None
        ):
            continue
        return False
    return True


def definition_of(
    ctx: FileContext, call: ast.Call, kind: type[Defined]
) -> tuple[FileContext, Defined] | None:
    """:func:`definition`, where it is a ``kind`` (a class, or a function)."""
    found = definition(ctx, call)
    if found is None or not isinstance(found[1], kind):
        return None
    return found[0], found[1]


def _top_level(ctx: FileContext, name: str) -> ast.stmt | None:
    """The file's module-level class or function of that name (the last, as Python binds it)."""
    found = [
        n
        for n in ctx.tree.body
        if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name
    ]
    return found[-1] if found else None


def _parsed(path: Path) -> FileContext | None:
    """The file at ``path``, parsed once per process and version (a project's models.py is
    imported by every script beside it; a file edited since is parsed again)."""
    version = _version(path)
    return None if version is None else _parsed_version(*version)


def _version(path: Path) -> tuple[Path, int, int] | None:
    """The key a file's cached readings are kept under: its resolved path, modification time
    and size; None for a file that cannot be read or is over :data:`MAX_PYTHON_BYTES`."""
    try:
        st = path.stat()
    except OSError:
        return None
    if st.st_size > MAX_PYTHON_BYTES:
        return None
    return (path.resolve(), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _parsed_version(path: Path, mtime_ns: int, size: int) -> FileContext | None:
    try:
        ctx = parse(str(path), path.read_bytes())
    except OSError:
        return None
    return ctx if isinstance(ctx, FileContext) else None


def per_context(own: Callable[[FileContext], T], empty: T) -> Callable[[FileContext | None], T]:
    """``own(ctx)``, computed once per parsed file version (:func:`~torchpace.lint.rule.per_file`:
    kept on the context); ``empty`` for a file that could not be parsed."""
    once = per_file(own)

    def cached(ctx: FileContext | None) -> T:
        return empty if ctx is None else once(ctx)

    return cached


def _imported_files_of(ctx: FileContext) -> tuple[FileContext, ...]:
    if b"ArgumentParser" not in ctx.source:
        return ()
    parsers = {
        t.id
        for node in ctx.of_type(ast.Assign)
        if isinstance(node.value, ast.Call)
        and ctx.names.qualname(node.value.func) == "argparse.ArgumentParser"
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    found: list[Path] = []
    for call, _ in ctx.calls:  # ``train_util.add_training_arguments(parser)``
        given = [*call.args, *(k.value for k in call.keywords)]
        if any(isinstance(a, ast.Name) and a.id in parsers for a in given):
            found += [path for path, _ in imported_from(ctx, call)]
    own = Path(ctx.path).resolve()
    files = (_parsed(p) for p in dict.fromkeys(found) if p.resolve() != own)
    return tuple(f for f in files if f is not None)


_imported_files = per_context(_imported_files_of, tuple[FileContext, ...]())


def options_files(ctx: FileContext, name: str) -> tuple[FileContext, ...]:
    """The project files an options object ``name`` of this file comes from: what the file
    binds it to, at module level or in any function, is a call into another project file
    (deep_gcns' ``args = ArgsInit().save_exp()``, ``opt = get_opts()``), the root of a chain of
    calls; each such file, parsed once. Its ``add_argument`` declarations are the options' own.
    Found once per file and name: every ``args.x`` read that this file does not declare asks."""
    cache: dict[str, tuple[FileContext, ...]] = ctx.__dict__.setdefault("_tp_options_files", {})
    if name not in cache:
        cache[name] = _options_files(ctx, name)
    return cache[name]


def _options_files(ctx: FileContext, name: str) -> tuple[FileContext, ...]:
    roots: list[ast.Call] = []
    for node in ctx.of_type(ast.Assign):
        if not any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            continue
        value: ast.expr = node.value
        while isinstance(value, ast.Call):
            roots.append(value)
            func = value.func
            value = func.value if isinstance(func, ast.Attribute) else func
    found: dict[int, FileContext] = {}
    for call in roots:
        defined = definition(ctx, call)  # follows re-exports (``utils/__init__.py``)
        if defined is None or defined[0] is ctx:
            continue
        where, node = defined
        if any(
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "add_argument"
            for n in ast.walk(node)
        ):
            found[id(where)] = where  # the class or function called declares options itself
    return tuple(found.values())


def imported_files(ctx: FileContext) -> tuple[FileContext, ...]:
    """The project files whose functions this file hands its argparse parser to, to declare
    options (``train_util.add_training_arguments(parser)``), parsed once."""
    return _imported_files(ctx)


def _star_sources(ctx: FileContext, path: Path) -> list[Path]:
    """The project files whose names ``path`` re-exports with ``from .x import *`` at module
    level: a package's ``__init__.py`` (d2l's ``from .base import *``)."""
    out = []
    for node in ctx.tree.body:
        if isinstance(node, ast.ImportFrom) and [a.name for a in node.names] == ["*"]:
            found = find_module(node.module or "", path, node.level)
            if found is not None and found != path:
                out.append(found)
    return out


def is_conv_class(path: Path, name: str, depth: int = MODEL_DEPTH) -> bool:
    """Whether ``name`` in the file at ``path`` is a class or module-level function that builds
    conv layers: directly or through other classes and functions of the same file (a ResNet
    built from its Bottleneck blocks; YOLOv3's ``Darknet`` from ``create_modules``, and
    ``load_model`` that returns one), or through the blocks it imports from another project file
    (a U-Net built from its ``unet_parts.py``); or a name the file re-exports from another
    project file (a package's ``__init__.py``: ``from .x import *``, ``from .unet_model import
    UNet``); up to :data:`MODEL_DEPTH` files deep. Only the imports a question needs are read,
    each file version once per run (:func:`new_run`)."""
    version = _version(path)
    if version is None:
        return False
    ctx = _parsed_version(*version)
    if ctx is None:
        return False
    if name in _builders(ctx):
        return name in _file_conv_classes(version, depth)
    source = _imported_name(ctx, name=name)
    return depth > 0 and source is not None and is_conv_class(*source, depth - 1)


@per_file
def _builders(ctx: FileContext) -> dict[str, ast.AST]:
    """The file's classes (at any level) and module-level functions, by name."""
    builders: dict[str, ast.AST] = {c.name: c for c in ctx.of_type(ast.ClassDef)}
    builders.update((n.name, n) for n in ctx.tree.body if isinstance(n, ast.FunctionDef))
    return builders


@per_file
def _imported_name(ctx: FileContext, *, name: str) -> tuple[Path, str] | None:
    """The project file and the name there that ``name`` is imported from at module level: by
    name (``from .unet_model import UNet``, also under ``as``), else through a ``*`` import of a
    file that defines it or imports it by name (one level)."""
    named, stars = _import_table(ctx)
    if name in named:
        return named[name]
    for found in stars:
        other = _parsed(found)
        if other is None:
            continue
        if name in _builders(other) or name in _import_table(other)[0]:
            return found, name
    return None


@per_file
def _import_table(ctx: FileContext) -> tuple[dict[str, tuple[Path, str]], list[Path]]:
    """The project files the file imports names from at module level (local name → the file and
    its name there), and the files it ``*``-imports; looked up once per file."""
    path = Path(ctx.path)
    named: dict[str, tuple[Path, str]] = {}
    stars: list[Path] = []
    for node in ctx.tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        found = find_module(node.module or "", path, node.level)
        if found is None or found == path:
            continue
        for alias in node.names:
            if alias.name == "*":
                stars.append(found)
            else:
                named.setdefault(alias.asname or alias.name, (found, alias.name))
    return named, stars


def _file_conv_classes(version: tuple[Path, int, int], depth: int) -> frozenset[str]:
    """The conv builders of a file (see :func:`is_conv_class`), once per version and depth."""
    key = (*version, depth)
    found = _CONV_CLASSES.get(key)
    if found is None:
        _CONV_CLASSES[key] = frozenset()  # an import cycle reads no conv classes through itself
        ctx = _parsed_version(*version)
        found = frozenset() if ctx is None else _conv_classes_of(ctx, version[0], depth)
        _CONV_CLASSES[key] = found
    return found


# _file_conv_classes' readings in this run, by file version and depth.
_CONV_CLASSES: dict[tuple[Path, int, int, int], frozenset[str]] = {}


def new_run() -> None:
    """Forget what was read of other files that depends on files other than the one read (a
    file's conv classes depend on what it imports), and where modules were found (a file may
    have been added since): each lint run reads them afresh."""
    _CONV_CLASSES.clear()
    _find_module.cache_clear()


def _conv_classes_of(ctx: FileContext, path: Path, depth: int) -> frozenset[str]:
    """The file's conv builders. A layer built only when an option asks for it
    (``nn.Conv2d(h, h, 1) if talking_heads else None``, an ``if`` without a convolution in its
    ``else``) does not make a conv net."""
    builders = _builders(ctx)
    calls = {
        name: [n for n in subtree(node) if isinstance(n, ast.Call)]
        for name, node in builders.items()
    }
    called = {c.func.id for cs in calls.values() for c in cs if isinstance(c.func, ast.Name)}
    imported: set[str] = set()
    # ``models.ImageDenoiserModelV1(...)`` with ``from . import models`` (k-diffusion's
    # ``make_model``): a class of a project module the file imports whole
    through: set[tuple[str, str]] = set()
    if depth > 0:
        for name in called - builders.keys():
            source = _imported_name(ctx, name=name)
            if source is not None and is_conv_class(*source, depth - 1):
                imported.add(name)
        attributes = {
            (c.func.value.id, c.func.attr)
            for cs in calls.values()
            for c in cs
            if isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
        }
        modules = _imported_modules(ctx) if attributes else {}
        for module, attr in attributes:
            found_in = modules.get(module)
            if found_in is not None and is_conv_class(found_in, attr, depth - 1):
                through.add((module, attr))
    found: set[str] = set()

    def conv(call: ast.Call) -> bool:
        func = call.func
        if isinstance(func, ast.Name) and (func.id in imported or func.id in found):
            return True
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and (func.value.id, func.attr) in through
        ):
            return True
        return _conv_layer(ctx, call)

    # Only a builder that calls a conv layer or another builder or import can be one; not a
    # dataset (Tacotron's ``TextMelLoader`` computes mel spectrograms with an STFT's convs).
    candidates = {
        name
        for name, cs in calls.items()
        if any(
            (isinstance(c.func, ast.Name) and (c.func.id in builders or c.func.id in imported))
            or _conv_layer(ctx, c)
            or (conv(c) and isinstance(c.func, ast.Attribute))
            for c in cs
        )
        and not _a_dataset(builders[name])
    }
    # The least fixed point (the reading only grows with ``found``): a builder is read again only
    # once a builder it calls by name has been found, not on every pass over all of them.
    named = {n: {c.func.id for c in calls[n] if isinstance(c.func, ast.Name)} for n in candidates}
    pending, recheck = set(candidates), set(candidates)
    while recheck:
        newly = {name for name in recheck if _always_builds(builders[name], conv)}
        found |= newly
        pending -= newly
        recheck = {name for name in pending if not named[name].isdisjoint(newly)}
    return frozenset(found)


def _conv_layer(ctx: FileContext, call: ast.Call) -> bool:
    """A conv layer built (``nn.Conv2d(...)``), or a convolution a module runs in a method on
    what it is handed (``F.conv2d(input, self.weight)``), or that a function returns (a
    wrapper of ``F.conv2d``: StyleGAN 2's ``conv2d_gradfix.conv2d``); not one of a module's own
    tensors alone (LoRA's ``F.conv1d(self.lora_A.unsqueeze(0), self.lora_B.unsqueeze(-1))``, a
    product of weights), nor one a function computes and keeps (merging a LoRA's conv weights
    into a state dict)."""
    qual = ctx.names.qualname(call.func)
    if qual not in _CONV_LAYERS:
        return False
    if not qual.startswith("torch.nn.functional."):
        return True
    given = argument(call, "input", 0)
    if given is None or root_name(given) == "self":
        return False
    return isinstance(ctx.parents.get(id(call)), ast.Return) or any(
        isinstance(a, ast.ClassDef) for a in ctx.ancestors(call)
    )


def _a_dataset(node: ast.AST) -> bool:
    return isinstance(node, ast.ClassDef) and any(
        (dotted(b) or "").endswith(("Dataset", "IterableDataset")) for b in node.bases
    )


@per_file
def _imported_modules(ctx: FileContext) -> dict[str, Path]:
    """The project modules the file imports whole at module level, by their local name:
    ``from . import models`` (a package's submodule), ``import utils``, ``import a.b as b``."""
    path = Path(ctx.path)
    out: dict[str, Path] = {}
    for node in ctx.tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    continue
                module = f"{node.module}.{alias.name}" if node.module else alias.name
                found = find_module(module, path, node.level)
                if found is not None and found != path:
                    out.setdefault(alias.asname or alias.name, found)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found = find_module(alias.name, path)
                if found is not None and found != path:
                    out.setdefault(alias.asname or alias.name.split(".")[0], found)
    return out


def _always_builds(node: ast.AST, wanted: Callable[[ast.Call], bool]) -> bool:
    """A call ``wanted`` runs under ``node`` whichever way its option flags go: in both
    branches of an ``if`` or a conditional expression on a flag (``if bilinear:``,
    ``... if talking_heads else None``), or outside any. A branch on a comparison dispatches on
    a configuration (YOLOv3's ``if module_def["type"] == "convolutional":``): it counts."""
    if isinstance(node, (ast.If, ast.IfExp)) and _is_flag(node.test):
        body = node.body if isinstance(node.body, list) else [node.body]
        orelse = node.orelse if isinstance(node.orelse, list) else [node.orelse]
        return any(_always_builds(n, wanted) for n in body) and any(
            _always_builds(n, wanted) for n in orelse
        )
    if isinstance(node, ast.Call) and wanted(node):
        return True
    return any(_always_builds(kid, wanted) for kid in children(node))


def _is_flag(test: ast.expr) -> bool:
    """``flag``, ``self.flag``, ``args.flag``, ``not flag``: an option, not a comparison."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    return dotted(test) is not None


# Conv nets of model libraries, known by what they are: diffusion UNets and VAEs (diffusers),
# segmentation nets (segmentation_models_pytorch), EfficientNet; each built by its class or by
# one of the class's loaders.
_LIBRARY_CONV_NETS = {
    "diffusers": frozenset(
        {
            *("UNet1DModel", "UNet2DModel", "UNet2DConditionModel", "UNet3DConditionModel"),
            *("UNetSpatioTemporalConditionModel", "UNetMotionModel", "ControlNetModel"),
            *("AutoencoderKL", "AsymmetricAutoencoderKL", "AutoencoderTiny", "VQModel"),
        }
    ),
    "segmentation_models_pytorch": frozenset(
        {"Unet", "UnetPlusPlus", "FPN", "PSPNet", "DeepLabV3", "DeepLabV3Plus", "Linknet"}
        | {"PAN", "MAnet"}
    ),
    "efficientnet_pytorch": frozenset({"EfficientNet"}),
}
_LOADERS = frozenset({"from_pretrained", "from_config", "from_name", "from_single_file"})
# timm's convolutional families, by the name ``timm.create_model`` is given (a weight tag after a
# dot, a hub prefix and a weights-origin prefix aside); vision transformers, whose only
# convolution is the patch embedding, are not among them.
_TIMM_CONV_FAMILIES = re.compile(
    r"(?:hf[-_]hub:)?(?:timm/)?(?:tf_|gluon_|legacy_|ig_|ssl_|swsl_|tv_|dm_)?"
    r"(?:resnet|resnext|resnest|res2net|res2next|seresne|senet|ecaresnet|skresne|wide_resnet"
    r"|regnet|efficientnet|mobilenet|mobileone|mixnet|mnasnet|semnasnet|spnasnet|ghostnet"
    r"|densenet|dla|dpn|hrnet|inception_v|inception_resnet|xception|vgg|convnext|cspres"
    r"|cspdarknet|darknet|nfnet|nf_|rexnet|tresnet|selecsls|repvgg|lcnet|fbnet|hardcorenas"
    r"|gernet|vovnet|ese_vovnet|bat_resnext|repghost|rdnet|inception_next|convmixer)"
)


def _library_conv_net(ctx: FileContext, call: ast.Call, name: str) -> bool:
    """``call`` builds a conv net of a model library (:data:`_LIBRARY_CONV_NETS`), or a timm
    model of a convolutional family (:data:`_TIMM_CONV_FAMILIES`) named by a literal or by an
    option's default (``--model resnet50``)."""
    from torchpace.lint.values import option_default

    parts = name.split(".")
    if parts[-1] in _LOADERS:
        parts = parts[:-1]
    if parts and parts[-1] in _LIBRARY_CONV_NETS.get(parts[0], ()):
        return True
    if parts[0] != "timm" or parts[-1] != "create_model":
        return False
    given = argument(call, "model_name", 0)
    if not (isinstance(given, ast.Constant) and isinstance(given.value, str)):
        given = option_default(ctx, given)
    return (
        isinstance(given, ast.Constant)
        and isinstance(given.value, str)
        and _TIMM_CONV_FAMILIES.match(given.value.lower()) is not None
    )


def builds_conv_net(ctx: FileContext, call: ast.Call, name: str | None) -> bool:
    """``call`` constructs a conv net defined elsewhere: a torchvision model, a conv net of a
    model library (:func:`_library_conv_net`), or a class that a project file builds from conv
    layers (or a function of it that builds one), imported by name, through its module,
    relatively or with ``from models import *`` (PyTorch-GAN, pytorch/examples'
    fast_neural_style, YOLOv3's ``load_model``)."""
    if name is not None and name.startswith("torchvision.models."):
        last = name.rsplit(".", 1)[-1]
        return last[:1].islower() and last not in _NOT_MODELS
    if name is not None and _library_conv_net(ctx, call, name):
        return True
    func = call.func
    if isinstance(func, ast.Subscript) and ctx.names.qualname(func.value) == (
        "torchvision.models.__dict__"
    ):
        return True  # ``models.__dict__[args.arch]()`` (pytorch/examples imagenet)
    if isinstance(call.func, ast.Name) and call.func.id in ctx.loops.classes:
        return False  # a class of this file (convs.py's own check reads it)
    return any(is_conv_class(path, cls) for path, cls in imported_from(ctx, call))


# --------------------------------------------------------------------------- matmul-free models

# What a model may build or call and still hold no matrix product or convolution: embedding
# tables and parameters read by index, elementwise and reduction math, norms and activations.
_WEIGHTS = frozenset({"torch.nn.Parameter", "torch.nn.Embedding", "torch.nn.EmbeddingBag"})
_TABLES = _WEIGHTS | {"torch.nn.ModuleList"}
# Classes a table class derives from (``class ScaledEmbedding(nn.Embedding)``).
_TABLE_CLASSES = frozenset({"torch.nn.Embedding", "torch.nn.EmbeddingBag"})
_PRODUCTS = frozenset(
    {
        *("torch.matmul", "torch.mm", "torch.bmm", "torch.einsum", "torch.addmm", "torch.baddbmm"),
        *("torch.tensordot", "torch.bilinear", "torch.chain_matmul", "torch.linalg.multi_dot"),
        *("torch.nn.functional.linear", "torch.nn.functional.bilinear"),
        *("torch.nn.functional.scaled_dot_product_attention",),
    }
)
_PRODUCT_METHODS = frozenset({"matmul", "mm", "bmm", "addmm", "baddbmm", "einsum"})


def matmul_free(ctx: FileContext, call: ast.Call, depth: int = 2) -> bool:
    """``call`` builds an ``nn.Module`` class of this or a project file whose every line is free
    of matrix products and convolutions: it builds embedding tables and parameters only, and
    computes with elementwise math, norms and reductions (ogb's knowledge-graph embeddings:
    TransE, RotatE, ComplEx). A submodule built from another such class counts as a table, and
    so does one of a class derived from ``nn.Embedding`` with no product of its own (a course's
    ``ScaledEmbedding``, which only overrides ``reset_parameters``), ``depth`` classes deep.
    Anything it cannot read (a layer of a library, a submodule of another class built in
    ``__init__``, a ``@``) makes it not free."""
    found = definition_of(ctx, call, ast.ClassDef)
    if found is None:
        return False
    where, cls = found
    bases = {where.names.qualname(b) or dotted(b) or "" for b in cls.bases}
    if bases & _TABLE_CLASSES:
        return _product_free(where, cls, depth)
    if "Module" not in {b.rsplit(".", 1)[-1] for b in bases}:
        return False  # a module of torch.nn's, directly: not one derived from another class
    return _product_free(where, cls, depth, tables=False)


def _product_free(where: FileContext, cls: ast.ClassDef, depth: int, tables: bool = True) -> bool:
    """No line of ``cls`` multiplies matrices or convolves, and it holds weights (``tables``
    given, or embedding tables and parameters it builds)."""
    built = {
        id(n)
        for m in cls.body
        if isinstance(m, ast.FunctionDef) and m.name == "__init__"
        for n in subtree(m)
    }
    for node in subtree(cls):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return False
        if not isinstance(node, ast.Call):
            continue
        name = where.names.qualname(node.func) or ""
        tables = tables or name in _WEIGHTS
        if name in _PRODUCTS or name.startswith("torch.nn.functional.conv"):
            return False
        if name.startswith("torch.nn.") and name[9:10].isupper() and name not in _TABLES:
            return False  # a layer: Linear, Conv2d, LSTM, MultiheadAttention, ...
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _PRODUCT_METHODS:
            return False  # ``x.matmul(w)``
        if (
            id(node) in built
            and isinstance(func, ast.Name)
            and func.id[:1].isupper()
            and not name.startswith("torch.")
            and not hasattr(builtins, func.id)
        ):
            # a submodule of another class: a table where that class is one, else not read
            if depth <= 0 or func.id == cls.name or not matmul_free(where, node, depth - 1):
                return False
            tables = True
    return tables  # and it holds weights: embedding tables or parameters


# --------------------------------------------------------------------------- device helpers


def _cuda_functions(path: Path) -> frozenset[str]:
    """Module-level functions of the file at ``path`` that return a CUDA device in some
    branch (``return torch.device("cuda" if torch.cuda.is_available() else "cpu")``, or a name
    assigned a CUDA device in one branch and returned), and those it re-exports from another
    project file with ``from .x import *`` (one level)."""
    ctx = _parsed(path)
    if ctx is None:
        return frozenset()
    return _own_cuda_functions(ctx).union(
        *(_own_cuda_functions(_parsed(p)) for p in _star_sources(ctx, path))
    )


def _cuda_functions_of(ctx: FileContext) -> frozenset[str]:
    from torchpace.lint.device import is_cuda_device

    def gives_cuda(f: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        nodes = list(subtree(f))
        # ``device = torch.device("cuda:0")`` in one branch, then ``return device`` (d2l).
        cuda_names = {
            t.id
            for n in nodes
            if isinstance(n, ast.Assign) and is_cuda_device(n.value, ctx.names)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        return any(
            isinstance(n, ast.Return)
            and (
                is_cuda_device(n.value, ctx.names)
                or (isinstance(n.value, ast.Name) and n.value.id in cuda_names)
            )
            for n in nodes
        )

    return frozenset(
        f.name
        for f in ctx.tree.body
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and gives_cuda(f)
    )


_own_cuda_functions = per_context(_cuda_functions_of, frozenset[str]())


def device_helper_gives_cuda(ctx: FileContext, call: ast.Call) -> bool:
    """``device = get_device()`` with ``get_device`` imported from a project file that returns
    a CUDA device (``from utils import get_device``, ``import utils`` + ``utils.get_device()``)."""
    return any(f in _cuda_functions(path) for path, f in imported_from(ctx, call))


# --------------------------------------------------------------------------- training helpers


def _training_functions(path: Path) -> dict[str, Path]:
    """Module-level functions of the file at ``path`` that hold a training loop (d2l's
    ``train_ch5(net, train_iter, ...)``), and those it re-exports with ``from .x import *``,
    each with the file that defines it."""
    ctx = _parsed(path)
    if ctx is None:
        return {}
    found: dict[str, Path] = {}
    for source in reversed([path, *_star_sources(ctx, path)]):  # the file's own names last
        found |= dict.fromkeys(_own_training_functions(_parsed(source)), source)
    return found


def _training_functions_of(ctx: FileContext) -> frozenset[str]:
    """Module-level functions that hold a training loop, or call one of this file that does
    by name (``train()``'s epoch loop calling ``train_step()``, mrdbourke's going_modular)."""
    facts = ctx.loops
    scopes = {id(facts.scope_of[id(loop)]) for loop in facts.training_loops()}
    functions = [f for f in ctx.tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    training = {f.name for f in functions if id(f) in scopes}
    if not training:
        return frozenset()
    return frozenset(f.name for f in functions if f.name in training or _calls_own(f, training))


def _calls_own(function: ast.FunctionDef | ast.AsyncFunctionDef, names: set[str]) -> bool:
    """``function`` calls one of its file's functions ``names`` by name, not a name it binds
    itself."""
    called = {
        n.func.id
        for n in subtree(function)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names
    }
    return bool(called) and bool(called - _local_names(function))


def _local_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names a function binds itself: its parameters, what it imports and what it stores
    (YOLOv7's ``model_info`` imports thop's ``profile``, which is not its file's ``profile``)."""
    found = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
    for node in subtree(function):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
    return found


_own_training_functions = per_context(_training_functions_of, frozenset[str]())


def training_helpers(ctx: FileContext) -> list[tuple[ast.Call, FileContext]]:
    """The calls of this file that hand something to another project file's training
    function, each with that file: a notebook that builds a network and calls
    ``d2l.train_ch5(net, ...)`` (``import d2l``, ``from utils import train``, with at least one
    argument)."""
    found: list[tuple[ast.Call, FileContext]] = []
    for call, _ in ctx.calls:
        if not (call.args or call.keywords):
            continue
        for path, function in imported_from(ctx, call):
            source = _training_functions(path).get(function)
            helper = None if source is None else _parsed(source)
            if helper is not None:
                found.append((call, helper))
                break
    return found
