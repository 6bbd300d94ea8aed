"""A plan as a source change to the user's script (``torchpace apply``): for each technique with a
sound static edit, a byte-exact edit applied through lint's fix machinery (``lint.fixes``: no
overlaps, the result must parse, a second run changes nothing); for the rest, the line and what to
do by hand. This module does not import torch.

Edits, each only where the script's own syntax makes it certain:

- ``grad-set-to-none``: ``zero_grad(set_to_none=False)`` -> ``set_to_none=True``;
- ``fused-optimizer``: ``fused=True`` on a ``torch.optim`` class with a fused kernel on the script's
  device (``catalog.FUSED_KERNELS``), without ``**kw``, ``foreach=`` or ``differentiable=``
  (lint's TP405 reading: fused kernels are not differentiable);
- ``loader-workers``: ``num_workers``, ``pin_memory`` and ``persistent_workers`` on each
  ``DataLoader(...)`` that feeds training steps (lint's TP101 reading: not an evaluation or a
  read-once loader) without ``**kw``, except where that reading says workers would break it (a
  dataset of the file that puts items on a device, an ``IterableDataset`` that does not shard by
  ``get_worker_info()``): there an instruction says why it was left alone. A count read from an
  option (``num_workers=args.workers``) changes the option's default, not the call, and
  ``persistent_workers`` follows it (``args.workers > 0``);
- ``tf32`` / ``cudnn-benchmark``: the flags, after the module's leading imports and its
  module-level ``import torch`` (an instruction where torch is imported only inside a
  function, a ``try`` or a branch); not the auto-tuner in
  a script that chooses cuDNN's setup itself (determinism, the auto-tuner set, cuDNN's flags:
  lint's TP303 reading), which is told so;
- ``channels-last`` and ``torch-compile``: ``model.to(memory_format=...)`` and
  ``model.compile()`` after the optimizer over ``model.parameters()`` is built;
- ``amp-bf16``: the statements from the model's call to ``loss.backward()`` wrapped in
  ``with torch.autocast(...)`` (backward itself stays outside), where they are simple statements
  of one block.

- ``length-bucketing``: ``loader = bucket_by_length(loader)`` (and its import) after each
  ``loader = DataLoader(..., batch_size=..., shuffle=True)`` with no sampler of its own.

- ``max-batch-size``: the batch size of that loader and the LR of the optimizer built over the
  model's parameters after it in the same function, changed together where the batch size is set:
  a literal in the call (and ``lr=X * (B / OLD) ** 0.5``, or the linear rule), or the default of
  its option, config field or module constant (and the LR's own default scaled, or the LR made a
  formula over the batch expression). Never a literal beside an LR that reads the option.

fp16 (it needs a GradScaler in the loop), conv-bias folding and the attention backend are
instructions: their edit depends on values only the running script knows.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

from torchpace import techniques
from torchpace.catalog import fused_on, loader_workers
from torchpace.findings import Edit, Finding, Fix, Location
from torchpace.lint import values
from torchpace.lint.dataloaders import (
    feeds_training,
    streams_without_sharding,
    yields_device_tensors,
)
from torchpace.lint.engine import context
from torchpace.lint.imports import Resolver
from torchpace.lint.loops import DATALOADER
from torchpace.lint.results import LintError
from torchpace.lint.rule import FileContext, end_of, keyword
from torchpace.lint.rules.convs import chooses_cudnn_setup
from torchpace.lint.rules.loading import reentered_loaders
from torchpace.lint.rules.memory import adds_into_grads, differentiable
from torchpace.measure.cores import usable_cores
from torchpace.train.lr import EXPONENT
from torchpace.train.plan import Plan

_OPTIMIZERS = re.compile(r"^torch\.optim\.[A-Z]\w*$")


@dataclass(frozen=True)
class Instruction:
    """What to change by hand, and where (``line`` 0: nowhere in particular)."""

    technique: str
    line: int
    text: str


class _Script:
    def __init__(self, source: bytes, path: str) -> None:
        self.source = source
        self.path = path
        self.tree = ast.parse(source, filename=path)
        self.lines = source.splitlines(keepends=True)
        self.newline = "\r\n" if b"\r\n" in source else "\n"
        nodes = list(ast.walk(self.tree))
        self.nodes = nodes
        self.resolver = Resolver.from_nodes(nodes)
        self.calls = [n for n in nodes if isinstance(n, ast.Call)]
        self.parents: dict[int, ast.AST] = {}
        for n in nodes:
            for child in ast.iter_child_nodes(n):
                self.parents[id(child)] = n

    @cached_property
    def ctx(self) -> FileContext:
        """The file as lint's rules see it, off this tree (for :mod:`torchpace.lint.values`)."""
        return context(self.path, self.source, self.tree)

    def qualname(self, call: ast.Call) -> str:
        return self.resolver.qualname(call.func) or ""

    def text_line(self, lineno: int) -> str:
        return self.lines[lineno - 1].decode("utf-8", errors="replace")

    def indent_of(self, lineno: int) -> str:
        line = self.text_line(lineno)
        return line[: len(line) - len(line.lstrip())]

    def statement_of(self, node: ast.AST) -> ast.stmt | None:
        while node is not None and not isinstance(node, ast.stmt):
            node = self.parents.get(id(node))  # type: ignore[assignment]
        return node

    def torch_name(self) -> str | None:
        """The local name bound to the torch package (``import torch``), or None."""
        return next((k for k, v in self.resolver.bindings.items() if v == "torch"), None)


