"""Analytical training FLOPs per optimizer step for each script of the corpus, checked against
what ``torchpace doctor`` counted (``torch.utils.flop_counter`` plus torchpace's own formulas).

    python benchmarks/script_corpus/flops_formula.py
    python benchmarks/script_corpus/flops_formula.py --json flops.json   # also machine-readable

Each corpus entry (``corpus.json``) gets a hand-written formula for its model family, filled in
with the entry's actual arguments and, where it passes none, the script's own defaults (read from
the pinned sources; each default below says where it comes from). The result is compared with
``flops_per_step`` of the doctor's results (``--results``). Entries without a formula are listed
as "no formula". Standard library only: nothing here imports torch.

Conventions, shared by every formula (the flop counter's too):

* A multiply-add is 2 FLOPs. Only matrix products count (linear layers, recurrent gate products,
  attention's two batched products); element-wise work (biases, activations, norms, softmax,
  losses, the optimizer) is 0, as it is for the counter.
* An embedding is a lookup: 0 FLOPs. A tied output head (nanoGPT's ``lm_head``) is a matmul and
  counts in full.
* A linear layer of ``fan_in x fan_out`` over ``rows`` rows: ``2*rows*fan_in*fan_out`` forward;
  backward is twice that (input gradient + weight gradient), except that a layer whose input is
  data (no ``requires_grad``: node features, regression features, the sine samples) gets only its
  weight gradient, because autograd computes no gradient for that input.
* Attention over ``Tq`` queries and ``Tk`` keys per sequence and block: forward ``2*Tq*Tk*d_qk``
  (QK^T) ``+ 2*Tq*Tk*d_v`` (AV), backward twice that; for ``d_qk = d_v = d`` that is the usual
  ``12*T^2*d`` per layer per sequence. The full ``T^2`` is counted even when a causal mask would
  let half be skipped: the counter does the same (SDPA's formula and explicit masked matmuls
  alike), so a causal-aware count would be lower by half the attention term on both sides.
  These are *model* FLOPs: recomputation inside a kernel is not counted (see nanoGPT below).
* FLOPs per optimizer step = FLOPs per micro-batch x micro-batches per step. Evaluation passes
  are not part of a step (the doctor pauses its counter while one runs under ``no_grad``).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
RESULTS = REPO_ROOT / "benchmarks" / "results" / "2026-11-24-cpu-corpus-doctor.json"

# Vocabulary sizes that depend on the data make_corpus.py wrote (stdlib text of Python 3.11.7),
# as the doctor's runs saw them: nanoGPT and chargpt print theirs ("found vocab_size = 96",
# "96 unique"); the word LM's len(corpus.dictionary) and the Lightning WikiText2 dictionary are
# counted from the same files (``--corpus-dir`` re-checks all four when the data is there).
VOCAB = {
    "nanogpt": 96,  # data/shakespeare_char/meta.pkl vocab_size
    "chargpt": 96,  # len(set(projects/chargpt/input.txt))
    "word_lm": 3815,  # distinct words of data/localtext/{train,valid,test}.txt + "<eos>"
    "lightning": 585,  # distinct words of data/wikitext-2.txt + "<eos>"
}


@dataclass
class Estimate:
    family: str
    formula: str  # the formula, in one line
    micro_batches: int | None  # forward+backward passes per optimizer step
    terms: dict[str, float]  # the formula's parts, per step
    # FLOPs the counter is known to include that are not model FLOPs of the formula
    # (named, per step): they explain a ratio above 1, they are not added to the formula.
    counter_extra: dict[str, float] = field(default_factory=dict)
    note: str = ""

    @property
    def flops(self) -> float:
        """Formula FLOPs per optimizer step: the sum of its parts."""
        return sum(self.terms.values())


# --------------------------------------------------------------------------- building blocks


def linear(rows: float, fan_in: int, fan_out: int, input_grad: bool = True) -> float:
    """Forward + backward FLOPs of one linear layer (2 per multiply-add)."""
    forward = 2 * rows * fan_in * fan_out
    return forward * (3 if input_grad else 2)


def attention(seqs: float, tq: int, tk: int, d_qk: int, d_v: int) -> float:
    """Forward + backward model FLOPs of QK^T and AV over all heads (d = heads x head dim)."""
    forward = 2 * tq * tk * d_qk + 2 * tq * tk * d_v
    return 3 * seqs * forward


def sdpa_recompute(seqs: float, t: int, d: int) -> float:
    """What torch's ``sdpa_backward_flop_count`` adds on top of 2x forward: the flash backward
    recomputes QK^T (5 batched products instead of 4), i.e. ``2*T^2*d`` per sequence and layer."""
    return 2 * seqs * t * t * d


def lstm_layer(steps_x_batch: float, fan_in: int, hidden: int, input_grad: bool = True) -> float:
    """Forward + backward FLOPs of one LSTM layer: at each step the 4 gates' input and hidden
    products, ``2*4H*(I+H)`` per sequence forward; backward twice that (the counter's own
    ``mkldnn_rnn_layer`` formula is the same). Without an input gradient, the input product
    gets only its weight gradient."""
    w_ih = 2 * steps_x_batch * 4 * hidden * fan_in
    w_hh = 2 * steps_x_batch * 4 * hidden * hidden
    return w_ih * (3 if input_grad else 2) + 3 * w_hh


# --------------------------------------------------------------------------- arguments


def parse_cli(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """``--k=v``, ``--k v`` and bare ``--flag`` (True) into {k: v}, keys with "-" -> "_";
    positional arguments separately."""
    opts: dict[str, str] = {}
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--"):
            key, eq, value = arg[2:].partition("=")
            key = key.replace("-", "_")
            if not eq:
                if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                    value = argv[i + 1]
                    i += 1
                else:
                    value = "True"
            opts[key] = value
        else:
            positional.append(arg)
        i += 1
    return opts, positional


def settings(defaults: dict[str, Any], opts: dict[str, str]) -> dict[str, Any]:
    """DEFAULTS overridden by OPTS, each converted to its default's type."""
    out = dict(defaults)
    for key, value in opts.items():
        if key in defaults:
            kind = type(defaults[key])
            out[key] = value.lower() == "true" if kind is bool else kind(value)
    return out


