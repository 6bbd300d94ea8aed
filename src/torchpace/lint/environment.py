"""Loops bound by an environment: reinforcement learning's interaction loops (issue 32).

A loop that calls an environment's ``step(action)`` every iteration must bring the action to the
host for a CPU environment: that read is what the algorithm needs, and the loop's time is the
environment's. Syncs there, and autocast for the small network that picks the action, are not
what makes such a run slow; the rules that report them leave these loops alone.

An environment is recognised by its name (``env``, ``envs``, ``environment``, ``vec_env``,
``train_env``, ``self.env``, ...) or by what built it (``gym.make``, ``gymnasium.make``,
``make_vec_env``, a vector-env class). A loop steps it where it calls ``step`` itself, or calls
a function of the file that does, outside that function's own loops (an agent's
``step(action)`` method around ``self.env.step(action)``; a ``rollout()`` that steps it in a loop
of its own runs many steps per call). The environment-bound nodes are those lexically inside
such a loop, and those of the functions it calls directly (``select_action(state)``), except
inside a loop of those functions that trains on its own (a PPO update's epochs over its
minibatches: syncs there happen per gradient step, not per environment step), unless that loop
runs once a call (``for _ in range(args.gradient_steps)`` with a default of 1).
"""

from __future__ import annotations

import ast
import re

from torchpace.lint.loops import LOOPS, dotted, walk
from torchpace.lint.rule import FileContext
from torchpace.lint.tree import subtree
from torchpace.lint.values import int_value

_ENV_NAME = re.compile(r"^(?:.*_)?(?:envs?|environments?|vec_?envs?)$", re.IGNORECASE)
_ENV_MAKERS = (
    "gym.make",
    "gymnasium.make",
    "make_vec_env",
    "make_env",
    "SyncVectorEnv",
    "AsyncVectorEnv",
    "DummyVecEnv",
    "SubprocVecEnv",
    "VecEnv",
)


def made_envs(ctx: FileContext) -> set[str]:
    """Names assigned from an environment factory in this file."""
    out = set()
    for node in ctx.of_type(ast.Assign):
        value = node.value
        if not isinstance(value, ast.Call):
            continue
        name = ctx.names.qualname(value.func) or dotted(value.func) or ""
        if name.endswith(_ENV_MAKERS):
            out |= {dotted(t) or "" for t in node.targets}
    return out - {""}


def steps_env(node: ast.AST, made: set[str]) -> bool:
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "step"
        and (node.args or node.keywords)
    ):
        return False
    owner = dotted(node.func.value) or ""
    last = owner.rsplit(".", 1)[-1]
    return owner in made or bool(_ENV_NAME.match(last))


def _steps_env_in(fn: ast.AST, made: set[str]) -> bool:
    """A function that steps an environment itself (an agent's ``step(action)`` method around
    ``self.env.step(action)``), outside its own loops: once per call."""
    body = fn.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
    return any(steps_env(n, made) for n in walk(body, into_loops=False))


def _once(ctx: FileContext, loop: ast.AST) -> bool:
    """``for _ in range(n)`` with ``n`` at most 1, a literal or an option's default (SAC's
    ``--gradient_steps`` of 1): one gradient step each environment step, as the loop is written
    to run. Unlike TP104's one-epoch loop (``lightning.at_most_once``), where an option's default
    does not count, it counts here: the default run takes one gradient step per environment
    step, and the environment loop's own read of the action already waits for each."""
    if not (
        isinstance(loop, (ast.For, ast.AsyncFor))
        and isinstance(loop.iter, ast.Call)
        and dotted(loop.iter.func) == "range"
        and len(loop.iter.args) == 1
    ):
        return False
    count = int_value(ctx, loop.iter.args[0])
    return count is not None and count <= 1


def env_bound(ctx: FileContext) -> frozenset[int]:
    """``id`` of every node that runs once per environment step (module docs)."""
    if b"step(" not in ctx.source:
        return frozenset()
    made = made_envs(ctx)
    facts = ctx.loops
    bound: set[int] = set()
    callees: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    stepping: dict[int, bool] = {}  # each function's body read once, however many loops call it
    for loop in ctx.of_type(*LOOPS):
        body = list(walk(loop.body, into_loops=True))
        scope = ctx.enclosing_scope(loop)
        called = [f for n in body if isinstance(n, ast.Call) for f in facts.callees(n, scope)]
        for f in called:
            if id(f) not in stepping:
                stepping[id(f)] = _steps_env_in(f, made)
        if not any(steps_env(n, made) for n in body) and not any(stepping[id(f)] for f in called):
            continue
        bound.update(id(node) for node in body)
        callees += called
    for fn in callees:
        inner_training = {
            id(n)
            for loop in walk(fn.body, into_loops=True)
            if isinstance(loop, LOOPS) and facts.trains(loop.body, fn) and not _once(ctx, loop)
            for n in subtree(loop)
        }
        bound |= {id(n) for n in subtree(fn) if id(n) not in inner_training}
    return frozenset(bound)