def _finding(s: _Script, technique: str, node: ast.AST, title: str, *edits: Edit) -> Finding:
    line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
    end_line, end_col = end_of(node)
    loc = Location(s.path, line, col + 1, end_line, end_col + 1)
    return Finding("PLAN", "plan-edit", technique, title, loc, Fix(title, "safe", edits))


def _set_kw(s: _Script, call: ast.Call, name: str, value: str) -> Edit | None:
    """Set ``name=value`` on ``call``: replace the value, or insert the keyword at the end."""
    kw = keyword(call, name)
    if kw is not None:
        if ast.get_source_segment(s.source.decode("utf-8", "replace"), kw.value) == value:
            return None
        (l1, c1), (l2, c2) = (kw.value.lineno, kw.value.col_offset), end_of(kw.value)
        return Edit(l1, c1, l2, c2, value)
    last = (call.args + [k.value for k in call.keywords])[-1:]  # type: ignore[operator]
    if not last:
        l2, c2 = end_of(call)
        return Edit(l2, c2 - 1, l2, c2 - 1, f"{name}={value}")
    l2, c2 = end_of(last[0])
    return Edit(l2, c2, l2, c2, f", {name}={value}")


def _has_star_kwargs(call: ast.Call) -> bool:
    return any(k.arg is None for k in call.keywords)


def _set_to_none(s: _Script) -> list[Finding]:
    if adds_into_grads(s.nodes):  # it needs gradients that exist (lint's TP402 says nothing)
        return []
    out = []
    for call in s.calls:
        if isinstance(call.func, ast.Attribute) and call.func.attr == "zero_grad":
            kw = keyword(call, "set_to_none")
            if kw is not None and isinstance(kw.value, ast.Constant) and kw.value.value is False:
                l2, c2 = end_of(kw.value)
                edit = Edit(kw.value.lineno, kw.value.col_offset, l2, c2, "True")
                out.append(_finding(s, "grad-set-to-none", call, "free gradients", edit))
    return out


def _fused(s: _Script, device: str) -> list[Finding]:
    out = []
    for call in s.calls:
        name = s.qualname(call) or ""
        fusable = name.startswith("torch.optim.") and fused_on(name.rsplit(".", 1)[-1], device)
        if not fusable or _has_star_kwargs(call):
            continue
        if keyword(call, "fused") is not None or keyword(call, "foreach") is not None:
            continue
        if differentiable(call):
            continue  # as lint's TP405 reads it: fused kernels are not differentiable
        edit = _set_kw(s, call, "fused", "True")
        if edit is not None:
            out.append(_finding(s, "fused-optimizer", call, "use the fused kernel", edit))
    return out