# --------------------------------------------------------------------------- model families


def gpt_decoder(
    *,
    batch: int,
    t: int,
    layers: int,
    d: int,
    vocab: int,
    micro: int,
    ff_mult: int = 4,
    qk_mult: int = 1,
) -> dict[str, float]:
    """Decoder-only transformer, per optimizer step: ``6*N*tokens`` for the matmul weights N
    (per layer QKV + out 4d^2, MLP 2*ff_mult*d^2; the output head d*V) plus attention
    ``(8*qk_mult + 4)*T^2*d`` per layer and sequence (12*T^2*d when d_qk = d)."""
    seqs = batch * micro
    tokens = seqs * t
    per_layer = 4 * d * d + 2 * ff_mult * d * d
    terms = {
        "blocks": linear(tokens, 1, layers * per_layer),
        "lm_head": linear(tokens, d, vocab),
        "attention": layers * attention(seqs, t, t, qk_mult * d, d),
    }
    return terms


def nanogpt(args: list[str]) -> Estimate:
    # train.py defaults, overridden by config/train_shakespeare_char.py (the first argument),
    # then by the command line: configurator.py's order.
    defaults = {"n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024, "batch_size": 12}
    defaults |= {"gradient_accumulation_steps": 40, "dropout": 0.0}
    config = {"n_layer": 6, "n_head": 6, "n_embd": 384, "block_size": 256, "batch_size": 64}
    config |= {"gradient_accumulation_steps": 1, "dropout": 0.2}
    opts, positional = parse_cli(args)
    if positional and positional[0] != "config/train_shakespeare_char.py":
        raise ValueError(f"no defaults known for config file {positional[0]}")
    s = settings(defaults | (config if positional else {}), opts)
    b, t, n, d = s["batch_size"], s["block_size"], s["n_layer"], s["n_embd"]
    micro = s["gradient_accumulation_steps"]  # not divided: one process, no DDP
    terms = gpt_decoder(batch=b, t=t, layers=n, d=d, vocab=VOCAB["nanogpt"], micro=micro)
    # On the CPU, SDPA without dropout runs the flash kernel (counted with its recompute); with
    # dropout it falls back to the math path (plain bmm, 2x forward backward, no recompute).
    flash = s["dropout"] == 0
    extra = {"sdpa_backward_recompute": n * sdpa_recompute(b * micro, t, d)} if flash else {}
    return Estimate(
        "GPT (nanoGPT, tied head, SDPA)",
        "6*(12*L*d^2 + d*V)*B*T*micro + 12*L*T^2*d*B*micro",
        micro,
        terms,
        extra,
        (
            f"L={n} d={d} T={t} B={b} micro={micro} V={VOCAB['nanogpt']}, no biases. "
            "Attention is F.scaled_dot_product_attention; with dropout 0 the CPU flash kernel "
            "runs, whose backward the counter counts as 5 batched products (QK^T "
            "recomputed), not 4: +2*T^2*d per layer and sequence"
        ),
    )


def mingpt(args: list[str], project: str) -> Estimate:
    """minGPT's GPT: untied lm_head, attention as explicit q@k^T and att@v matmuls."""
    types = {"gpt-nano": (3, 3, 48), "gpt-micro": (4, 4, 128), "gpt-mini": (6, 6, 192)}
    opts, _ = parse_cli(args)
    if project == "chargpt":  # chargpt.py get_config(): gpt-mini, block 128; Trainer: batch 64
        defaults = {"model.model_type": "gpt-mini", "data.block_size": 128}
        defaults |= {"trainer.batch_size": 64}
        s = settings(defaults, opts)
        t, vocab = s["data.block_size"], VOCAB["chargpt"]
    else:  # adder.py: gpt-nano, ndigit 2 -> block 3*ndigit+1-1, vocab 10 digits; batch 64
        defaults = {"model.model_type": "gpt-nano", "data.ndigit": 2, "trainer.batch_size": 64}
        s = settings(defaults, opts)
        t, vocab = 3 * s["data.ndigit"], 10
    n, _heads, d = types[s["model.model_type"]]
    b = s["trainer.batch_size"]
    terms = gpt_decoder(batch=b, t=t, layers=n, d=d, vocab=vocab, micro=1)
    return Estimate(
        "GPT (minGPT, untied head, matmul attention)",
        "6*(12*L*d^2 + d*V)*B*T + 12*L*T^2*d*B",
        1,
        terms,
        {},
        f"{s['model.model_type']}: L={n} d={d} T={t} B={b} V={vocab}",
    )


def x_transformers(args: list[str]) -> Estimate:
    """train_enwik8.py: TransformerWrapper(num_tokens=256, Decoder(dim=512, depth=6, heads=8,
    polar_pos_emb=True, pre_and_post_norm=True)), head dim 64, FeedForward mult 4 (GELU, not
    GLU), untied to_logits. AutoregressiveWrapper feeds all seq_len + 1 tokens of a sample
    through the net and drops the last logit, so T = seq_len + 1. Polar positional embedding
    (PoPE) turns q and k into cat(t*cos, t*sin): QK^T runs over 2*64 per head, AV over 64."""
    defaults = {"batch_size": 4, "gradient_accumulate_every": 4, "seq_len": 1024}
    s = settings(defaults, parse_cli(args)[0])
    b, micro, t = s["batch_size"], s["gradient_accumulate_every"], s["seq_len"] + 1
    layers, d, vocab = 6, 512, 256
    terms = gpt_decoder(batch=b, t=t, layers=layers, d=d, vocab=vocab, micro=micro, qk_mult=2)
    return Estimate(
        "GPT (x-transformers, PoPE)",
        "6*(12*L*d^2 + d*V)*B*T*micro + 18*L*T^2*d*B*micro, T = seq_len+1",
        micro,
        terms,
        {},
        f"L={layers} d={d} T={t} (seq_len+1) B={b} micro={micro} V={vocab}; PoPE doubles d_qk",
    )


def lightning_transformer(args: list[str]) -> Estimate:
    """lightning.pytorch.demos.Transformer (both Lightning entries, no arguments): nn.Transformer
    with d_model 200, 2 heads, feed-forward 200, 2 encoder + 2 decoder layers, batch_first; the
    decoder input is the target sequence; output Linear(200, V). WikiText2 block_size 35,
    DataLoader batch 20. Encoder layer: self-attention (4d^2) + FFN (2*d*ff); decoder layer:
    self- and cross-attention (8d^2) + FFN; 6 attention blocks of 35 x 35 in all."""
    if args:
        raise ValueError("the Lightning examples take no arguments")
    b, t, d, ff, enc, dec, vocab = 20, 35, 200, 200, 2, 2, VOCAB["lightning"]
    tokens = b * t  # source and target sequences have the same length
    terms = {
        "encoder": linear(tokens, 1, enc * (4 * d * d + 2 * d * ff)),
        "decoder": linear(tokens, 1, dec * (8 * d * d + 2 * d * ff)),
        "output": linear(tokens, d, vocab),
        "attention": (enc + 2 * dec) * attention(b, t, t, d, d),
    }
    return Estimate(
        "Transformer enc-dec (nn.Transformer)",
        "6*(Le*(4d^2+2*d*ff) + Ld*(8d^2+2*d*ff) + d*V)*B*T + 12*(Le+2*Ld)*T^2*d*B",
        1,
        terms,
        {},
        (
            f"Le=Ld=2 d={d} ff={ff} T={t} B={b} V={vocab}; attention dropout 0.2 in training "
            "sends SDPA down the math path (plain bmm: no flash recompute)"
        ),
    )


def word_lm(args: list[str]) -> Estimate:
    """word_language_model/main.py defaults: LSTM, emsize 200, nhid 200, 2 layers, bptt 35,
    batch 20, untied decoder Linear(nhid, V). The embedding's output needs a gradient (the
    embedding is trained), so every LSTM layer has an input gradient."""
    defaults = {"model": "LSTM", "emsize": 200, "nhid": 200, "nlayers": 2, "bptt": 35}
    defaults |= {"batch_size": 20, "tied": False}
    s = settings(defaults, parse_cli(args)[0])
    if s["model"] != "LSTM":
        raise ValueError(f"no formula for --model {s['model']}")
    rows = s["bptt"] * s["batch_size"]
    h, vocab = s["nhid"], VOCAB["word_lm"]
    terms = {
        f"lstm{i}": lstm_layer(rows, s["emsize"] if i == 0 else h, h) for i in range(s["nlayers"])
    }
    terms["decoder"] = linear(rows, h, vocab)
    return Estimate(
        "LSTM LM (nn.LSTM)",
        "3*sum_l 2*4H*(I_l+H)*T*B + 6*H*V*T*B",
        1,
        terms,
        {},
        f"L={s['nlayers']} I=H={h} T={s['bptt']} B={s['batch_size']} V={vocab}; manual update",
    )


def time_sequence(args: list[str]) -> Estimate:
    """time_sequence_prediction/train.py: LSTMCell(1, 51) -> LSTMCell(51, 51) -> Linear(51, 1),
    float64, over the 97 training sequences x 999 steps (generate_sine_wave.py: N=100, L=1000;
    rows 3: and columns :-1). One LBFGS step (lr 0.8, max_iter 20) evaluates the closure
    (forward + backward) 1 + 19 = 20 times unless its tolerances stop it early, so the formula
    is an upper bound. lstm1's input is data: its 1-wide input product gets only a weight
    gradient. Ignored: at step 0 the hidden states are zeros without gradients (-0.02%)."""
    steps = int(parse_cli(args)[0].get("steps", 15))
    rows, h, evals = 97 * 999, 51, 20
    terms = {
        "lstm1": lstm_layer(rows, 1, h, input_grad=False),
        "lstm2": lstm_layer(rows, h, h),
        "linear": linear(rows, h, 1),
    }
    return Estimate(
        "LSTMCell regression (LBFGS)",
        "20 closures x (72*H^2 + 22*H)*T*N  (lstm1's 1-wide input is data: no input grad)",
        evals,
        {k: evals * v for k, v in terms.items()},
        {},
        (
            f"H={h} T=999 N=97; 20 closure evaluations per LBFGS step, at most (the corpus "
            f"run's log shows 20 losses for each of its {steps} steps)"
        ),
    )


def regression(args: list[str]) -> Estimate:
    """regression/main.py: Linear(4, 1) on batches of 32 (POLY_DEGREE 4, get_batch(32)); the
    features are data, so the backward pass is the weight gradient only."""
    b, fan_in = 32, 4
    terms = {"fc": linear(b, fan_in, 1, input_grad=False)}
    extra = {"target_f(x)=x.mm(W_target)": 2 * b * fan_in * 1}
    return Estimate(
        "Linear regression",
        "2*B*in*out (forward) + 2*B*in*out (weight gradient)",
        1,
        terms,
        extra,
        (
            "B=32 in=4 out=1; the step also computes its targets with x.mm(W_target) in "
            "get_batch, a 32x4x1 product the counter sees (not a model FLOP)"
        ),
    )


def gat(args: list[str]) -> Estimate:
    """gat/main.py: 2 GraphAttentionLayers on the whole graph (N nodes, dense N x N attention).
    Layer 1: h @ W (F x heads*n_hidden, input = node features: weight gradient only), scores
    (heads, N, n_hidden) @ a (two n_hidden x 1 products), attention (heads, N, N) @ (heads, N,
    n_hidden). Layer 2: one head, n_hidden -> classes. --concat-heads off (default): layer 1's
    heads are averaged, each n_hidden = hidden_dim wide. Graph from make_corpus.py: 2000 nodes,
    1433 features, 7 classes."""
    defaults = {"hidden_dim": 64, "num_heads": 8, "concat_heads": False}
    s = settings(defaults, parse_cli(args)[0])
    n, feats, classes = 2000, 1433, 7
    heads, hid = s["num_heads"], s["hidden_dim"]
    n_hidden = hid // heads if s["concat_heads"] else hid
    layer2_in = hid if s["concat_heads"] else n_hidden

    def layer(fan_in: int, h: int, width: int, input_grad: bool) -> dict[str, float]:
        return {
            "projection": linear(n, fan_in, h * width, input_grad),
            "scores": 2 * linear(h * n, width, 1),
            "aggregate": linear(h * n, n, width),  # (h, N, N) @ (h, N, width)
        }

    l1 = layer(feats, heads, n_hidden, input_grad=False)
    l2 = layer(layer2_in, 1, classes, input_grad=True)
    terms = {f"gat1.{k}": v for k, v in l1.items()} | {f"gat2.{k}": v for k, v in l2.items()}
    return Estimate(
        "GAT (dense attention)",
        "4*N*F*H*h + 12*H*N*h + 6*H*N^2*h + 6*N*h2*C + 12*N*C + 6*N^2*C  (h2 = h averaged)",
        1,
        terms,
        {},
        f"N={n} F={feats} heads={heads} n_hidden={n_hidden} C={classes}; full batch",
    )


def vae(args: list[str]) -> Estimate:
    """vae/main.py: an MLP VAE on MNIST, batches of 128 (its default --batch-size): fc1 784->400,
    fc21 and fc22 400->20 (mean and log-variance), fc3 20->400, fc4 400->784. fc1's input is
    the data, so it gets its weight gradient only; the reparameterisation and the loss are
    elementwise (no FLOPs in the counter's convention)."""
    b = int(settings({"batch_size": 128}, parse_cli(args)[0])["batch_size"])
    terms = {
        "fc1": linear(b, 784, 400, input_grad=False),
        "fc21": linear(b, 400, 20),
        "fc22": linear(b, 400, 20),
        "fc3": linear(b, 20, 400),
        "fc4": linear(b, 400, 784),
    }
    return Estimate(
        "VAE (MLP)",
        "2*B*(784*400*2 + 3*(2*400*20 + 20*400 + 400*784))  (fc1: weight gradient only)",
        1,
        terms,
        {},
        f"B={b}; 784-400-(20,20)-400-784",
    )


FORMULAS = {
    "nanogpt-shakespeare-char": nanogpt,
    "nanogpt-shakespeare-char-compile": nanogpt,
    "vae-mnist": vae,
    "word-language-model": word_lm,
    "time-sequence-prediction": time_sequence,
    "regression": regression,
    "gat-cora": gat,
    "mingpt-chargpt": lambda a: mingpt(a, "chargpt"),
    "mingpt-adder": lambda a: mingpt(a, "adder"),
    "lightning-transformer": lightning_transformer,
    "fabric-language-model": lightning_transformer,
    "x-transformers-enwik8": x_transformers,
}

# Why the doctor has no count for an entry (a run too short to reach its probe step).
NO_COUNT = {
    "time-sequence-prediction": "2 optimizer steps: fewer than warm-up (3) + probe step",
}


# --------------------------------------------------------------------------- data cross-check


def _words(*paths: Path) -> int:
    words = {"<eos>"}
    for path in paths:
        for line in path.read_text(encoding="utf8").splitlines():
            words.update(line.split())
    return len(words)


def vocab_from_data(corpus_dir: Path) -> dict[str, int]:
    """The four data-dependent vocabularies, from make_corpus.py's files where present."""
    found: dict[str, int] = {}
    meta = corpus_dir / "karpathy+nanoGPT/data/shakespeare_char/meta.pkl"
    if meta.is_file():
        with open(meta, "rb") as fh:  # our own file, written by make_corpus.py
            found["nanogpt"] = int(pickle.load(fh)["vocab_size"])
    text = corpus_dir / "karpathy+minGPT/projects/chargpt/input.txt"
    if text.is_file():
        found["chargpt"] = len(set(text.read_text(encoding="ascii")))
    local = corpus_dir / "pytorch+examples/word_language_model/data/localtext"
    if all((local / f"{s}.txt").is_file() for s in ("train", "valid", "test")):
        found["word_lm"] = _words(*(local / f"{s}.txt" for s in ("train", "valid", "test")))
    wiki = corpus_dir / "Lightning-AI+pytorch-lightning/examples/pytorch/basics/data"
    if (wiki / "wikitext-2.txt").is_file():
        found["lightning"] = _words(wiki / "wikitext-2.txt")
    return found


# --------------------------------------------------------------------------- report


def g(flops: float | None) -> str:
    return "n/a" if flops is None else f"{flops / 1e9:.4g}"


def compare(corpus: list[dict[str, Any]], results: dict[str, Any]) -> list[dict[str, Any]]:
    counted = {s["name"]: s for s in results.get("scripts", [])}
    rows = []
    for entry in corpus:
        name = entry["name"]
        make = FORMULAS.get(name)
        if make is None:
            rows.append({"name": name, "family": None, "note": "no formula"})
            continue
        est = make(entry.get("args", []))
        doc = counted.get(name, {})
        got = doc.get("flops_per_step")
        extra = sum(est.counter_extra.values())
        row = {"name": name, **asdict(est), "flops": est.flops, "counted": got}
        row["doctor_micro"] = doc.get("micro_steps")
        row["ratio"] = got / est.flops if got else None
        row["ratio_with_extra"] = got / (est.flops + extra) if got and extra else None
        if got is None:
            row["note"] = f"{est.note}. Not counted: {NO_COUNT.get(name, 'no doctor result')}"
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'entry':26} {'model family':44} {'micro':>7} {'formula':>10} {'counted':>10} "
        f"{'ratio':>7} {'explained':>9}"
    )
    print("GFLOP per optimizer step; ratio = counted/formula; explained = counted/(formula +")
    print("FLOPs the counter is known to add beyond the formula); micro = formula/doctor\n")
    print(head)
    print("-" * len(head))
    for r in rows:
        if r["family"] is None:
            print(f"{r['name']:26} no formula")
            continue
        doctor_micro = f"{r['doctor_micro']:g}" if r["doctor_micro"] else "-"
        micro = f"{r['micro_batches']}/{doctor_micro}"
        ratio = f"{r['ratio']:.4f}" if r["ratio"] else "n/a"
        expl = f"{r['ratio_with_extra']:.4f}" if r["ratio_with_extra"] else ""
        print(
            f"{r['name']:26} {r['family']:44} {micro:>7} {g(r['flops']):>10} "
            f"{g(r['counted']):>10} {ratio:>7} {expl:>9}"
        )
    print()
    for r in rows:
        if r["family"] is None:
            continue
        print(f"{r['name']}: {r['formula']}")
        print(f"    {r['note']}")
        for what, flops in r["counter_extra"].items():
            print(f"    counter also counts {what}: {flops:.6g} FLOPs per step")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--corpus", type=Path, default=HERE / "corpus.json")
    ap.add_argument("--results", type=Path, default=RESULTS, help="doctor_corpus.py --json output")
    ap.add_argument(
        "--corpus-dir",
        type=Path,
        default=REPO_ROOT / ".corpus" / "scripts",
        help="make_corpus.py's output, to re-check the data-dependent vocabularies (if there)",
    )
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)

    corpus = json.loads(args.corpus.read_text())
    results = json.loads(args.results.read_text())
    rows = compare(corpus, results)
    print_table(rows)

    found = vocab_from_data(args.corpus_dir)
    for key, value in found.items():
        if value != VOCAB[key]:
            print(
                f"\nwarning: {args.corpus_dir} gives {key} vocabulary {value}, the recorded "
                f"{VOCAB[key]} (the doctor's run) is used"
            )
    if found and all(found[k] == VOCAB[k] for k in found):
        print(f"\nvocabularies re-checked against {args.corpus_dir}: {', '.join(sorted(found))}")

    if args.json:
        out = {"results": str(args.results), "vocab": VOCAB, "rows": rows}
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
