"""TP307: attention written by hand where ``F.scaled_dot_product_attention`` runs fused."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cached_property

from torchpace.lint.loops import (
    LOOPS,
    NESTED_SCOPES,
    assignments,
    dotted,
    strip_moves,
    walk,
)
from torchpace.lint.rule import FileContext, Report, Rule
from torchpace.lint.rules.evaluation import grad_disabled
from torchpace.lint.tree import children, subtree

_SOFTMAX = frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax"})
_MATMUL = frozenset({"torch.matmul", "torch.bmm", "torch.einsum"})
# ``torch.baddbmm(buffer, q, k^T, beta=0.0, alpha=scale)``: Megatron's scores, scaled, into a
# buffer it allocated (GPT-NeoX, BLOOM); the product is of its second and third tensors.
_BADDBMM = "torch.baddbmm"
_SDPA = "torch.nn.functional.scaled_dot_product_attention"
# Other fused attention kernels a function may pick beside its hand-written path.
_XFORMERS = frozenset(
    {"xformers.ops.memory_efficient_attention", "xformers.ops.fmha.memory_efficient_attention"}
)


def _fused(qual: str | None) -> bool:
    """``qual`` is a fused attention kernel: SDPA, FlashAttention's functions (``flash_attn.
    flash_attn_func``, ``flash_attn_unpadded_func``), xformers' memory-efficient attention."""
    qual = qual or ""
    flash = qual.startswith("flash_attn.") and qual.rsplit(".", 1)[-1].startswith("flash_attn_")
    return qual == _SDPA or flash or qual in _XFORMERS


# Methods that only reshape: a transposed tensor viewed anew is still transposed
# (``q.permute(0, 2, 3, 1).view(B, H * W, C)``, DDPM's AttnBlock).
_RESHAPES = frozenset({"view", "reshape", "contiguous", "flatten", "unsqueeze", "squeeze"})


def _transposed(node: ast.expr) -> bool:
    """``k.transpose(-2, -1)``, ``k.transpose(1, 2)``, ``k.mT``, ``k.T``, ``k.permute(...)``,
    also reshaped after (``.view(...)``, ``.reshape(...)``, ``.contiguous()``)."""
    if isinstance(node, ast.Attribute) and node.attr in ("mT", "T"):
        return True
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    if node.func.attr in ("transpose", "permute", "swapaxes"):
        return True
    return node.func.attr in _RESHAPES and _transposed(node.func.value)


