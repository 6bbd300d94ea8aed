"""A compare result (``torchpace compare --json``, schema "torchpace.compare/1") as a report
``Document``: the two sides' whole runs, the paired speed-ups with their range and verdict, what
changed in the work, and the loss of every round against the time since the process started."""

from __future__ import annotations

import statistics
from typing import Any

from torchpace.report.document import (
    BandArea,
    Chart,
    Curve,
    Curves,
    Document,
    Facts,
    Paragraph,
    Section,
    table,
)

_DASH = "–"


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _seconds(v: float | None) -> str:
    if v is None:
        return _DASH
    return f"{v * 1e3:.1f} ms" if v < 1 else f"{v:.2f} s"


def _sides(result: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    base = [r for r in result["runs"] if r["side"] == result["baseline"]]
    cand = [r for r in result["runs"] if r["side"] == result["candidate"]]
    return base, cand


def _loss_chart(result: dict[str, Any]) -> Chart:
    base, cand = _sides(result)
    curves = []
    data = []
    for role, runs in (("baseline", base), ("plan", cand)):
        for r in runs:
            label = f"{r['side']}, round {r['round'] + 1}"
            curves.append(Curve(label, tuple(r["step_ends_s"]), tuple(r["losses"]), role))  # type: ignore[arg-type]
            data.append(
                [
                    label,
                    str(r["steps"]),
                    _seconds(r["wall_s"]),
                    _DASH if r["final_loss"] is None else f"{r['final_loss']:.4g}",
                ]
            )
    band = result["loss"].get("band")
    area = None
    if band and base and base[0]["step_ends_s"]:
        ends = base[0]["step_ends_s"]
        area = BandArea(
            band[0], band[1], ends[0], ends[-1], f"seed band [{band[0]:.4g}, {band[1]:.4g}]"
        )
    return Chart(
        id="compare-loss",
        title="Loss against the time since each process started",
        plot=Curves(tuple(curves), area, "seconds since the process started", "training loss"),
        alt=f"Line chart of the training loss of {len(curves)} whole runs against wall time: "
        f"{len(base)} of {result['baseline']} and {len(cand)} of {result['candidate']}.",
        how="Every training step's loss (the tensor passed to backward(), read once at the end "
        "of the run) at the step's end, in seconds since the process was started, so start-up, "
        "evaluation and everything else the run does sit on the same axis. The band: the "
        "baseline rounds' final losses, widened by the tune's margin.",
        data=table(["run", "steps", "wall", "final loss"], data, right=(1, 2, 3)),
    )


def build(result: dict[str, Any]) -> Document:
    base, cand = _sides(result)
    rows = []
    for label, key in (
        ("wall time, whole run", "wall_s"),
        ("inside training steps", "in_steps_s"),
        ("outside them", "outside_s"),
        ("time per step", "median_step_s"),
    ):
        rows.append([label, _seconds(_median(base, key)), _seconds(_median(cand, key))])
    for label, key in (("steps", "steps"), ("samples trained", "samples")):
        b, c = _median(base, key), _median(cand, key)
        rows.append(
            [label, _DASH if b is None else f"{b:,.0f}", _DASH if c is None else f"{c:,.0f}"]
        )
    b, c = _median(base, "final_loss"), _median(cand, "final_loss")
    rows.append(
        ["final loss", _DASH if b is None else f"{b:.4g}", _DASH if c is None else f"{c:.4g}"]
    )
    sides = table(
        ["", result["baseline"], result["candidate"]], rows, right=(1, 2),
        title="Whole runs (medians over the rounds)",
    )  # fmt: skip
    ratios = table(
        ["", "speed-up", "range", "verdict"],
        [
            [r["name"], f"{r['speedup']:.2f}×", f"{r['lo']:.2f}–{r['hi']:.2f}×",
             f"{r['verdict']}: {r['why']}"]
            for r in result["ratios"].values()
        ],
        right=(1, 2),
        wide=3,
        title=f"{result['candidate']} against {result['baseline']}, paired per round",
    )  # fmt: skip
    notes = [Paragraph(f"Work: {w}", "note") for w in result["work"]]
    notes.append(Paragraph(f"Loss: {result['loss']['why']}."))
    notes += [Paragraph(f"Load: {x}.", "muted") for x in result["load"]]
    if result["regressed"]:
        notes.append(Paragraph("Regressed: " + "; ".join(result["regressed"]) + ".", "note"))
    elif result["noisy"]:
        notes.append(Paragraph("Noisy, not a verdict: " + "; ".join(result["noisy"]) + ".", "note"))
    else:
        notes.append(Paragraph(f"No regression beyond {result['max_slowdown']:.0%} and the noise."))
    header = Facts(
        (
            ("script", " ".join([result["script"], *result["args"]])),
            ("compared", f"{result['candidate']} against {result['baseline']}"),
            ("rounds", f"{result['rounds']}, each candidate run between two baseline runs"),
        )
    )
    return Document(
        "compare",
        f"torchpace compare: {result['script']}",
        header,
        (Section("compare", "The whole run", (sides, ratios, *notes, _loss_chart(result))),),
    )
