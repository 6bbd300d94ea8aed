"""speedups.py's ``verbs`` part: each speed-up verb alone on a reference workload, and the
``fast`` preset through ``prepare()``, against the naive configuration, in one process, in
interleaved rounds over the same pre-collated batches. The bucketing part reuses its naive step
(``build_variant``) and its batch feeder (``stepper``)."""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from _speedups_common import SEED, other_load, spread, utilization
from _steptimer import CompileWatch, step_flops

from torchpace.measure.paired import PairedResult, Variant, compare
from torchpace.measure.stats import Summary, summarize
from torchpace.measure.timing import Work
from torchpace.speedups import (
    autocast_forward,
    choose_precision,
    compile_model,
    fold_conv_bias,
    fuse_optimizer,
    to_device,
    use_attention_backend,
    use_channels_last,
)
from torchpace.train import Plan, prepare
from torchpace.train.build import training_loader
from torchpace.workloads import load

VERBS: dict[str, dict[str, dict[str, Any]]] = {
    "cnn": {
        "channels_last": {"channels_last": True},
        "fold_conv_bias": {"fold": True},
        "fused optimizer": {"fused": True},
        "bf16 autocast": {"amp": "bf16"},
        "compile": {"compile": True},
        "fast preset": {"preset": "fast"},
    },
    "lm": {
        "fused optimizer": {"fused": True},
        "bf16 autocast": {"amp": "bf16"},
        "bf16 + math attention": {"amp": "bf16", "attention": "math"},
        "compile": {"compile": True},
        "fast preset": {"preset": "fast"},
    },
    "seqcls": {
        "fused optimizer": {"fused": True},
        "bf16 autocast": {"amp": "bf16"},
        "fast preset": {"preset": "fast"},
    },
}


def first_batches(recipe: Any, n: int) -> list[Any]:
    """The first ``n`` batches of the recipe's loader as ``torchpace fit`` builds it (shuffled
    with SEED, full batches), collated once, so no configuration's step waits on the loader."""
    loader = training_loader(recipe, SEED)
    out: list[Any] = []
    while len(out) < n:  # past an epoch, the next pass reshuffles, as training does
        out.extend(itertools.islice(loader, n - len(out)))
    return out


def peak_of(env: dict[str, Any], bf16: bool) -> float | None:
    return env["fingerprint"]["peak_tflops_bf16" if bf16 else "peak_tflops_fp32"]


def build_variant(
    workload: str,
    dev: torch.device,
    *,
    channels_last: bool = False,
    fold: bool = False,
    fused: bool = False,
    amp: str = "off",
    attention: str = "default",
    compile: bool = False,
    preset: str | None = None,
) -> tuple[Callable[[Any], Work], dict[str, Any]]:
    """One configuration's step on a given batch: the naive one plus the given verbs (or
    ``preset`` through prepare()), and what was applied.

    Naive: the recipe's model and optimizer, ``zero_grad(set_to_none=False)`` and a
    ``loss.item()`` every step. The preset runs as fit() does: set_to_none and no per-step
    read. A step: move the batch (channels_last if asked), forward, backward, optimizer step,
    zero grads."""
    recipe = load(workload)
    torch.manual_seed(SEED)  # every configuration starts from the same weights
    model = recipe.model().to(dev)
    model.train()
    applied: list[Any] = []
    set_to_none, read_every_step, matmul = False, True, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if preset is not None:
            plan = Plan.preset(preset)
            optimizer = recipe.optimizer(model.parameters(), recipe.lr)
            before = torch.get_float32_matmul_precision()
            model, optimizer, _ = prepare(model, optimizer, plan=plan, device=dev, applied=applied)
            # set_fast_math is process-wide: keep it to this configuration's own steps.
            matmul = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision(before)
            channels_last, set_to_none, read_every_step = plan.channels_last, True, False
            compile = plan.compile != "off"
        else:
            if fold:  # before the optimizer is built: folded biases leave the parameters
                applied.append(fold_conv_bias(model))
            if channels_last:
                applied.append(use_channels_last(model))
            optimizer = recipe.optimizer(model.parameters(), recipe.lr)
            if fused:
                applied.append(fuse_optimizer(optimizer))
            if amp != "off":
                precision, chosen = choose_precision(dev, amp)
                applied += [chosen, autocast_forward(model, precision=precision)]
            if attention != "default":
                applied.append(use_attention_backend(model, backend=attention))
            if compile:
                applied.append(compile_model(model))

    def run(batch: Any) -> Work:
        work = Work(recipe.count_samples(batch), recipe.count_tokens(batch))  # on the host
        previous = torch.get_float32_matmul_precision()
        if matmul is not None:
            torch.set_float32_matmul_precision(matmul)
        try:
            batch = to_device(batch, dev, channels_last=channels_last)
            loss = recipe.loss(model, batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=set_to_none)
            if read_every_step:
                loss.item()  # note: a host-device sync, as the naive scripts' logging does
        finally:
            torch.set_float32_matmul_precision(previous)
        return work

    info = {
        "applied": [str(a) for a in applied],
        "changes": [c for a in applied for c in a.changes],
        "techniques": list(dict.fromkeys(a.technique for a in applied if a.changed)),
        "warnings": sorted({str(w.message) for w in caught}),
        "bf16": any(a.technique == "amp-bf16" and a.changed for a in applied),
        "compiled": compile,
        "set_to_none": set_to_none,
        "loss_item_every_step": read_every_step,
        "float32_matmul_precision": matmul or torch.get_float32_matmul_precision(),
    }
    return run, info


