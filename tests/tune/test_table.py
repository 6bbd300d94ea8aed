from __future__ import annotations

from torchpace.report.tune_table import (
    BASELINE,
    KEPT,
    Row,
    not_applicable,
    not_worth_it,
    rejected,
    render,
    to_text,
)

MIB = 2**20
LONG_REASON = (
    "loss 2.611 (mean of the last 8 of 23 steps) is above the baseline's seed band [2.101, 2.399]"
)
ROWS = [
    Row("baseline", (), 1.0, 0.97, 1.03, None, 120 * MIB, 0.0, BASELINE),
    Row("channels-last", ("channels-last",), 1.42, 1.38, 1.47, 1.42, 118 * MIB, 0.0001, KEPT),
    Row("bf16", ("amp-bf16",), 1.85, 1.8, 1.91, None, 90 * MIB, 0.183, rejected(LONG_REASON)),
    Row(
        "compile", ("torch-compile",), 1.01, 0.95, 1.06, None, 130 * MIB, -0.004, not_worth_it(1.01)
    ),
    Row("fp16", ("amp-fp16",), verdict=not_applicable("fp16 needs CUDA")),
    Row(
        "combined",
        ("channels-last", "fused-optimizer", "activation-checkpointing"),
        2.31,
        2.2,
        2.4,
        2.31,
        1234 * MIB,
        -0.012,
        KEPT,
    ),
]
CAPTION = (
    "alone: × baseline median step time [q1–q3]; total: the greedy combination up to this row; "
    "loss Δ: tail mean vs the seed band's centre"
)


def text() -> str:
    return to_text(render(ROWS, title="torchpace tune cnn", caption=CAPTION), width=100)


def test_rows_render_to_exact_text() -> None:
    lines = text().splitlines()
    # The trial column is as wide as the longest id; the verdict takes the rest of 100 columns.
    assert lines[2] == (
        "┃ trial                      ┃     alone [q1–q3] ┃ total ┃ peak MiB ┃ loss Δ ┃ verdict"
        "             ┃"
    )
    assert lines[4] == (
        "│ baseline                   │ 1.00× [0.97–1.03] │     — │      120 │   0.0% │ baseline"
        "            │"
    )
    assert lines[5] == (
        "│ channels-last              │ 1.42× [1.38–1.47] │ 1.42× │      118 │   0.0% │ kept"
        "                │"
    )
    compile_at = lines.index(
        "│ compile                    │ 1.01× [0.95–1.06] │     — │      130 │  -0.4% │ "
        "not worth it        │"
    )
    assert lines[compile_at + 1] == (
        "│   torch-compile            │                   │       │          │        │ "
        "(1.01×)             │"
    )
    fp16_at = lines.index(
        "│ fp16                       │                 — │     — │        — │      — │ "
        "not applicable:     │"
    )
    assert lines[fp16_at + 1] == (
        "│   amp-fp16                 │                   │       │          │        │ "
        "fp16 needs CUDA     │"
    )


def test_long_reasons_fold_and_no_line_passes_100_columns() -> None:
    out = text()
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100
    start = next(i for i, line in enumerate(lines) if line.startswith("│ bf16 "))
    verdict = [line.rsplit("│", 2)[1].strip() for line in lines[start : start + 6]]
    assert " ".join(verdict) == "rejected: " + LONG_REASON  # every word there, in order
    assert lines[start + 1].startswith("│   amp-bf16 ")  # the id under a name that differs


def test_ids_are_listed_whole_one_a_line() -> None:
    lines = text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("│ combined "))
    names = [line.split("│")[1].strip() for line in lines[start : start + 4]]
    assert names == ["combined", "channels-last", "fused-optimizer", "activation-checkpointing"]
    assert "1,234" in lines[start] and "2.31× [2.20–2.40] │ 2.31×" in lines[start]


def test_markup_like_text_is_shown_as_written() -> None:
    row = Row("[bold]x[/bold]", ("amp-bf16",), verdict=rejected("band [1, 3]"))
    out = to_text(render([row], title="t"), width=100)
    assert "[bold]x[/bold]" in out and "rejected: band [1, 3]" in out
    assert "\x1b" not in out  # no colour codes


def test_verdict_helpers_word_every_row_alike() -> None:
    assert rejected("loss became nan at step 3") == "rejected: loss became nan at step 3"
    assert not_applicable("no CUDA") == "not applicable: no CUDA"
    assert not_worth_it(1.004) == "not worth it (1.00×)"