class _Function:
    """The attention data flow of one function: which names hold scores (q @ k^T and what is
    computed from them) and which hold probabilities (a softmax of scores)."""

    def __init__(self, ctx: FileContext, fn: ast.AST) -> None:
        self.ctx = ctx
        self.fn = fn
        self.scores: dict[str, ast.AST] = {}  # name -> the q @ k^T node it comes from
        self.probs: dict[str, ast.AST] = {}
        self.found: list[ast.AST] = []
        self.returned_or_kept: set[str] = set()
        self.returned_at: dict[str, tuple[int, int]] = {}  # name -> (index, tuple length)
        # names last bound to a transposed tensor (``q = q.permute(0, 2, 1)``)
        self.transposed: set[str] = set()
        # the map goes through a module of the model's own (``attn = self.talking_head1(attn)``)
        self.transformed = False
        self.sdpa = False
        self._aliases: dict[str, str] | None = None  # local names bound to a softmax
        # Statements in source order; nested functions are their own.
        body = [n for n in _own_nodes(fn) if isinstance(n, ast.stmt)]
        body.sort(key=lambda n: (n.lineno, n.col_offset))
        for stmt in body:
            self._statement(stmt)

    def _qualname(self, call: ast.Call) -> str:
        if isinstance(call.func, ast.Call) and self.ctx.names.qualname(call.func.func) == (
            "torch.nn.Softmax"
        ):
            return "torch.nn.functional.softmax"  # nn.Softmax(dim=-1)(scores): built and applied
        name = self.ctx.names.qualname(call.func) or ""
        if isinstance(call.func, ast.Name) and name not in _SOFTMAX:
            aliased = self._softmax_alias(call.func.id)
            if aliased:
                return aliased
        if name or not isinstance(call.func, ast.Attribute):
            return name
        owner = call.func.value
        while isinstance(owner, ast.Attribute):
            owner = owner.value
        on_self = isinstance(owner, ast.Name) and owner.id == "self"
        if "softmax" in call.func.attr.lower() and on_self and call.args:
            return "torch.nn.functional.softmax"  # self.softmax(x): an nn.Softmax module
        if call.func.attr == "softmax":
            return "torch.Tensor.softmax"  # x.softmax(dim=-1)
        return name

    def _softmax_alias(self, name: str) -> str:
        """The softmax a local name is bound to, also one of two chosen by a flag (DALL-E's
        ``softmax = torch.softmax if not self.stable else stable_softmax``); else ""."""
        if self._aliases is None:
            self._aliases = {}
            for node in _own_nodes(self.fn):
                if not (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                ):
                    continue
                value = node.value
                branches = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
                for branch in branches:
                    qual = self.ctx.names.qualname(branch) or ""
                    if qual in _SOFTMAX:
                        self._aliases[node.targets[0].id] = qual
        return self._aliases.get(name, "")

    def _is_transposed(self, node: ast.expr) -> bool:
        return _transposed(node) or (isinstance(node, ast.Name) and node.id in self.transposed)

    def _operands(self, call: ast.Call) -> list[ast.expr]:
        """A product's tensors: an einsum's after its spec, given one by one or as one tuple
        (``torch.einsum("nct,ncp->ntp", (theta, phi))``)."""
        if self._qualname(call) == _BADDBMM:
            return list(call.args[1:3])
        if self._qualname(call) != "torch.einsum":
            return list(call.args)
        args = call.args[1:]
        if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
            return list(args[0].elts)
        return list(args)

    def _score_in(self, node: ast.AST) -> ast.AST | None:
        """The q @ k^T node ``node`` computes from, directly or through a name: a product one
        of whose operands is transposed (``q @ k.transpose(-2, -1)``; ``torch.bmm(q, k)`` after
        ``q = q.permute(0, 2, 1)``), or an einsum that contracts one axis of both."""
        for sub in subtree(node):
            if (
                isinstance(sub, ast.BinOp)
                and isinstance(sub.op, ast.MatMult)
                and (self._is_transposed(sub.right) or self._is_transposed(sub.left))
            ):
                return sub
            if isinstance(sub, ast.Call) and self._qualname(sub) in _MATMUL | {_BADDBMM}:
                args = self._operands(sub)
                if self._qualname(sub) == "torch.einsum" and len(args) == 2:
                    spec = sub.args[0]
                    if isinstance(spec, ast.Constant) and _einsum_scores(str(spec.value)):
                        return sub
                elif len(args) == 2 and any(self._is_transposed(a) for a in args):
                    return sub
            if isinstance(sub, ast.Name) and sub.id in self.scores:
                return self.scores[sub.id]
        return None

    def _probs_in(self, node: ast.AST) -> ast.AST | None:
        for sub in subtree(node):
            if isinstance(sub, ast.Call) and self._qualname(sub) in _SOFTMAX:
                target: ast.AST | None = sub.args[0] if sub.args else None
                if self._qualname(sub) == "torch.Tensor.softmax":
                    target = sub.func.value  # type: ignore[attr-defined]
                score = self._score_in(target) if target is not None else None
                if score is not None:
                    return score
            if isinstance(sub, ast.Name) and sub.id in self.probs:
                return self.probs[sub.id]
        return None

    def _applied_to_values(self, node: ast.AST) -> ast.AST | None:
        """The score node of ``probs @ v`` (or matmul/bmm/einsum of probs) inside ``node``."""
        for sub in subtree(node):
            sides: list[ast.expr] = []
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.MatMult):
                sides = [sub.left, sub.right]
            elif isinstance(sub, ast.Call) and self._qualname(sub) in _MATMUL:
                sides = self._operands(sub)[:2]  # probs @ v, or v @ probs^T (``bmm(v, w_)``)
            for side in sides:
                score = self._probs_in(side)
                if score is not None:
                    return score
        return None

    def _statement(self, stmt: ast.stmt) -> None:
        for sub in subtree(stmt):
            if isinstance(sub, ast.Call) and _fused(self._qualname(sub)):
                self.sdpa = True
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            # Names returned as they are (alone, or as an element of a returned tuple or list),
            # not those the returned expression computes from.
            out = stmt.value
            items = out.elts if isinstance(out, (ast.Tuple, ast.List)) else [out]
            self.returned_or_kept |= {n.id for n in items if isinstance(n, ast.Name)}
            for i, n in enumerate(items):
                if isinstance(n, ast.Name):
                    self.returned_at.setdefault(n.id, (i, len(items)))
        value = getattr(stmt, "value", None)
        kinds = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)
        if value is None or not isinstance(stmt, kinds):
            return
        if self._transforms_map(value) and not self._optional(stmt, value):
            self.transformed = True
        hit = self._applied_to_values(value)
        if hit is not None and hit not in self.found:
            self.found.append(hit)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        kept = [t for t in targets if isinstance(t, ast.Attribute)]  # self.attn = probs
        # The output of probs @ v is neither scores nor probabilities.
        probs = None if hit is not None else self._probs_in(value)
        score = None if hit is not None else self._score_in(value)
        if isinstance(stmt, ast.AugAssign):
            return  # ``scores += bias``: the name keeps what it held (scores stay scores)
        for name in names:
            self.scores.pop(name, None)
            self.probs.pop(name, None)
            self.transposed.discard(name)
            if _transposed(value):
                self.transposed.add(name)
            if probs is not None:
                self.probs[name] = probs
            elif score is not None:
                self.scores[name] = score
        if kept and probs is not None:
            self.returned_or_kept.add("<attribute>")

    def _optional(self, stmt: ast.stmt, value: ast.expr) -> bool:
        """``stmt`` runs only on a branch of an ``if`` in the function that does not also
        compute the scores it transforms (``if self.pos_emb == "alibi": scores =
        self.alibi_embed(scores)``): the path that skips it is attention SDPA runs as it is.
        Attention written whole under the ``if`` (``if self.talking_heads:`` around the scores,
        the heads' mixing and the softmax) has no plain path."""
        score = self._score_in(value) or self._probs_in(value)
        for ancestor in self.ctx.ancestors(stmt):
            if ancestor is self.fn:
                return False
            if isinstance(ancestor, ast.If):
                return score is None or all(n is not score for n in subtree(ancestor))
        return False

    def _transforms_map(self, value: ast.expr) -> bool:
        """``self.talking_head1(attn)``: a module of the model's own applied to the scores or
        the probabilities, other than dropout (SDPA's ``dropout_p``) or a softmax."""
        for call in subtree(value):
            if not isinstance(call, ast.Call):
                continue
            name = dotted(call.func) or ""
            last = name.rsplit(".", 1)[-1].lower()
            method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
            if self.ctx.names.qualname(call.func) == "torch.tanh" or "tanh" in (last, method):
                # a soft cap (``64 * torch.tanh(q @ k.mT / 1024)``), which SDPA cannot apply
                if any(self._score_in(a) for a in (*call.args, call.func)):
                    return True
                continue
            if not name.startswith("self.") or "drop" in last or "softmax" in last:
                continue
            if name.count(".") == 1 and name[5:] in self._identities:
                continue  # ``self.id = nn.Identity()``: a hook point, the map unchanged
            if any(self._score_in(a) or self._probs_in(a) for a in call.args):
                return True  # also CaiT's ``self.proj_l(attn.permute(0, 2, 3, 1))``
        return False

    @cached_property
    def _identities(self) -> set[str]:
        """The attributes the class of this function binds to ``nn.Identity()``."""
        cls = next((a for a in self.ctx.ancestors(self.fn) if isinstance(a, ast.ClassDef)), None)
        if cls is None:
            return set()
        return {
            target[5:]
            for target, value in assignments(n for n in subtree(cls) if isinstance(n, ast.Assign))
            if target.startswith("self.")
            and isinstance(value, ast.Call)
            and self.ctx.names.qualname(value.func) == "torch.nn.Identity"
        }

    def reports(self, fn: ast.AST) -> list[ast.AST]:
        if self.sdpa:
            return []  # the hand-written path is the fallback beside a fused one (nanoGPT)
        if self.transformed:
            return []  # talking heads: SDPA takes an additive mask and dropout, no module
        if "<attribute>" in self.returned_or_kept:
            return []  # the weights are kept: the fused kernels do not return them
        returned = self.returned_or_kept & set(self.probs)
        if returned and not all(
            name in self.returned_at and _Callers(self.ctx).drop(fn, *self.returned_at[name])
            for name in returned
        ):
            return []  # the weights are returned, and a caller may want them
        return self.found


