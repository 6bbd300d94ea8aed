"""Which techniques a tune tries on a recipe, and why the others do not apply.

The recipe is built once in this process (seeded, no step taken) and inspected: convolutions,
attention layers, the optimizer's class, the dataset's lengths, the device's bf16. Each
candidate is a change to the ``Plan`` with the catalogue ids it tries; ``PRIORITY``, each
technique's ``Trial`` order in ``torchpace.techniques`` (by the gain measured on this project's
CPU and the guides' emphasis), runs the most valuable trials first when the budget is short.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from torchpace.catalog import fused_on, trial_workers
from torchpace.findings import DoctorFinding
from torchpace.measure.env import bf16_supported
from torchpace.speedups.bucketed_loader import length_quantiles
from torchpace.techniques import trial_order
from torchpace.train.build import build


@dataclass(frozen=True)
class Candidate:
    name: str
    changes: dict[str, Any]  # Plan fields
    techniques: tuple[str, ...]
    needs: tuple[str, ...] = field(default=())  # names of candidates it only makes sense with


@dataclass(frozen=True)
class NotApplicable:
    name: str
    techniques: tuple[str, ...]
    reason: str


# The tune's order: each technique's Trial facet (torchpace.techniques), cheap likely gains first.
PRIORITY = trial_order()
_RANK = {tid: i for i, tid in enumerate(PRIORITY)}


def priority(cand: Candidate) -> int:
    """Where ``cand`` stands in PRIORITY: by the latest of its techniques; one of none of them
    (loader workers, set_to_none: offered by the script's facts alone) after all."""
    return max((_RANK.get(t, len(_RANK)) for t in cand.techniques), default=len(_RANK))


def uses_attention(module: nn.Module) -> bool:
    """A torch attention layer, or a forward whose source calls scaled_dot_product_attention."""
    if isinstance(module, (nn.MultiheadAttention, nn.TransformerEncoderLayer)):
        return True
    try:
        source = inspect.getsource(type(module).forward)
    except (OSError, TypeError):  # built in, or defined where its source is not kept
        return False
    return "scaled_dot_product_attention" in source


def candidates(recipe: Any, device: torch.device) -> tuple[list[Candidate], list[NotApplicable]]:
    model, opt, loader = build(recipe, seed=0)  # checks each factory's type, naming it
    modules = list(model.modules())
    facts = {
        "has_conv": any(isinstance(m, nn.Conv2d) for m in modules),
        "has_conv_bias": any(
            isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)) and m.bias is not None for m in modules
        ),
        "has_attention": any(uses_attention(m) for m in modules),
        "optimizers": [type(opt).__name__],
    }
    lengths = getattr(loader.dataset, "lengths", None)
    return from_facts(
        facts, device, lengths=length_quantiles(lengths), batch_size=recipe.batch_size
    )


def from_facts(
    facts: dict[str, Any],
    device: torch.device,
    *,
    lengths: tuple[int, int] | None = None,
    batch_size: int | None = None,
) -> tuple[list[Candidate], list[NotApplicable]]:
    """The candidates for a run whose models and optimizers ``facts`` describe (``has_conv``,
    ``has_conv_bias``, ``has_attention``, ``optimizers``: class names), ordered by PRIORITY.
    ``lengths``: the training data's 90th-percentile and longest sample length, where its
    dataset has per-sample ``lengths`` (:func:`length_quantiles`)."""
    has_conv = bool(facts.get("has_conv"))
    has_conv_bias = bool(facts.get("has_conv_bias"))
    has_attention = bool(facts.get("has_attention"))
    optimizers = list(facts.get("optimizers", []))
    yes: list[Candidate] = []
    no: list[NotApplicable] = []

    def offer(ok: bool, cand: Candidate, reason: str) -> None:
        if ok:
            yes.append(cand)
        else:
            no.append(NotApplicable(cand.name, cand.techniques, reason))

    bf16 = bf16_supported(device)
    offer(
        bf16, Candidate("bf16", {"amp": "bf16"}, ("amp-bf16",)), f"{device.type} has no native bf16"
    )
    offer(
        device.type == "cuda",
        Candidate("fp16", {"amp": "fp16"}, ("amp-fp16",)),
        "fp16 autocast pays off on CUDA only",
    )
    offer(
        bf16 and has_attention,
        Candidate(
            "bf16 + math attention",
            {"amp": "bf16", "attention": "math"},
            ("amp-bf16", "attention-backend"),
        ),
        "no attention layers" if bf16 else f"{device.type} has no native bf16",
    )
    offer(
        has_conv,
        Candidate("channels-last", {"channels_last": True}, ("channels-last",)),
        "the model has no Conv2d",
    )
    offer(
        has_conv_bias,
        Candidate("fold conv bias", {"fold_conv_bias": True}, ("conv-bias-before-bn",)),
        "no convolution has a bias",
    )
    fusable = bool(optimizers) and all(fused_on(name, device.type) for name in optimizers)
    offer(
        fusable,
        Candidate("fused optimizer", {"fused_optimizer": True}, ("fused-optimizer",)),
        f"{', '.join(optimizers) or 'no optimizer'}: no fused kernel on {device.type}",
    )
    offer(
        device.type == "cuda" or bf16,
        Candidate("fast math", {"fast_math": True}, ("tf32",)),
        "no faster float32 matmul on this CPU",
    )
    offer(
        lengths is not None,
        Candidate("length-bucket", {"batching": "length-bucket"}, ("length-bucketing",)),
        "the dataset has no `lengths`",
    )
    if lengths is not None and batch_size:
        # The token budget of a batch of the recipe's size at the 90th-percentile length: most
        # batches hold about as many samples as the recipe's, the long ones fewer.
        p90, longest = lengths
        budget = max(longest, batch_size * p90)
        yes.append(
            Candidate(
                "token budget",
                {"batching": "token-budget", "max_tokens": budget},
                ("length-bucketing",),
            )
        )
    offer(True, Candidate("compile", {"compile": "default"}, ("torch-compile",)), "")
    yes.sort(key=priority)
    return yes, no