def _loader(s: _Script, plan: Plan, device: str) -> tuple[list[Finding], list[Instruction]]:
    workers = plan.loader_workers
    if workers is None:  # "auto": the catalogue's rule, as loader_settings reads it
        workers = loader_workers(device, usable_cores())
    values = {
        "num_workers": str(workers),
        "pin_memory": str(device == "cuda"),
        "persistent_workers": str(workers > 0),
    }
    out: list[Finding] = []
    notes: list[Instruction] = []
    done_defaults: set[int] = set()  # option defaults already edited, for a loader before
    for call in s.calls:
        if s.qualname(call) != DATALOADER or _has_star_kwargs(call):
            continue
        if len(call.args) > 5:  # num_workers given by position: leave the call alone
            continue
        # Lint's own readings (TP101 stays silent on these loaders for the same reasons): a
        # worker cannot make CUDA tensors, and each worker would yield an unsharded stream whole
        why = (
            "it does not feed training steps (an evaluation or a read-once loader): the plan's "
            "workers were measured on the training loader"
            if not feeds_training(s.ctx, call)
            else "its dataset puts items on a device, which worker processes cannot do"
            if yields_device_tensors(s.ctx, call)
            else "its IterableDataset does not shard by get_worker_info(): each worker would "
            "yield the whole stream"
            if streams_without_sharding(s.ctx, call)
            else None
        )
        if why is not None:
            if workers > 0:
                notes.append(Instruction("loader-workers", call.lineno, f"left alone: {why}"))
            continue
        edits, instead = _workers_from_an_option(s, call, workers, done_defaults, notes)
        if id(call) in reentered_loaders(s.ctx) and workers > 0:
            # as lint's TP104 reads it: a second pass inside the loop would reset the one
            # iterator persistent workers keep, and the epoch would never end
            instead = {**instead, "persistent_workers": None}
            notes.append(
                Instruction(
                    "persistent-workers",
                    call.lineno,
                    "persistent_workers left as written: the loader is iterated again inside "
                    "its own loop, which would reset the iterator persistent workers keep",
                )
            )
        for name, literal in values.items():
            value = instead.get(name, literal)
            if value is None or (keyword(call, name) is None and literal in ("0", "False")):
                continue  # left as written, or the default already
            edit = _set_kw(s, call, name, value)
            if edit is not None:
                edits.append(edit)
        if edits:
            title = ", ".join(f"{k}={v}" for k, v in values.items())
            out.append(_finding(s, "loader-workers", call, title, *_merge_inserts(edits)))
    return out, notes


def _workers_from_an_option(
    s: _Script, call: ast.Call, workers: int, done_defaults: set[int], notes: list[Instruction]
) -> tuple[list[Edit], dict[str, str | None]]:
    """A loader whose ``num_workers`` reads an option (``num_workers=args.workers``): the
    option's default becomes the plan's count, where lint's reading finds the one place it is
    set, so the command line still decides; ``persistent_workers`` then follows the value at run
    time (``args.workers > 0``: True with 0 workers raises). Where the value cannot be followed,
    the keyword stays as written and an instruction says what to set (``persistent_workers`` then
    only where the value is a name or an attribute, read twice alike). Returns the edits of
    defaults and the keyword values that replace the literal ones (None: left as written)."""
    kw = keyword(call, "num_workers")
    if kw is None or _number(kw.value) is not None:
        return [], {}
    text = ast.get_source_segment(s.source.decode("utf-8", "replace"), kw.value) or ""
    where = _origin(s, kw.value)
    if where is None:  # not one number set in one place that lint's reading finds
        notes.append(
            Instruction(
                "loader-workers",
                call.lineno,
                f"num_workers={text} is left as written: make it {workers} where it is set",
            )
        )
        # a name or an attribute reads the same value twice; a call might not: left out then
        persistent = f"{text} > 0" if _simple(kw.value) else None
        return [], {"num_workers": None, "persistent_workers": persistent}
    edits = []
    if where.value != workers and id(where.node) not in done_defaults:
        done_defaults.add(id(where.node))
        n = where.node
        edits.append(Edit(n.lineno, n.col_offset, *end_of(n), str(workers)))
    return edits, {"num_workers": None, "persistent_workers": f"{text} > 0"}