# How many callers up a returned attention map is followed (the attention, its multi-head
# module, the layer, the model: BERT's four).
_CALLER_DEPTH = 5


class _Callers:
    """Where a function's returned value goes, in this file: each call of it (a module's
    forward through an instance, ``Attention()(q, k, v)``, or a loop over a ModuleList of
    them; a function or method by name), unpacked at the same position."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        # every ``name = value`` of the file: a name ever bound to an instance is a call site
        # of its class, whatever else it is bound to (more sites, never fewer)
        self._assigned = list(assignments(ctx.of_type(ast.Assign)))

    def _class_of(self, fn: ast.AST) -> str | None:
        parent = self.ctx.parents.get(id(fn))
        return parent.name if isinstance(parent, ast.ClassDef) else None

    def _owner(self, node: ast.AST) -> str | None:
        """The class whose method ``node`` is in, for what it binds or reads on ``self``."""
        cls = next((a for a in self.ctx.ancestors(node) if isinstance(a, ast.ClassDef)), None)
        return None if cls is None else cls.name

    def _sites(self, fn: ast.AST) -> list[ast.Call]:
        """The calls of ``fn`` in this file."""
        name = getattr(fn, "name", "")
        cls = self._class_of(fn)
        calls = [c for c, _ in self.ctx.calls]
        if cls is None:
            return [c for c in calls if isinstance(c.func, ast.Name) and c.func.id == name]
        bound = {t for t, v in self._assigned if _builds(strip_moves(v), cls)}
        if name != "forward":
            return [
                c
                for c in calls
                if isinstance(c.func, ast.Attribute)
                and c.func.attr == name
                and dotted(c.func.value) in bound | {"self"}
            ]
        # ``self.layers = nn.ModuleList([Layer() ...])``, then ``for layer in self.layers:``
        # in the same class (an Encoder's and a Decoder's ``self.layers`` hold different layers)
        lists = {
            (self._owner(node), dotted(t))
            for node in self.ctx.of_type(ast.Assign)
            if _list_of(node.value, cls)
            for t in node.targets
        }
        sites = [c for c in calls if dotted(c.func) in bound or _builds(c.func, cls)]
        for loop in self.ctx.of_type(ast.For):
            iterated = dotted(loop.iter) or ""
            owner = self._owner(loop) if iterated.startswith("self.") else None
            if isinstance(loop.target, ast.Name) and (owner, iterated) in lists:
                name = loop.target.id  # the calls of the loop's own name, in its body
                sites += [
                    n
                    for n in walk(loop.body)
                    if isinstance(n, ast.Call) and dotted(n.func) == name and n not in sites
                ]
        return sites

    def drop(self, fn: ast.AST, index: int, length: int, depth: int = 0) -> bool:
        """Every call of ``fn`` drops the ``index``-th of the ``length`` values it returns, or
        returns it in turn to callers that drop it."""
        sites = self._sites(fn)
        if not sites or depth > _CALLER_DEPTH:
            return False  # never called here (called from another file): cannot tell
        return all(self._dropped_at(call, index, length, depth) for call in sites)

    def _dropped_at(self, call: ast.Call, index: int, length: int, depth: int) -> bool:
        stmt = self.ctx.parents.get(id(call))
        if isinstance(stmt, ast.Expr):
            return True  # called for its other value's side effects: nothing kept
        if not (isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1):
            return False
        target = stmt.targets[0]
        if length > 1:
            if not (isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == length):
                return False
            target = target.elts[index]
        if not isinstance(target, ast.Name):
            return False
        scope = self.ctx.enclosing_scope(call)
        reads = [
            n
            for n in _own_nodes(scope)
            if isinstance(n, ast.Name) and n.id == target.id and isinstance(n.ctx, ast.Load)
        ]
        if not reads:
            return True  # bound and never read: BERT's ``output, enc_self_attn = layer(...)``
        if _last_value_only(self.ctx, call, reads):
            return True  # each step's weights are dropped by the next: one plot after training
        if len(reads) != 1 or not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        collected = _appended_to(self.ctx, reads[0], scope)
        if collected is not None:  # ``attns.append(attn)`` per layer, then ``return x, attns``
            return self._returned_dropped(collected, scope, depth)
        return self._returned_dropped(reads[0], scope, depth)

    def _returned_dropped(self, read: ast.Name, scope: ast.AST, depth: int) -> bool:
        """``read`` is returned (alone or in a returned tuple) to callers that drop it."""
        returned = self.ctx.parents.get(id(read))
        if isinstance(returned, ast.Return):
            return self.drop(scope, 0, 1, depth + 1)
        outer = self.ctx.parents.get(id(returned))
        if isinstance(returned, ast.Tuple) and isinstance(outer, ast.Return):
            at = next(i for i, e in enumerate(returned.elts) if e is read)
            return self.drop(scope, at, len(returned.elts), depth + 1)
        return False


def _appended_to(ctx: FileContext, read: ast.Name, scope: ast.AST) -> ast.Name | None:
    """The list ``read`` is appended to (``attns.append(attn)``), where the function reads that
    list only to return it: its one other read."""
    call = ctx.parents.get(id(read))
    if not (
        isinstance(call, ast.Call)
        and call.args == [read]
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "append"
        and isinstance(call.func.value, ast.Name)
    ):
        return None
    name = call.func.value.id
    others = [
        n
        for n in _own_nodes(scope)
        if isinstance(n, ast.Name)
        and n.id == name
        and isinstance(n.ctx, ast.Load)
        and n is not call.func.value
    ]
    return others[0] if len(others) == 1 else None


def _last_value_only(ctx: FileContext, call: ast.Call, reads: list[ast.Name]) -> bool:
    """``call`` runs in a loop, and what it binds is read only after that loop: the value of
    every iteration but the last is dropped (nlp-tutorial's Transformer returns its attention
    maps on every training step; the script plots the last step's after training)."""
    loop = next((a for a in ctx.ancestors(call) if isinstance(a, LOOPS)), None)
    if loop is None or any(isinstance(a, NESTED_SCOPES) for a in _between(ctx, call, loop)):
        return False
    end = loop.end_lineno or loop.lineno
    inside = {id(n) for n in subtree(loop)}
    return all(id(r) not in inside and r.lineno > end for r in reads)


def _between(ctx: FileContext, node: ast.AST, top: ast.AST) -> Iterator[ast.AST]:
    for ancestor in ctx.ancestors(node):
        if ancestor is top:
            return
        yield ancestor


def _list_of(value: ast.expr, cls: str) -> bool:
    """``nn.ModuleList([Layer() for _ in range(n)])`` or a list of them: modules of ``cls``."""
    if (
        isinstance(value, ast.Call)
        and value.args
        and (dotted(value.func) or "").endswith("ModuleList")
    ):
        value = value.args[0]
    if isinstance(value, ast.ListComp):
        items = [value.elt]
    elif isinstance(value, (ast.List, ast.Tuple)):
        items = list(value.elts)
    else:
        return False
    return bool(items) and all(_builds(i, cls) for i in items)


def _builds(value: ast.expr, cls: str) -> bool:
    """``value`` makes an instance of ``cls``, a class of this file: ``Layer(...)``."""
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == cls


def _einsum_scores(spec: str) -> bool:
    """An einsum that contracts one axis of two operands and keeps every other: a score of each
    query position against each key position. ``"bhqd,bhkd->bhqk"``, ``"bct,bcs->bts"`` (the
    head axis in the middle), ``"bhid,bjd->bhij"`` (keys shared by the heads), and
    ``"bchw,bcij->bhwij"`` (DDPM's attention over a feature map's two axes, score-SDE's
    ``AttnBlockpp``)."""
    spec = spec.replace(" ", "").replace("...", "*")  # the batch's axes, one symbol
    if "->" not in spec or spec.count(",") != 1:
        return False
    inputs, out = spec.split("->")
    a, b = inputs.split(",")
    contracted = (set(a) & set(b)) - set(out)
    return (
        bool(a)
        and bool(b)
        and len(contracted) == 1
        and len(out) == len(set(out))
        and set(out) == (set(a) | set(b)) - contracted
        and bool(set(a) - set(b))  # the queries' own positions
        and bool(set(b) - set(a))  # the keys' own positions
    )


def _own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``fn``'s body, not of functions or classes defined inside it."""
    return walk(children(fn))


def _check_hand_written_attention(ctx: FileContext) -> Iterator[Report]:
    if b"softmax" not in ctx.source.lower():
        return  # no softmax, no attention: most files stop here (lint's speed)
    # Also on the CPU: SDPA's fused CPU kernel ran a float32 forward and backward 1.4-3.4x
    # faster than the hand-written form, from 5 to 512 tokens (benchmarks/sdpa_cpu.py).
    # the functions whose own body (not a nested def, class or lambda) names a softmax: found
    # from each softmax upwards, not by walking every function (lint's speed)
    owners = set()
    for node in (*ctx.of_type(ast.Attribute), *ctx.of_type(ast.Name)):
        if "softmax" in (node.attr if isinstance(node, ast.Attribute) else node.id).lower():
            owner = next((a for a in ctx.ancestors(node) if isinstance(a, NESTED_SCOPES)), None)
            if isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                owners.add(id(owner))
    for fn in ctx.of_type(ast.FunctionDef, ast.AsyncFunctionDef):
        if id(fn) not in owners:
            continue
        found = _Function(ctx, fn).reports(fn)
        if found and (_only_a_fallback(ctx, fn) or _complex(ctx, fn)):
            continue
        trains = bool(ctx.loops.step_loops or ctx.loops.step_functions)
        for node in found:
            if not trains and grad_disabled(ctx, node):
                continue  # an inference script's decoding, autograd off: nothing trains it
            yield Report(node)


# What makes complex tensors: the scores of Fourier-domain "attention" (FEDformer's frequency
# enhanced blocks) are complex, which no fused kernel takes.
_COMPLEX = frozenset(
    {"torch.cfloat", "torch.cdouble", "torch.complex64", "torch.complex128", "torch.complex"}
)


def _complex(ctx: FileContext, fn: ast.AST) -> bool:
    """The function computes on complex tensors: it calls ``torch.fft`` or names a complex
    dtype (``torch.zeros(..., dtype=torch.cfloat)``, ``torch.complex(re, im)``)."""
    for node in _own_nodes(fn):
        if isinstance(node, (ast.Attribute, ast.Name)):  # also ``from torch.fft import rfft``
            qual = ctx.names.qualname(node) or ""
            if qual in _COMPLEX or qual.startswith("torch.fft."):
                return True
    return False


def _calls_sdpa(ctx: FileContext, scope: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and _fused(ctx.names.qualname(n.func)) for n in _own_nodes(scope)
    )


def _only_a_fallback(ctx: FileContext, fn: ast.AST) -> bool:
    """Every call of ``fn`` in this file is made by a function that also calls the fused
    kernel: a backend switch whose hand-written branch is the fallback (kohya's SD3
    ``attention(mode=...)``: "torch" runs SDPA, "xformers" its kernel, anything else
    ``vanilla_attention``)."""
    name = getattr(fn, "name", "")
    callers = [
        ctx.enclosing_scope(call)
        for call, _ in ctx.calls
        if (isinstance(call.func, ast.Name) and call.func.id == name)
        or (isinstance(call.func, ast.Attribute) and call.func.attr == name)
    ]
    return bool(callers) and all(
        not isinstance(c, ast.Module) and _calls_sdpa(ctx, c) for c in callers
    )


HAND_WRITTEN_ATTENTION = Rule(
    code="TP307",
    name="hand-written-attention",
    message="Attention written by hand (scores, softmax, @ v): "
    "`F.scaled_dot_product_attention` runs it fused",
    technique="sdpa-attention",
    doc="""\
## What it does
Flags attention computed by hand in one function: scores from a matrix product with a
transposed operand (`q @ k.transpose(-2, -1)`, `torch.matmul`, `torch.bmm`, also one permuted then
reshaped, `q.permute(0, 2, 3, 1).view(B, H * W, C)`, Megatron's
`torch.baddbmm(buffer, q, k.transpose(1, 2), beta=0.0, alpha=scale)`, also after
`q = q.permute(0, 2, 1)` in the same function), or an `einsum` that contracts one axis of
both (`"bhqd,bhkd->bhqk"`, `"bct,bcs->bts"`, its operands given one by one or as a tuple), a
softmax of those scores, and the product of the probabilities with the values, on either side
(`probs @ v`, `torch.bmm(v, probs)`). Reported at the scores.

Not reported on complex tensors (a function that calls `torch.fft` or names a complex dtype:
FEDformer's attention over Fourier modes), which no fused kernel takes, nor on scores soft-capped
with `tanh` (`64 * torch.tanh(q @ k.mT / 1024)`), which SDPA cannot apply. Not in a file that
trains nothing where the attention runs with autograd off (under `torch.no_grad()` or
`torch.inference_mode()`, or in a function decorated with either): an inference demo's decoding.
Not reported where the same function also calls `F.scaled_dot_product_attention` or another
fused kernel, FlashAttention's (its `flash_attn_*` functions, `flash_attn_func`,
`flash_attn_unpadded_func`; not its rotary or padding helpers) or xformers'
`memory_efficient_attention` (the hand path is then a fallback: for old torch versions, as in
nanoGPT; for cached decoding beside the training path's FlashAttention), where the scores or the
probabilities go through a module of the model's own other than dropout (talking heads, `attn =
self.talking_head1(attn)`: SDPA takes an additive mask and dropout, no module; one applied
only under an `if`, such as an ALiBi bias a configuration asks for, leaves the default path
plain), or where the
attention weights are kept on an attribute or returned to a caller that may want them (the
fused kernels do not return them). Returned weights are followed up through the callers in the
same file (the multi-head module, the layer, the model, including layers iterated from an
`nn.ModuleList`): where every caller drops them (`x, attn = layer(x)` and `attn` never read),
it is reported; also through a list the layers' maps are appended to and that is only returned
(`attns.append(attn)`, then `return x, attns`), and where a loop binds them on every step and
only code after the loop reads them (the last step's maps, plotted after training): every other
step's are dropped. Reported on the CPU as well: SDPA has a fused CPU kernel too, and a float32
forward and backward ran 1.4-3.4x faster through it than the hand-written form, from 5 to 512
tokens (`python benchmarks/sdpa_cpu.py`, a 2-core EPYC with torch 2.13).

## Why is this slow
Each step is its own kernel, and the whole `L x L` attention matrix is written to memory and
read back several times, forward and backward. `F.scaled_dot_product_attention` computes the
same function in one call that dispatches to fused kernels (flash, memory-efficient, cuDNN,
and a flash kernel on the CPU) that never store the matrix. With hand-written attention there
is also no attention backend for the tune to choose.

## Example
```python
att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
att = F.softmax(att, dim=-1)
y = att @ v
```

## Use instead
```python
y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
```

## Fix safety
No fix: the mask, the scale, the dropout and any bias added to the scores must become SDPA's
`attn_mask`, `scale`, `dropout_p` and `is_causal` arguments, which depends on shapes and
semantics the source does not show for certain.

## References
PyTorch docs, `torch.nn.functional.scaled_dot_product_attention`; the PyTorch tutorial
"(Beta) Implementing High-Performance Transformers with Scaled Dot Product Attention".
""",
    check=_check_hand_written_attention,
)

RULES = (HAND_WRITTEN_ATTENTION,)
