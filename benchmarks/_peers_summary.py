"""peers.py's figures from its runs, and the table they make (terminal and README markdown).

Pure functions of the results: no torch, no Lightning, no Accelerate, so the tests run them.

- ``summarize_part``: per contestant, the throughput ratio against the naive script taken
  per round (both ran in that round, the order alternating) and summarised as median [q1–q3],
  and the medians of its other figures;
- ``why_not_ahead``: for a row where torchpace is not ahead, one sentence on what limits it,
  built from what was measured (the spreads, the techniques each side applied, the tune's
  verdicts on the techniques the plan left out);
- ``table_rows`` / ``markdown`` / ``print_table``: one set of rows, two renderings.
"""

from __future__ import annotations

import statistics
from typing import Any

from torchpace.measure.noise import verdict
from torchpace.measure.stats import summarize

BASELINE = "naive"
TORCHPACE = "torchpace"
NAMES = {
    "naive": "naive script",
    "torchpace": "torchpace (tune → fit)",
    "lightning": "Lightning Trainer",
    "accelerate": "Accelerate",
    "handtuned": "hand-tuned loop",
}
# Catalogue ids in words, for the table and the why sentences.
WORDS = {
    "amp-bf16": "bf16 autocast",
    "channels-last": "channels_last",
    "conv-bias-before-bn": "no conv bias before BN",
    "fused-optimizer": "fused optimizer",
    "attention-backend": "math attention",
    "length-bucketing": "length bucketing",
    "torch-compile": "torch.compile",
    "loader-workers": "loader workers",
    "pinned-memory": "pinned memory",
    "persistent-workers": "persistent workers",
    "cudnn-benchmark": "cudnn.benchmark",
    "tf32": "TF32",
    "grad-set-to-none": "set_to_none",
    "avoid-syncs": "no per-step sync",
    "async-prefetch": "device prefetch",
    "max-batch-size": "larger batch",
}
# Shown in the table's "applies" column only when they are not the same for every tuned side.
QUIET = ("grad-set-to-none", "avoid-syncs")


def words(techniques: list[str] | tuple[str, ...]) -> str:
    return ", ".join(WORDS.get(t, t) for t in techniques) or "nothing"


def ok_runs(rounds: list[dict[str, Any]], contestant: str) -> dict[int, dict[str, Any]]:
    """The contestant's successful runs by round index."""
    out = {}
    for i, runs in enumerate(rounds):
        run = runs.get(contestant)
        if run is not None and "error" not in run:
            out[i] = run
    return out


def summarize_contestant(rounds: list[dict[str, Any]], contestant: str) -> dict[str, Any]:
    """The contestant's figures over the rounds; ``ratio`` pairs it with the naive run of the
    same round (rounds where either failed are left out and counted)."""
    mine, base = ok_runs(rounds, contestant), ok_runs(rounds, BASELINE)
    failed = [runs[contestant]["error"] for runs in rounds if "error" in runs.get(contestant, {})]
    if not mine:
        return {"rounds": 0, "failed": len(failed), "errors": failed[:1]}
    both = [i for i in mine if i in base]
    paired = [mine[i]["samples_per_s"] / base[i]["samples_per_s"] for i in both]
    ratio = summarize(paired) if paired else None
    # other load during either side of a pair moves its ratio
    foreign = [
        run["foreign_cores"]
        for i in both
        for run in (mine[i], base[i])
        if run.get("foreign_cores") is not None
    ]

    def median(key: str) -> float | None:
        values = [r[key] for r in mine.values() if r.get(key) is not None]
        return statistics.median(values) if values else None

    useful = [
        r["window_real_tokens"] / r["window_tokens"]
        for r in mine.values()
        if r.get("window_tokens")
    ]
    first = mine[min(mine)]
    spread = ratio.rel_iqr if ratio is not None and contestant != BASELINE else 0.0
    return {
        "rounds": len(mine),
        "failed": len(failed),
        "errors": failed[:1],
        "ratio": ratio.to_dict() if ratio is not None else None,
        "ratios": paired,
        "samples_per_s": summarize([r["samples_per_s"] for r in mine.values()]).to_dict(),
        "peak_memory_bytes": median("peak_memory_bytes"),
        "memory_kind": first["memory_kind"],
        "train_loss": median("train_loss"),
        "val_loss": median("val_loss"),
        "useful_tokens": statistics.median(useful) if useful else None,  # unpadded share
        "tflops": median("tflops"),
        "mfu": median("mfu"),
        "compile_s": max(r["compile_s"] for r in mine.values()),
        "first_step_s": median("first_step_s"),
        "foreign_cores_max": max(foreign, default=None),
        "noisy": verdict(spread, max(foreign, default=None)),  # empty: the ratio can be trusted
        "techniques": first["techniques"],
        "settings": first["settings"],
    }