def _merge_inserts(edits: list[Edit]) -> list[Edit]:
    """Insertions at one point become one edit (the fix machinery refuses two at a point)."""
    merged: dict[tuple[int, int, int, int], str] = {}
    for e in edits:
        key = (e.start_line, e.start_col, e.end_line, e.end_col)
        merged[key] = merged.get(key, "") + e.text
    return [Edit(*k, text) for k, text in merged.items()]


def _after_imports(s: _Script) -> int:
    """The line after the module's leading imports (and docstring)."""
    last = 0
    for stmt in s.tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) or (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and last == 0
        ):
            last = stmt.end_lineno or last
        else:
            break
    return last + 1


def _torch_imported(s: _Script, name: str) -> int | None:
    """The line after the run of module-level imports that holds the ``import torch`` binding
    ``name``; None where torch is imported only inside a function, a ``try`` or a branch."""
    body = s.tree.body
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.Import) and any(
            (a.asname or a.name.split(".")[0]) == name and a.name.split(".")[0] == "torch"
            for a in stmt.names
        ):
            while i + 1 < len(body) and isinstance(body[i + 1], (ast.Import, ast.ImportFrom)):
                i += 1
            return (body[i].end_lineno or body[i].lineno) + 1
    return None


def _fast_math(s: _Script, device: str) -> tuple[list[Finding], list[Instruction]]:
    t = s.torch_name()
    imported = None if t is None else _torch_imported(s, t)
    if t is None or imported is None:
        return [], [Instruction("tf32", 0, "import torch, then set the fast float32 matmul flags")]
    precision = "high" if device == "cuda" else "medium"
    wanted = [f'{t}.set_float32_matmul_precision("{precision}")']
    notes = []
    if device == "cuda" and chooses_cudnn_setup(s.ctx):
        # lint's TP303 reading: the script decides cuDNN's setup itself (determinism asked for,
        # the auto-tuner set, cuDNN's flags): turning the auto-tuner on would override it
        notes.append(
            Instruction("cudnn-benchmark", 0, "left alone: the script chooses cuDNN's setup")
        )
    elif device == "cuda":
        wanted.insert(0, f"{t}.backends.cudnn.benchmark = True")
    text = s.source.decode("utf-8", "replace")
    missing = [w for w in wanted if w.split("(")[0].split(" =")[0] not in text]
    if not missing:
        return [], notes
    # after the leading imports, and never before torch is imported (hifi-gan's train.py calls
    # warnings.simplefilter(...) between its first import and ``import torch``)
    at = max(_after_imports(s), imported)
    body = "".join(w + s.newline for w in missing)
    edit = Edit(at, 0, at, 0, body)
    node = s.tree.body[0]
    return [_finding(s, "tf32", node, "fast float32 matmuls", edit)], notes


def _trained_model(s: _Script) -> tuple[str, ast.stmt] | None:
    """The name of the model whose ``.parameters()`` an optimizer is built over, and the
    statement that builds it."""
    for call in s.calls:
        if not _OPTIMIZERS.match(s.qualname(call)) or not call.args:
            continue
        p = call.args[0]
        if (
            isinstance(p, ast.Call)
            and isinstance(p.func, ast.Attribute)
            and p.func.attr == "parameters"
            and isinstance(p.func.value, ast.Name)
        ):
            stmt = s.statement_of(call)
            if stmt is not None:
                return p.func.value.id, stmt
    return None


def _insert_after(s: _Script, stmt: ast.stmt, line_text: str) -> Edit:
    at = (stmt.end_lineno or stmt.lineno) + 1
    indent = s.indent_of(stmt.lineno)
    if at > len(s.lines):  # the last line of the file
        end = len(s.lines)
        col = len(s.lines[-1])
        prefix = "" if s.lines[-1].endswith((b"\n", b"\r")) else s.newline
        return Edit(end, col, end, col, prefix + indent + line_text + s.newline)
    return Edit(at, 0, at, 0, indent + line_text + s.newline)


def _model_calls(s: _Script, model: str, method: str) -> bool:
    return any(
        isinstance(c.func, ast.Attribute)
        and c.func.attr == method
        and isinstance(c.func.value, ast.Name)
        and c.func.value.id == model
        for c in s.calls
    )