def for_script(
    base: Any, device: torch.device, findings: Sequence[DoctorFinding]
) -> tuple[list[Candidate], list[NotApplicable]]:
    """The candidates for a script, from what its baseline trial saw (``extra["facts"]``: its
    models, optimizers and DataLoaders), ordered by the doctor's ``findings`` for it: techniques
    it measured a gain for first, by that gain, then PRIORITY."""
    from torchpace.measure.cores import usable_cores

    facts = dict(base.extra.get("facts", {}))
    train = [x for x in facts.get("loaders", []) if x.get("shuffled") and x.get("batch_size")]
    bucketable = train[0] if train and "length_p90" in train[0] else None
    cands, no = from_facts(
        facts,
        device,
        lengths=None
        if bucketable is None
        else (int(bucketable["length_p90"]), int(bucketable["length_max"])),
        batch_size=None if bucketable is None else int(bucketable["batch_size"]),
    )
    hand = next((f for f in findings if f.technique == "sdpa-attention"), None)
    if hand is not None:
        # Attention written by hand has no backend to choose: say so, and where (issue 32: the
        # tune said "no attention layers" of a GPT with hand-written attention).
        where = f"{Path(hand.path or '').name}:{hand.line or '?'}"
        no = [
            NotApplicable(
                n.name,
                n.techniques,
                f"the attention is written by hand ({where}, lint TP307): rewrite it with "
                "F.scaled_dot_product_attention, and the backend can be chosen",
            )
            if "attention-backend" in n.techniques and n.reason == "no attention layers"
            else n
            for n in no
        ]
    if facts.get("own_autocast"):
        amp = [c for c in cands if "amp" in c.changes]
        cands = [c for c in cands if "amp" not in c.changes]
        no += [NotApplicable(c.name, c.techniques, "the script runs its own autocast") for c in amp]
    # The training loader is the shuffled one; a script whose loaders shuffle nothing (a
    # sequential or pre-shuffled dataset, the doctor's planted sleeping dataset) may still train
    # from one, and workers on an evaluation loader only cost a trial.
    every = [x for x in facts.get("loaders", []) if x.get("batch_size")]
    loaders = [x for x in every if x.get("shuffled")] or every
    # The workers the doctor found fastest from the dataset's measured pace (a dataset that
    # waits on I/O wants more than the cores: io_images ran 1.19x with one worker on 2 cores,
    # 2.3x with two); else the catalogue's trial count.
    workers = _measured_workers(findings) or trial_workers(usable_cores())
    name, techniques = "loader workers", ("loader-workers",)
    if not loaders:
        no.append(NotApplicable(name, techniques, "no DataLoader with a batch size was built"))
    elif all(x.get("iterable") for x in loaders):
        no.append(NotApplicable(name, techniques, "the training loader is an IterableDataset"))
    elif any(x.get("num_workers") for x in loaders):
        no.append(NotApplicable(name, techniques, "the script's loader already has workers"))
    else:
        cands.append(Candidate(name, {"loader": "auto", "loader_workers": workers}, techniques))
    named = {f.technique for f in findings}
    sto = Candidate("set_to_none", {"grad_set_to_none": True}, ("grad-set-to-none",))
    if "grad-set-to-none" in named:
        cands.append(sto)
    else:
        no.append(NotApplicable(sto.name, sto.techniques, "no zero_grad(set_to_none=False) found"))
    return order_by_findings(cands, findings), no


def _measured_workers(findings: Sequence[DoctorFinding]) -> int | None:
    """The loader workers the doctor's input-bound finding measured fastest, if it measured
    the dataset's pace by worker count."""
    for f in findings:
        n = f.measured.get("workers")
        paced = f.measured.get("basis") == "measured worker pace"
        if f.technique == "loader-workers" and paced and isinstance(n, int) and n > 0:
            return n
    return None


def order_by_findings(cands: list[Candidate], findings: Sequence[DoctorFinding]) -> list[Candidate]:
    """Candidates a finding measured a gain for first (largest gain first), then the rest in
    their order (stable)."""
    gain: dict[str, float] = {}
    for f in findings:
        if f.gain is not None:
            gain[f.technique] = max(gain.get(f.technique, 0.0), float(f.gain))
    return sorted(cands, key=lambda c: -max((gain.get(t, 0.0) for t in c.techniques), default=0))
