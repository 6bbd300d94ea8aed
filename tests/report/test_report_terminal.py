"""The terminal view, rendered to a fixed-width string (STYLE rule 11): the same sections as the
page, at most 100 columns, plain text with no terminal codes, and user strings shown as written."""

from __future__ import annotations

import io

from report_helpers import DOCTOR, DOCTOR_DDP, TUNE, result

from torchpace.report import document
from torchpace.report.terminal import console, to_text


def lines_of(kind: str, res: dict) -> list[str]:  # type: ignore[type-arg]
    return [line.rstrip() for line in to_text(document(kind, res)).splitlines()]


def test_the_doctor_view_reads_as_expected() -> None:
    lines = lines_of("doctor", result(DOCTOR))
    assert lines[:7] == [
        "torchpace doctor",
        "script             /home/ada/project/examples/naive_cnn.py --steps 200",
        "date               2026-11-23T02:33:28+00:00",
        "command            —",
        "working directory  /home/ada/project",
        "environment        Intel(R) Xeon(R) Processor (cpu); torch 2.13.0+cpu, Python 3.11.7; 2 "
        "cores, 2",
        "                   torch threads; measured peak TFLOP/s: fp32 0.38, bf16 2.57",
    ]
    at = lines.index("Where a training step's time goes")
    assert lines[at + 1] == "host clock " + "█" * 56 + " 120.1 ms per step"
    assert lines[at + 2] == "key: █ data  █ forward  █ backward  █ optimizer  █ other"
    assert "│ backward  │         73.28 │   61% │" in lines
    assert "MFU         40.9% of 0.38 TFLOP/s (fp32 peak)" in lines
    assert lines[
        lines.index(
            "┃ # ┃ gain ┃ where                    ┃ measured   ┃ what to change"
            "             ┃ docs             ┃"
        )
        + 2
    ] == (
        "│ 1 │  35% │ examples/naive_cnn.py:55 │ compute    │ forward and backward run   │ TP302"
        "            │"
    )
    assert (
        "│ examples/naive_cnn.py:59 │ .item() │        1 │      20 of 20 │ not measured on CPU │"
        in lines
    )
    assert "peak      646 MiB (rss)" in lines
    assert "• TP302 cuda-training-without-autocast" in lines


def test_the_tune_view_keeps_ids_whole() -> None:
    # Technique ids never split across lines: the verdict column gives up width first.
    lines = lines_of("tune", result(TUNE))
    assert (
        "│ fold conv     │ conv-bias-before-bn │ 1.02× [1.01–1.05] │      645 │  +2.1% │ "
        "not worth it       │" in lines
    )


def test_the_tune_view_reads_as_expected() -> None:
    lines = lines_of("tune", result(TUNE))
    assert lines[0] == "torchpace tune cnn"
    at = lines.index("plan                amp-bf16")
    assert lines[at + 1 : at + 5] == [
        "                    channels-last",
        "                    conv-bias-before-bn",
        "                    grad-set-to-none",
        "                    avoid-syncs",
    ]
    assert "bf16             █████████████████████ 1.85" in lines
    assert "fused optimizer  ██████████ 0.86 (not kept)" in lines
    assert (
        "│ bf16             │ alone    │ 1.85× [1.75–1.90] │ kept alone                         "
        "            │" in lines
    )
    assert (
        "│ bf16          │ amp-bf16            │ 1.85× [1.75–1.90] │      570 │  +2.1% │ kept alone"
        "         │" in lines
    )
    assert any(
        line.startswith("│ batch 128             │   128 │    11 │      2.362 │       1.719 │")
        for line in lines
    )
    assert '  "amp": "bf16",' in lines  # the plan, to copy


def test_every_view_fits_100_columns_without_terminal_codes() -> None:
    for kind, path in (("doctor", DOCTOR), ("doctor", DOCTOR_DDP), ("tune", TUNE)):
        text = to_text(document(kind, result(path)))
        assert max(len(line) for line in text.splitlines()) <= 100
        assert "\x1b[" not in text


def test_a_console_that_is_not_a_terminal_writes_100_columns_of_plain_text() -> None:
    buf = io.StringIO()
    out = console(buf)
    assert out.width == 100 and out.color_system is None
    out.print(document("doctor", result(DOCTOR_DDP)).title)
    assert buf.getvalue() == "torchpace doctor\n"


def test_markup_in_user_strings_is_shown_as_written() -> None:
    res = result(DOCTOR)
    res["findings"][0]["message"] = "[bold red]not markup[/] and [link=x]"
    lines = to_text(document("doctor", res)).splitlines()
    assert any("│ [bold red]not markup[/]    │" in line for line in lines)
    assert any("│ and [link=x] → wrap        │" in line for line in lines)