def _model_edits(s: _Script, plan: Plan) -> tuple[list[Finding], list[Instruction]]:
    found = _trained_model(s)
    t = s.torch_name() or "torch"
    wanted = []
    if plan.channels_last:
        wanted.append(("channels-last", "to", "{m}.to(memory_format=" + t + ".channels_last)"))
    if plan.compile != "off":
        mode = "" if plan.compile == "default" else f'mode="{plan.compile}"'
        wanted.append(("torch-compile", "compile", "{m}.compile(" + mode + ")"))
    if not wanted:
        return [], []
    if found is None:
        return [], [
            Instruction(tid, 0, f"after the model is built: {text.format(m='model')}")
            for tid, _, text in wanted
        ]
    model, stmt = found
    lines = []
    techniques = []
    for tid, method, text in wanted:
        if method == "to" and "channels_last" in s.source.decode("utf-8", "replace"):
            continue
        if _model_calls(s, model, method) and method == "compile":
            continue
        lines.append(text.format(m=model))
        techniques.append(tid)
    if not lines:
        return [], []
    edit = _insert_after(s, stmt, (s.newline + s.indent_of(stmt.lineno)).join(lines))
    out = [_finding(s, techniques[0], stmt, "; ".join(lines), edit)]
    return out, []


def _autocast(s: _Script, plan: Plan, device: str) -> tuple[list[Finding], list[Instruction]]:
    if plan.amp == "off":
        return [], []
    if plan.amp == "fp16":
        return [], [
            Instruction(
                "amp-fp16",
                0,
                "wrap the forward and loss in torch.autocast(device_type, dtype=torch.float16) "
                "and scale the loss with torch.amp.GradScaler (scaler.scale(loss).backward(), "
                "scaler.step(optimizer), scaler.update())",
            )
        ]
    found = _trained_model(s)
    how = (
        f'with {s.torch_name() or "torch"}.autocast(device_type="{device}", '
        f"dtype={s.torch_name() or 'torch'}.bfloat16):"
    )
    by_hand = [Instruction("amp-bf16", 0, f"put the forward and the loss under `{how}`")]
    if found is None:
        return [], by_hand
    model = found[0]
    for node in s.nodes:
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            if not _is_backward(stmt):
                continue
            start = _first_model_call(body, i, model)
            if start is None:
                continue
            block = body[start:i]
            if not _wrappable(s, block) or _under_autocast(s, block[0]):
                continue
            first, last = block[0].lineno, block[-1].end_lineno or block[-1].lineno
            indent = s.indent_of(first)
            old = [s.text_line(n).rstrip("\r\n") for n in range(first, last + 1)]
            new = [indent + how] + [("    " + x) if x.strip() else x for x in old]
            edit = Edit(first, 0, last, len(s.lines[last - 1].rstrip(b"\r\n")), s.newline.join(new))
            return [_finding(s, "amp-bf16", block[0], "forward and loss under autocast", edit)], []
    return [], by_hand


def _is_backward(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and stmt.value.func.attr == "backward"
    )


def _first_model_call(body: list[ast.stmt], end: int, model: str) -> int | None:
    """The index of the earliest statement before ``end``, in an unbroken run of simple
    statements, that calls ``model(...)``."""
    found = None
    for j in range(end - 1, -1, -1):
        stmt = body[j]
        if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
            break
        if any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == model
            for n in ast.walk(stmt)
        ):
            found = j
    return found


def _wrappable(s: _Script, block: list[ast.stmt]) -> bool:
    """Whole lines only: no statement shares a line with another, none is split oddly."""
    lines = [(b.lineno, b.end_lineno or b.lineno) for b in block]
    for (_, a_end), (b_start, _) in pairwise(lines):
        if b_start <= a_end:
            return False
    first = block[0]
    return s.text_line(first.lineno)[: first.col_offset].strip() == ""


def _under_autocast(s: _Script, stmt: ast.stmt) -> bool:
    node: ast.AST | None = stmt
    while node is not None:
        if isinstance(node, ast.With) and any(
            "autocast" in ast.dump(item.context_expr) for item in node.items
        ):
            return True
        node = s.parents.get(id(node))
    return False