def stepper(
    name: str, run: Callable[[Any], Work], batches: list[Any], watch: CompileWatch, warmup: int
) -> Variant:
    """``run`` over ``batches`` in order, one per call: call i of every configuration takes
    batch i, so paired rounds compare equal work."""
    calls = [0]

    def step() -> Work:
        i = calls[0]
        calls[0] += 1
        watch.label = f"{name}|{'warm-up' if i < warmup else 'rounds'}"
        return run(batches[i % len(batches)])

    return Variant(name, step)


def prime(name: str, run: Callable[[Any], Work], batches: list[Any], watch: CompileWatch) -> float:
    """Compile ahead of the rounds: one step on the first batch of every distinct input shape
    (recompiles for new shapes would otherwise land in a timed round). The wall seconds."""
    watch.label = f"{name}|prime"
    seen: set[tuple[int, ...]] = set()
    t0 = time.perf_counter()
    for batch in batches:
        shape = tuple(batch[0].shape)
        if shape not in seen:
            seen.add(shape)
            run(batch)
    return time.perf_counter() - t0


def round_tflops(
    workload: str, batches: list[Any], res: PairedResult, index: int
) -> Summary | None:
    """Achieved TFLOP/s per round of variant ``index``: the FLOPs of the round's batches over
    its seconds (steps ``warmup + r * block ...`` took batches of the same indices)."""
    v = res.variants[index]
    per_round = []
    for r, secs in enumerate(v.block_seconds):
        first = res.warmup + r * res.block
        flops = sum(
            step_flops(workload, batches[(first + j) % len(batches)]) for j in range(res.block)
        )
        per_round.append(flops / secs / 1e12)
    return summarize(per_round) if per_round else None


def verbs_part(
    workloads: list[str],
    rounds: int,
    steps: int,
    warmup: int,
    dev: torch.device,
    env: dict[str, Any],
) -> dict[str, Any]:
    block = max(1, steps // rounds)
    watch = CompileWatch().install()
    out: dict[str, Any] = {}
    for workload in workloads:
        print(f"verbs: {workload} ({len(VERBS[workload]) + 1} configurations)", flush=True)
        batches = first_batches(load(workload), warmup + rounds * block)
        variants, infos = [], {}
        for name, kw in {"naive": {}, **VERBS[workload]}.items():
            run, info = build_variant(workload, dev, **kw)
            if info["compiled"]:
                info["prime_seconds"] = prime(name, run, batches, watch)
            variants.append(stepper(name, run, batches, watch, warmup))
            infos[name] = info
        res = compare(variants, rounds=rounds, block=block, warmup=warmup, device=dev)
        for i, v in enumerate(variants):
            tflops = round_tflops(workload, batches, res, i)
            infos[v.name].update(
                {
                    f"compile_seconds_{phase}": watch.seconds(0, float("inf"), f"{v.name}|{phase}")
                    for phase in ("prime", "warm-up", "rounds")
                },
                tflops=tflops.to_dict() if tflops else None,
                peak_tflops=peak_of(env, infos[v.name]["bf16"]),
            )
        out[workload] = {"paired": res.to_dict(), "variants": infos}
        torch._dynamo.reset()  # compiled graphs of one workload must not fill another's cache
    return {"workloads": out}


def report_verbs(part: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=150)
    for workload, data in part["workloads"].items():
        res = data["paired"]
        table = Table(
            title=f"verbs on {workload}: each alone against naive, in one process",
            caption=escape(
                f"median [q1–q3] over {res['rounds']} interleaved rounds of {res['block']} steps "
                f"per configuration, after {res['warmup']} warm-up steps; same initial weights, "
                "same pre-collated batches (no loader time); compiled configurations first ran "
                "one step per distinct batch shape (compile s: all their compiling, the first "
                "compile of the process with the compiler's start-up); TFLOP/s of the peak in "
                f"the configuration's precision; other load {other_load(res)}"
            ),
        )
        tokens = any(v["tokens_per_s"] for v in res["variants"])
        cols = ["configuration", "ms/step", "speed-up", "samples/s", "tokens/s"][: 4 + tokens]
        for col in (*cols, "TFLOP/s (of peak)", "compile s", "applied"):
            table.add_column(escape(col), justify="left" if col[0] in "ca" else "right")
        speedup = res["speedup"]
        for v in res["variants"]:
            x = data["variants"][v["name"]]
            ms = {k: v["step_seconds"][k] * 1e3 for k in ("median", "q1", "q3")}
            tf = x["tflops"]["median"] if x["tflops"] else None
            late = x["compile_seconds_warm-up"] + x["compile_seconds_rounds"]
            compiled = x["compile_seconds_prime"] + late
            row = [
                escape(v["name"]),
                escape(spread(ms, ".1f")),
                escape(spread(speedup[v["name"]]) + "×") if v["name"] in speedup else "baseline",
                f"{v['samples_per_s']['median']:,.0f}",
                *([f"{v['tokens_per_s']['median']:,.0f}"] if tokens else []),
                utilization(tf, x["peak_tflops"]),
                (f"{compiled:.1f}" + (f" ({late:.1f} after priming!)" if late else ""))
                if compiled
                else "—",
                escape(", ".join(x["techniques"]) or "; ".join(x["applied"]) or "—"),
            ]
            table.add_row(*row)
        console.print(table)
        for reason in res["noisy"]:
            print(f"  NOISY ({workload}): {reason}")
