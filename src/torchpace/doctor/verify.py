"""``torchpace doctor --verify``: the estimated gains put to the test on the script itself.

For the top findings that a plan can apply, the tune's script trials run the unmodified script
in fresh processes with and without each change (``torchpace.tune.search``: the same baseline
seeds, convergence guard, cache and paired confirmation as ``torchpace tune``), and each finding
gets the speed-up measured alone next to the one its gain promised (a gain ``g``, a share of the
step recovered, promises ``1 / (1 - g)``). A finding whose change measured no faster than the
script as written, or below the tune's "worth it" line (``MIN_GAIN``), or failed the guard, is
demoted below every estimated one and says so: on a 2-core CPU the doctor's "loader workers,
53-62%" for a VAE made its steps slower. One the plan could not make here ("not applicable":
nothing was measured) keeps its estimate and its place.

A finding is judged only when its trials say the machine held still, or that its moving could
not change the verdict (``tune.noise.trials_noise``): beside another heavy job a VAE's fused
optimizer measured 0.34x against the first baseline and 1.14x against the second, whose median
step was 3.4x the first's. Then the verdict is "noisy: not judged" with the reasons, and the
finding keeps its estimate and its place. Like the tune, the speed-up is against the baselines
run just before and just after the change's trial (seed 0, its seed: the same batches in a
script that does not seed itself), their geometric mean; ``speedup_second_baseline`` is the one
against the baseline after it.

The trials share the tune's cache for this script and arguments, so a later ``torchpace tune``
of the same run reuses them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchpace.findings import DoctorFinding, Verified
from torchpace.tune.noise import not_judged, trials_noise
from torchpace.tune.search import MIN_GAIN, Pair

if TYPE_CHECKING:
    from torchpace.report.tune_table import Row
    from torchpace.tune.trial import TrialResult

# 3: the top findings a verification tries, the doctor's terminal shows ten. Each costs two
# trials (its own and the baseline run after it), a few minutes on a 2-core CPU.
TOP = 3


_FAILED = ("rejected", "failed", "not applicable")  # table verdicts of a change that did not run


def _promised(gain: float) -> float | None:
    """The speed-up a gain promises; None for a whole step, which promises no finite one."""
    return 1.0 / (1.0 - gain) if gain < 1.0 else None


def candidates_to_verify(findings: Sequence[DoctorFinding], top: int = TOP) -> list[str]:
    """The techniques of the first ``top`` findings with an estimated gain that a plan applies."""
    out: list[str] = []
    for f in findings:
        t = f.technique
        if f.gain is None or not f.applies.tune or t in out:
            continue
        out.append(t)
        if len(out) == top:
            break
    return out


def annotate(
    findings: list[DoctorFinding],
    rows: Sequence[Row],
    tried: list[str],
    *,
    trials: Sequence[TrialResult],
    baselines: Sequence[TrialResult],
    pairs: Mapping[str, Pair] | None = None,
) -> None:
    """Each verified finding gets ``verified``: the measured speed-up alone (against the two
    baselines its trial was judged between: its row's in ``pairs``, else ``baselines``, and
    against the second of them), its spread, the promised one, the estimated
    gain, the noise that kept it from being judged, and the verdict. Its ``gain`` becomes the
    measured one (``1 - 1 / speed-up``), so the findings rank by what was measured; one measured
    no faster, not worth it or rejected keeps no gain and is demoted below the rest; one whose
    trials were noisy keeps its estimate and its place."""
    for f in findings:
        t = f.technique
        if t not in tried:
            continue
        row = next((r for r in rows if t in r.techniques and r.cumulative is None), None)
        gain = f.gain
        entry: dict[str, Any] = {
            "estimated_gain": gain,
            "estimated_speedup": None if gain is None else _promised(float(gain)),
            "speedup": None,
            "speedup_lo": None,
            "speedup_hi": None,
            "speedup_second_baseline": None,
            "noise": [],
            "verdict": "not run: out of the verification's budget",
        }
        if row is not None:
            entry.update(
                speedup=row.speedup,
                speedup_lo=row.speedup_lo,
                speedup_hi=row.speedup_hi,
                verdict=row.verdict,
            )
        measured = entry["speedup"]
        failed = row is not None and row.verdict.startswith(_FAILED)
        # the trial the row was judged on: the last of its name (a second attempt after noise)
        trial = (
            None if row is None else next((r for r in reversed(trials) if r.name == row.name), None)
        )
        # A guard's rejection or a crash is not a timing; only a timing can be noise.
        if trial is not None and trial.median_step_s and not failed:
            # the tune's own judgement of the trial, between the baselines next to it; a row
            # without one (a caller that passes no pairs) is judged between ``baselines``
            pair = (pairs or {}).get(row.name) if row is not None else None
            if pair is None and len(baselines) == 2:
                base, other = baselines
                pair = Pair(base, other, trials_noise(base, other, trial, min_gain=MIN_GAIN))
            if pair is not None:
                after = pair.after.median_step_s
                if after:
                    entry["speedup_second_baseline"] = after / trial.median_step_s
                entry["noise"] = list(pair.noise)
        worthless = row is not None and row.verdict.startswith("not worth it")
        if entry["noise"]:
            entry["verdict"] = not_judged(entry["noise"])
        elif row is not None and row.verdict.startswith("not applicable"):
            # The plan could not make this change here (a toy BERT's padding: the tune's
            # bucketing needs the dataset's `lengths`): nothing was measured, so the finding
            # keeps its estimate and its place; "not applicable" is not "not faster" (issue 29).
            pass
        elif failed or worthless or (measured is not None and measured <= 1.0):
            f.demoted = (
                f"--verify measured {measured:.2f}x with the change alone"
                if measured is not None and not failed
                else f"--verify: {row.verdict if row is not None else 'no trial'}"
            )
            f.gain = None
        elif measured is not None:
            f.gain = 1.0 - 1.0 / measured
        f.verified = Verified(**{**entry, "noise": tuple(entry["noise"])})
    # by gain (measured where verified), then those without one, then the demoted; stable
    findings.sort(key=lambda f: (bool(f.demoted), f.gain is None, -(f.gain or 0.0)))


def verify(
    result: dict[str, Any],
    script: str,
    args: list[str],
    *,
    budget_s: float,
    warmup: int,
) -> dict[str, Any]:
    """Run the verification trials for ``result``'s top findings and annotate them in place;
    return what the verification did (``result["verify"]``). The trials are the tune's, with
    its default steps and the resolved device, so a later ``torchpace tune`` of the same script
    and arguments (at its default ``--steps``, and this ``--warmup``) recalls them."""
    import torch

    from torchpace.train.plan import Plan
    from torchpace.tune.candidates import for_script
    from torchpace.tune.results import ResultsFile, cache_path, tune_fingerprint
    from torchpace.tune.search import Settings, tune

    findings = result["findings"]
    tried = candidates_to_verify(findings)
    if not tried:
        return {"tried": [], "note": "no finding with an estimated gain that a plan applies"}
    cwd = os.getcwd()
    device = "cuda" if str(result.get("env", {}).get("device", "")).startswith("cuda") else "cpu"
    target = os.path.abspath(script)
    fp = tune_fingerprint(script, device=device, script_args=list(args), cwd=cwd)
    path: Path = cache_path(fp)
    settings = Settings(
        recipe=target,
        budget_s=budget_s,
        warmup=warmup,
        device=device,
        script_args=tuple(args),
        cwd=cwd,
        alone_only=True,
    )

    def only_findings(base: Any) -> tuple[list[Any], list[Any]]:
        cands, no = for_script(base, torch.device(device), findings)
        kept = [c for c in cands if any(t in tried for t in c.techniques)]
        return kept, [n for n in no if any(t in tried for t in n.techniques)]

    outcome = tune(
        settings,
        [],
        [],
        results=ResultsFile(path),
        workdir=path.parent / "work",
        baseline=Plan.as_written(),
        after_baseline=only_findings,
    )
    annotate(
        findings,
        outcome.rows,
        tried,
        trials=outcome.trials,
        baselines=outcome.baselines,
        pairs=outcome.pairs,
    )
    return {
        "tried": tried,
        "elapsed_s": outcome.elapsed_s,
        "trials": len(outcome.trials),
        "cache": str(path),
        "note": None,
    }