def _instructions(s: _Script, plan: Plan) -> list[Instruction]:
    out = []
    if plan.fold_conv_bias:
        out.append(
            Instruction(
                "conv-bias-before-bn",
                0,
                "give bias=False to each convolution that feeds only a BatchNorm "
                "(`torchpace lint --select TP401` lists them), or call "
                "torchpace.speedups.fold_conv_bias(model) before building the optimizer",
            )
        )
    if plan.attention != "default":
        out.append(
            Instruction(
                "attention-backend",
                0,
                f"run the forward under torch.nn.attention.sdpa_kernel({plan.attention!r} backend)",
            )
        )
    if plan.prefetch:
        out.append(
            Instruction(
                "async-prefetch", 0, "wrap the loader in torchpace.speedups.DevicePrefetcher"
            )
        )
    return out


def _function_of(s: _Script, node: ast.AST) -> ast.AST | None:
    """The function (or None: the module) whose body holds ``node``."""
    parent = s.parents.get(id(node))
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parent = s.parents.get(id(parent))
    return parent


def _simple(node: ast.expr) -> bool:
    """A name, ``a.b.c`` or a number: the same value wherever it is read in one function."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) or (
        isinstance(node, ast.Constant) and isinstance(node.value, int)
    )


@dataclass(frozen=True)
class _Origin:
    """Where a value read in a call is set: ``node`` is the literal to edit (in the call itself,
    an ``add_argument(..., default=...)``, a config class's field or a module constant);
    ``flag`` is its command-line option when it is one."""

    node: ast.Constant
    kind: str  # "literal" (in the call), "flag", "config" or "constant"
    flag: str | None = None

    @property
    def value(self) -> float:
        return float(self.node.value)  # type: ignore[arg-type]


def _number(node: ast.AST | None) -> ast.Constant | None:
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
        return None
    return node if isinstance(node.value, (int, float)) else None


def _origin(s: _Script, node: ast.expr) -> _Origin | None:
    """Where the value ``node`` reads is set, when the file says so for certain: a literal, or
    a number literal where lint's :func:`torchpace.lint.values.origin` finds the one place the
    value is set (an option's default, a config field, a module constant)."""
    literal = _number(node)
    if literal is not None:
        return _Origin(literal, "literal")
    where = values.origin(s.ctx, node)
    if where is not None and where.elsewhere:
        return None  # set in another file: an edit here would land at that file's positions
    default = None if where is None else _number(where.value)
    if where is None or default is None:
        return None
    return _Origin(default, where.kind, where.flag)


def _batch_option(s: _Script) -> _Origin | None:
    """The script's one batch-size option with a number default, where no loader's call shows
    the batch (a GPT that slices its batches, a replay buffer's sample): the instruction then
    still gives the command line with both values."""
    found = [o for o in values.options(s.ctx) if o.dest in ("batch_size", "train_batch_size")]
    default = _number(found[0].default) if len(found) == 1 else None
    return None if default is None else _Origin(default, "flag", found[0].flag)


def _scaled(value: float, factor: float) -> str:
    """``value * factor`` as a literal that reads well: 0.0003, 6e-05, 0.1."""
    return f"{value * factor:.6g}"


def _batch_size(s: _Script, plan: Plan) -> tuple[list[Finding], list[Instruction]]:
    """The shuffled training loader's batch size and its optimizer's LR, changed together.

    - A literal batch size is replaced, and the LR becomes ``lr * (B / OLD)`` (or ``** 0.5``).
    - A batch size set elsewhere (an option's default, a config field, a module constant) is
      changed there, so the option still sets it. The LR follows: its own default is scaled
      where it has one, or the LR becomes a formula over the batch expression
      (``lr=0.1 * (args.batch_size / 64)``), so passing the option later keeps the two agreeing.
      Never a literal batch size beside an LR that reads the option (issue 30).
    - Anything else is an instruction with both values (and the command line, where both are
      options)."""
    if plan.batch_size is None:
        return [], []
    new = plan.batch_size
    rule = EXPONENT[plan.lr_scaling] or None  # "none": the LR is left alone
    loaders = [c for c in s.calls if _shuffled_loader(s, c) is not None]
    found = _trained_model(s)
    loader = loaders[0] if len(loaders) == 1 else None
    size = None if loader is None else keyword(loader, "batch_size")
    opts = [c for c in s.calls if _OPTIMIZERS.match(s.qualname(c))]
    # The optimizer over the trained model's parameters; else the script's only optimizer (one
    # built over parameter groups, weight decay apart: a toy BERT's AdamW(groups, lr=args.lr)).
    opt = next((c for c in opts if found is not None and s.statement_of(c) is found[1]), None)
    if opt is None and len(opts) == 1:
        opt = opts[0]
    lr = None if opt is None else keyword(opt, "lr")
    batch = _batch_option(s) if size is None else _origin(s, size.value)
    lr_at = None if lr is None else _origin(s, lr.value)
    if batch is not None and batch.value == new:
        return [], []  # applied before
    factor = None if rule is None or batch is None else (new / batch.value) ** rule
    both_defaults = (
        batch is not None
        and batch.kind != "literal"
        and lr_at is not None
        and lr_at.kind != "literal"
    )
    placeable = (
        loader is not None
        and size is not None
        and batch is not None
        and opt is not None
        and lr is not None
        # Two defaults change wherever the loader and the optimizer are built; a formula in
        # the optimizer's call must read the batch where the loader does.
        and (both_defaults or _function_of(s, loader) is _function_of(s, opt))
        and (both_defaults or opt.lineno > loader.lineno)
    )
    if not placeable:
        work = _work(s, batch, new) if batch is not None else []
        return [], [_batch_instruction(s, plan, batch, lr_at, factor), *work]
    assert size is not None and lr is not None and batch is not None and loader is not None
    text = s.source.decode("utf-8", "replace")
    size_text = ast.get_source_segment(text, size.value) or ""
    old = f"{batch.value:g}"
    edits = [Edit(batch.node.lineno, batch.node.col_offset, *end_of(batch.node), str(new))]
    if rule is not None and factor is not None:
        if batch.kind != "literal" and lr_at is not None and lr_at.kind != "literal":
            # Both set elsewhere: the two defaults change together.
            n = lr_at.node
            edits.append(Edit(n.lineno, n.col_offset, *end_of(n), _scaled(lr_at.value, factor)))
        else:
            value = ast.get_source_segment(text, lr.value) or ""
            if not _simple(lr.value) and not isinstance(lr.value, ast.Constant):
                value = f"({value})"
            ratio = f"({new} / {old})" if batch.kind == "literal" else f"({size_text} / {old})"
            power = "" if rule == 1.0 else " ** 0.5"
            edits.append(
                Edit(
                    lr.value.lineno,
                    lr.value.col_offset,
                    *end_of(lr.value),
                    f"{value} * {ratio}{power}",
                )
            )
    where = {
        "literal": "",
        "flag": f" (the default of {batch.flag})",
        "config": " (the config's default)",
        "constant": " (the module constant)",
    }[batch.kind]
    title = f"batch size {new}{where}, LR scaled by the {plan.lr_scaling} rule"
    return [_finding(s, "max-batch-size", loader, title, *edits)], _work(s, batch, new)


def _work(s: _Script, batch: _Origin, new: int) -> list[Instruction]:
    """The work a larger batch adds to a script bounded by steps, with the option that puts it
    back (``script.compare.batch_work_note``), when the script has a step option."""
    from torchpace.runtime.work import batch_work_note, step_flags_in

    flags = step_flags_in(s.source.decode("utf-8", "replace"))
    note = batch_work_note(flags, (), int(batch.value), new) if flags else None
    return [Instruction("max-batch-size", 0, note)] if note else []


def _batch_instruction(
    s: _Script, plan: Plan, batch: _Origin | None, lr_at: _Origin | None, factor: float | None
) -> Instruction:
    """By hand: both values, and the command line where both are options."""
    lr_text = f"the LR scaled by the {plan.lr_scaling} rule"
    if factor is not None:
        lr_text += f" (× {factor:.3g})"
        if lr_at is not None:
            lr_text = f"LR {_scaled(lr_at.value, factor)} (the {plan.lr_scaling} rule)"
    elif plan.lr_scaling == "none":
        lr_text = "the LR as it is"
    text = f"train with batch size {plan.batch_size} and {lr_text}, together"
    if batch is not None and batch.flag and lr_at is not None and lr_at.flag and factor:
        text += f": {batch.flag} {plan.batch_size} {lr_at.flag} {_scaled(lr_at.value, factor)}"
    return Instruction("max-batch-size", 0, text + " (the tune judged convergence at that LR)")


def _shuffled_loader(s: _Script, call: ast.Call) -> str | None:
    """The name ``call`` is assigned to, where it is ``name = DataLoader(..., batch_size=...,
    shuffle=True)`` with no sampler of its own: the training loader that bucketing replaces."""
    if s.qualname(call) != DATALOADER or _has_star_kwargs(call):
        return None
    shuffle = keyword(call, "shuffle")
    if (
        shuffle is None
        or not (isinstance(shuffle.value, ast.Constant) and shuffle.value.value is True)
        or keyword(call, "batch_size") is None
        or keyword(call, "sampler") is not None
        or keyword(call, "batch_sampler") is not None
        or len(call.args) > 1
    ):
        return None
    stmt = s.statement_of(call)
    if (
        isinstance(stmt, ast.Assign)
        and stmt.value is call
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    ):
        return stmt.targets[0].id
    return None


def _bucketing(s: _Script, plan: Plan) -> tuple[list[Finding], list[Instruction]]:
    """``name = bucket_by_length(name)`` after each shuffled training loader is built (its
    import beside it, so the edit is one insertion wherever the loader is)."""
    if plan.batching == "as-is":
        return [], []
    text = s.source.decode("utf-8", "replace")
    if "bucket_by_length(" in text:
        return [], []  # applied before
    option = f", max_tokens={plan.max_tokens}" if plan.batching == "token-budget" else ""
    out = []
    for call in s.calls:
        name = _shuffled_loader(s, call)
        stmt = s.statement_of(call)
        if name is None or stmt is None:
            continue
        lines = (
            "from torchpace.speedups import bucket_by_length",
            f"{name} = bucket_by_length({name}{option})  # batches of similar lengths",
        )
        first = _insert_after(s, stmt, lines[0])
        edit = Edit(
            first.start_line,
            first.start_col,
            first.end_line,
            first.end_col,
            first.text + s.indent_of(stmt.lineno) + lines[1] + s.newline,
        )
        out.append(_finding(s, "length-bucketing", call, f"{name}: batches by length", edit))
    if out:
        return out, []
    return [], [
        Instruction(
            "length-bucketing",
            0,
            "after the training DataLoader is built: loader = torchpace.speedups."
            "bucket_by_length(loader) (its dataset needs per-sample `lengths`)",
        )
    ]


def script_device(source: bytes, path: str) -> str:
    """ "cuda" where the script moves or creates tensors or modules on a CUDA device (lint's
    reading, statically), else "cpu": the default for device-dependent edits."""
    from torchpace.lint.device import uses_cuda
    from torchpace.lint.engine import parse

    ctx = parse(path, source)
    return "cuda" if not isinstance(ctx, LintError) and uses_cuda(ctx) else "cpu"


def plan_edits(
    source: bytes, path: str, plan: Plan, *, device: str = "cpu"
) -> tuple[list[Finding], list[Instruction]]:
    """The plan's edits to ``source`` (findings carrying fixes) and the instructions for what
    has no sound static edit. ``device`` ("cpu" or "cuda") picks device-dependent values."""
    s = _Script(source, path)
    findings: list[Finding] = []
    notes: list[Instruction] = []
    if plan.grad_set_to_none:
        findings += _set_to_none(s)
    if plan.fused_optimizer:
        findings += _fused(s, device)
    for part in (
        _loader(s, plan, device)
        if plan.loader == "auto" or plan.loader_workers is not None
        else ([], []),
        _fast_math(s, device) if plan.fast_math else ([], []),
        _model_edits(s, plan),
        _autocast(s, plan, device),
        _bucketing(s, plan),
        _batch_size(s, plan),
    ):
        findings += part[0]
        notes += part[1]
    notes += _instructions(s, plan)
    for tid in plan.techniques():  # what the plan holds that no edit writes: said, not dropped
        facets = techniques.get(tid).plan
        if isinstance(facets, techniques.Planned) and isinstance(facets.edit, techniques.No):
            notes.append(Instruction(tid, 0, f"not written into the script: {facets.edit.why}"))
    return findings, notes
