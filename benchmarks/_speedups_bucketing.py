"""speedups.py's ``bucketing`` part: on seqcls, ``LengthBucketBatchSampler`` and
``TokenBudgetBatchSampler`` against the recipe's shuffled DataLoader, the naive step on each
sampler's batches: the share of useful tokens, and useful tokens per second."""

from __future__ import annotations

from typing import Any

import torch
from _speedups_common import SEED, goal_line, other_load, spread
from _speedups_verbs import build_variant, stepper
from _steptimer import CompileWatch, step_flops
from torch.utils.data import DataLoader

from torchpace.measure.noise import verdict
from torchpace.measure.paired import compare
from torchpace.measure.stats import summarize
from torchpace.speedups import LengthBucketBatchSampler, TokenBudgetBatchSampler, padding_stats
from torchpace.workloads import load

# 2x useful tokens/s: the goal for length bucketing and token budgets on seqcls (the speed-ups
# issue), against random batches padded to their longest member.
GOAL_BUCKETING = 2.0
MAX_TOKENS_STEP = 64  # candidates for the token budget: multiples of 64 tokens from the longest


def choose_max_tokens(lengths: torch.Tensor, batch_size: int) -> tuple[int, float]:
    """The token budget whose epoch-0 mean batch size is closest to ``batch_size``: candidates
    are multiples of MAX_TOKENS_STEP from the longest sequence up (a budget below it is
    rejected); the mean batch grows with the budget, so the search stops once it passes."""
    n, longest = len(lengths), int(lengths.max())
    best: tuple[int, float] | None = None
    budget = -(-longest // MAX_TOKENS_STEP) * MAX_TOKENS_STEP
    while budget <= longest * batch_size:
        mean = n / len(TokenBudgetBatchSampler(lengths, budget, seed=SEED))
        if best is None or abs(mean - batch_size) < abs(best[1] - batch_size):
            best = (budget, mean)
        if mean >= batch_size:
            break
        budget += MAX_TOKENS_STEP
    assert best is not None
    return best


def take_batches(sampler: Any, n: int) -> tuple[list[list[int]], list[list[int]]]:
    """Epoch 0's batches (index lists), and the first ``n`` batches, from epoch 0 on (later
    epochs via ``set_epoch``, or, for a shuffling BatchSampler, its generator's next draw)."""
    epoch0 = [list(b) for b in sampler]
    out, epoch = epoch0[:n], 1
    while len(out) < n:
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        out += [list(b) for b in sampler][: n - len(out)]
        epoch += 1
    return epoch0, out


def bucketing_part(
    rounds: int, steps: int, warmup: int, dev: torch.device, env: dict[str, Any]
) -> dict[str, Any]:
    recipe = load("seqcls")
    data = recipe.dataset("train", seed=SEED)
    lengths, bs = data.lengths, recipe.batch_size
    max_tokens, mean_batch = choose_max_tokens(lengths, bs)
    loader = DataLoader(  # the recipe's loader, as torchpace fit builds it
        data,
        batch_size=bs,
        shuffle=True,
        drop_last=True,
        collate_fn=recipe.collate,
        generator=torch.Generator().manual_seed(SEED),
    )
    samplers: dict[str, Any] = {
        "random": loader.batch_sampler,
        "length-bucket": LengthBucketBatchSampler(lengths, bs, seed=SEED),
        "token-budget": TokenBudgetBatchSampler(lengths, max_tokens, seed=SEED),
    }
    block = max(1, steps // rounds)
    n = warmup + rounds * block
    variants, info = [], {}
    for name, sampler in samplers.items():
        epoch0, indices = take_batches(sampler, n)
        batches = [recipe.collate([data[i] for i in idx]) for idx in indices]
        run, _ = build_variant("seqcls", dev)  # the naive step: only the batches differ
        variants.append(stepper(name, run, batches, CompileWatch(), warmup))
        pad, pad_timed = padding_stats(epoch0, lengths), padding_stats(indices[warmup:], lengths)
        info[name] = {
            "batches_per_epoch": len(epoch0),
            "mean_batch_size": len(lengths) / len(epoch0),
            "useful_fraction_epoch": pad.useful_fraction,
            "useful_tokens_epoch": pad.useful_tokens,
            "padded_tokens_epoch": pad.padded_tokens,
            "useful_fraction_timed": pad_timed.useful_fraction,
            "real_tokens_per_step": [int(lengths[idx].sum()) for idx in indices],
            "flops_per_step": [step_flops("seqcls", b) for b in batches],
        }
    res = compare(variants, rounds=rounds, block=block, warmup=warmup, device=dev)
    rates = {}
    for v in res.variants:
        x = info[v.name]
        toks, secs = x["real_tokens_per_step"], v.block_seconds
        rates[v.name] = [
            sum(toks[warmup + r * block : warmup + (r + 1) * block]) / s for r, s in enumerate(secs)
        ]
        x["useful_tokens_per_s"] = summarize(rates[v.name]).to_dict()
        x["useful_tokens_per_s_overall"] = sum(toks[warmup:]) / sum(secs)
        x["tflops_overall"] = sum(x.pop("flops_per_step")[warmup:]) / sum(secs) / 1e12
    base = res.variants[0].name
    for v in res.variants[1:]:
        ratios = [a / b for a, b in zip(rates[v.name], rates[base], strict=True)]
        s = summarize(ratios)
        overall = info[v.name]["useful_tokens_per_s_overall"]
        info[v.name].update(
            ratio=s.to_dict(),
            ratio_overall=overall / info[base]["useful_tokens_per_s_overall"],
            rounds_above_goal=sum(x >= GOAL_BUCKETING for x in ratios),
            noisy=verdict(s.rel_iqr, res.foreign_cores),
        )
    paired = res.to_dict()
    paired.pop("speedup")  # time per step over different batches: not a comparable figure
    paired.pop("noisy")  # judged on the speedup above; the useful-token ratios' is per sampler
    return {
        "compared_over": f"the same number of steps ({block} per round per sampler); "
        "throughput as useful (unpadded) tokens per second",
        "batch_size": bs,
        "max_tokens": max_tokens,
        "max_tokens_how": f"the multiple of {MAX_TOKENS_STEP} from the longest sequence "
        f"({int(lengths.max())}) with the epoch-0 mean batch closest to {bs} ({mean_batch:.1f})",
        "configuration": "the naive step (recipe Adam, set_to_none=False, loss.item() every "
        "step), fp32, batches pre-collated",
        "paired": paired,
        "samplers": info,
    }


def report_bucketing(part: dict[str, Any]) -> list[str]:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    res = part["paired"]
    table = Table(
        title="seqcls batching: useful tokens per second, in one process",
        caption=escape(
            f"median [q1–q3] over {res['rounds']} interleaved rounds of {res['block']} steps per "
            f"sampler after {res['warmup']} warm-up steps; {part['configuration']}; same initial "
            "weights, different batches by construction; random: the recipe's shuffled "
            f"DataLoader, batches of {part['batch_size']} padded to their longest; useful "
            "tokens: padding_stats over epoch 0 (over the timed batches); × overall: summed "
            f"over all rounds; max_tokens: {part['max_tokens_how']}; other load {other_load(res)}"
        ),
    )
    cols = ("batching", "batches/epoch", "mean batch", "useful tokens", "ms/step", "samples/s")
    for col in (*cols, "useful tok/s", "× random", "× overall", "TFLOP/s"):
        table.add_column(escape(col), justify="left" if col == "batching" else "right")
    verdicts = []
    for v in res["variants"]:
        x = part["samplers"][v["name"]]
        name = v["name"] + (f" ({part['max_tokens']})" if v["name"] == "token-budget" else "")
        table.add_row(
            escape(name),
            f"{x['batches_per_epoch']}",
            f"{x['mean_batch_size']:.1f}",
            f"{x['useful_fraction_epoch']:.1%} ({x['useful_fraction_timed']:.1%})",
            f"{v['step_seconds']['median'] * 1e3:.1f}",
            f"{v['samples_per_s']['median']:,.0f}",
            f"{x['useful_tokens_per_s']['median']:,.0f}",
            escape(spread(x["ratio"]) + "×") if "ratio" in x else "baseline",
            f"{x['ratio_overall']:.2f}×" if "ratio" in x else "",
            f"{x['tflops_overall']:.3f}",
        )
        if "ratio" in x:
            what = f"bucketing, {name} against random batches (useful tokens/s)"
            verdicts.append(
                goal_line(what, x["ratio"], GOAL_BUCKETING, x["rounds_above_goal"], res["rounds"])
            )
    Console(width=150).print(table)
    for v in res["variants"]:
        for reason in part["samplers"][v["name"]].get("noisy", []):
            print(f"  NOISY ({v['name']}): {reason}")
    return verdicts