def summarize_part(part: dict[str, Any], contestants: list[str]) -> None:
    """Set a workload's ``summary`` (per contestant) and ``why`` (per row where torchpace is not
    ahead) from its ``rounds`` and ``tune_rows``."""
    summary = {c: summarize_contestant(part["rounds"], c) for c in contestants}
    part["summary"] = summary
    tp = summary.get(TORCHPACE)
    part["why"] = {
        c: why_not_ahead(c, s, tp, part.get("tune_rows")) if tp else None
        for c, s in summary.items()
    }


def _tune_reason(technique: str, tune_rows: list[dict[str, Any]] | None) -> str:
    """What `torchpace tune` found for ``technique``: the verdict of the last row that tried
    it and did not keep it."""
    word = WORDS.get(technique, technique)
    if tune_rows is None:
        return f"no tune results to say why for {word}"
    tried = [r for r in tune_rows if technique in r["techniques"]]
    left = [r for r in tried if not r["verdict"].startswith("kept")]
    if left:
        return f"the tune found {word} {left[-1]['verdict']}"
    if tried:
        return f"the tune kept {word} in a row the plan did not take"
    return f"`torchpace tune` does not try {word}"


def why_not_ahead(
    contestant: str,
    row: dict[str, Any],
    tp: dict[str, Any],
    tune_rows: list[dict[str, Any]] | None = None,
) -> str | None:
    """One sentence on why torchpace is not ahead of ``row`` (None where it is ahead).

    ``row`` and ``tp`` are contestant summaries (``ratio`` with median, q1, q3, and
    ``techniques``); ``tune_rows`` the tune's rows (name, techniques, verdict), if known."""
    if contestant == TORCHPACE:
        return None
    name = NAMES.get(contestant, contestant)
    if tp.get("ratio") is None:
        return f"torchpace has no measured round here ({'; '.join(tp.get('errors', []))[:200]})."
    if row.get("ratio") is None:
        return None
    r, t = row["ratio"], tp["ratio"]
    if t["median"] > r["median"]:
        return None
    figures = f"{r['median']:.2f}× against torchpace's {t['median']:.2f}×"
    extra = [x for x in row["techniques"] if x not in tp["techniques"]]
    missing = [x for x in tp["techniques"] if x not in row["techniques"] and x not in QUIET]
    overlap = r["q1"] <= t["q3"] and t["q1"] <= r["q3"]
    if overlap:
        same = [x for x in row["techniques"] if x in tp["techniques"] and x not in QUIET]
        what = (
            f"{name} applies what the plan applies ({words(same)})"
            if not extra and not missing
            else f"{name} differs from the plan by {_difference(extra, missing)}"
        )
        return f"{what}; the difference ({figures}) is within the spread."
    if extra:
        reasons = "; ".join(_tune_reason(x, tune_rows) for x in extra)
        return f"{name} adds {words(extra)}, which the plan leaves out: {reasons}; {figures}."
    padding = _padding(row, tp)
    if padding:
        what = f"leaves out the plan's {words(missing)}" if missing else "has the plan's techniques"
        return f"{name} {what}, but {padding}: {figures}."
    if missing:
        return (
            f"{name} leaves out the plan's {words(missing)} and runs {figures}: here they cost "
            "more than the tune measured them to give."
        )
    return (
        f"{name} applies the same techniques as the plan and runs {figures}: the gap is per-step "
        "work outside them (loop, loader, framework)."
    )


def _padding(row: dict[str, Any], tp: dict[str, Any]) -> str | None:
    """How the two sides' batches differ in padding, where that differs by 5 points or more."""
    r, t = row.get("useful_tokens"), tp.get("useful_tokens")
    # 5 points: a judgement, not a measurement: closer than that, call the batching alike
    if r is None or t is None or abs(r - t) < 0.05:
        return None
    return f"its batches are {r:.0%} real tokens against the plan's {t:.0%}"


def _difference(extra: list[str], missing: list[str]) -> str:
    parts = ([f"adding {words(extra)}"] if extra else []) + (
        [f"leaving out {words(missing)}"] if missing else []
    )
    return " and ".join(parts)


# -- the table ------------------------------------------------------------------------------------
COLUMNS = (
    "workload",
    "contestant",
    "speed-up [q1–q3]",
    "samples/s",
    "peak memory",
    "train loss",
    "val loss",
    "lm MFU",
    "applies",
    "why torchpace is not ahead",
)


def _mib(n: float | None, kind: str) -> str:
    if n is None:
        return "—"
    return f"{n / 2**20:,.0f} MiB" + (" RSS" if kind.startswith("rss") else "")


def _num(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def table_rows(results: dict[str, Any]) -> list[list[str]]:
    """One row per workload and contestant, the cells as both renderings show them."""
    rows = []
    for w, part in results["workloads"].items():
        summary, why = part.get("summary", {}), part.get("why", {})
        for c, s in summary.items():
            if not s.get("rounds"):
                err = "; ".join(s.get("errors", [])) or "no run"
                rows.append([w, NAMES.get(c, c), "failed", *["—"] * 6, "", err[:120]])
                continue
            ratio = s["ratio"]
            speed = (
                "1 (baseline)"
                if c == BASELINE
                else "—"
                if ratio is None
                else f"{ratio['median']:.2f}× [{ratio['q1']:.2f}–{ratio['q3']:.2f}]"
            ) + (" (noisy)" if s.get("noisy") and c != BASELINE else "")
            mfu = s["mfu"] if w == "lm" else None
            shown = [t for t in s["techniques"] if t not in QUIET]
            rows.append(
                [
                    w,
                    NAMES.get(c, c),
                    speed,
                    f"{s['samples_per_s']['median']:,.0f}",
                    _mib(s["peak_memory_bytes"], s["memory_kind"]),
                    _num(s["train_loss"], ".3f"),
                    _num(s["val_loss"], ".3f"),
                    "—" if mfu is None else f"{mfu:.1%}",
                    words(shown) if c != BASELINE else "the script as written",
                    why.get(c) or "",
                ]
            )
    return rows


def header_line(results: dict[str, Any]) -> str:
    env = results["environment"]
    fp = env["fingerprint"]
    peers = ", ".join(f"{k} {v}" for k, v in env.get("peer_versions", {}).items())
    wall = env.get("wall_s")
    took = f" ({wall / 60:.1f} minutes)" if wall else ""
    return (
        f"Machine: {fp['device_name']} ({fp['cores']} cores), torch {env['torch']}, Python "
        f"{fp['python_version']}, {peers or 'no peers installed'}, torchpace at "
        f"{env['torchpace_git']}, {env['date'][:10]}. Command: `{env['command']}`{took}."
    )


def notes(results: dict[str, Any]) -> list[str]:
    """What the table leaves out: each tune's time and plan source, each noisy row's reasons,
    each failed round, and the lm model's size."""
    out = []
    lm = results["environment"].get("lm")
    if lm:
        out.append(f"lm: size {lm['size']}, {lm['parameters'] / 1e6:.1f} M parameters.")
    for w, part in results["workloads"].items():
        tune = part.get("tune", {})
        if tune.get("from") == "tune":
            out.append(f"{w}: `{tune['command']}` took {tune['wall_s']:.0f} s.")
        elif tune:
            out.append(f"{w}: plan from {tune['plan_path']}.")
        for c, s in part.get("summary", {}).items():
            for reason in s.get("noisy", []) if c != BASELINE else []:
                out.append(f"{w}, {NAMES.get(c, c)}: noisy: {reason}.")
            if s.get("failed"):
                out.append(f"{w}, {NAMES.get(c, c)}: {s['failed']} round(s) failed: {s['errors']}")
    return out


def markdown(results: dict[str, Any]) -> str:
    """The README's table for one device: a line naming the machine and command, the rows, and
    the notes."""
    lines = [header_line(results), "", "| " + " | ".join(COLUMNS) + " |"]
    lines.append("|" + "---|" * len(COLUMNS))
    for row in table_rows(results):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    lines += ["", *(f"- {n}" for n in notes(results))] if notes(results) else []
    return "\n".join(lines) + "\n"


def print_table(results: dict[str, Any], width: int = 200) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="torchpace against its peers", caption=escape(header_line(results)))
    for col in COLUMNS:
        left = col in ("workload", "contestant", "applies", "why torchpace is not ahead")
        table.add_column(escape(col), justify="left" if left else "right")
    for row in table_rows(results):
        table.add_row(*(escape(cell) for cell in row))
    console = Console(width=width)
    console.print(table)
    for n in notes(results):
        console.print(escape(f"  {n}"))
