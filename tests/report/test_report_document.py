"""What the report's documents hold, from real doctor and tune results: the sections the issue
lists, the curves and bands the charts draw, the links to the catalogue, and clear errors for
files that are not results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_helpers import DOCTOR, DOCTOR_DDP, TUNE, result

from torchpace import catalog
from torchpace.report import ResultError, document, load_result
from torchpace.report.document import Chart, Curves, Entry, Link, StackedBars, Table


def charts(doc: object) -> dict[str, Chart]:
    return {b.id: b for s in doc.sections for b in s.blocks if isinstance(b, Chart)}  # type: ignore[attr-defined]


def test_a_doctor_document_has_every_section_in_order() -> None:
    doc = document("doctor", result(DOCTOR))
    assert [s.id for s in doc.sections] == [
        "step-time",
        "throughput",
        "findings",
        "syncs",
        "memory",
        "references",
    ]
    labels = [label for label, _ in doc.header.items]
    assert labels == ["script", "date", "command", "working directory", "environment"]
    env = dict(doc.header.items)["environment"]
    assert "torch 2.13.0+cpu" in env and "2 cores" in env and "fp32 0.38, bf16 2.57" in env


def test_the_breakdown_chart_plots_the_measured_medians() -> None:
    res = result(DOCTOR)
    chart = charts(document("doctor", res))["doctor-breakdown"]
    assert isinstance(chart.plot, StackedBars)
    by_name = {s.name: s.values[0] for s in chart.plot.segments}
    assert by_name["backward"] == pytest.approx(
        res["breakdown"]["backward"]["seconds"]["median"] * 1e3
    )
    assert "copy" not in by_name  # a phase that took no time is not drawn
    assert "Median over 20 kept steps" in chart.how and "warm-up" in chart.how


def test_a_distributed_doctor_result_gets_a_bar_per_rank_and_a_ranks_table() -> None:
    doc = document("doctor", result(DOCTOR_DDP))
    chart = charts(doc)["doctor-breakdown"]
    assert isinstance(chart.plot, StackedBars)
    assert chart.plot.bars == ("rank 0", "rank 1")
    tables = [b for b in doc.sections[0].blocks if isinstance(b, Table)]
    assert tables and tables[0].title == "Ranks (2 of 2 reported)"


def test_findings_link_to_their_rule_and_technique_entries_on_the_page() -> None:
    doc = document("doctor", result(DOCTOR))
    findings = next(s for s in doc.sections if s.id == "findings")
    table = next(b for b in findings.blocks if isinstance(b, Table))
    docs = table.rows[0][table.columns.index("docs")]
    assert docs == (Link("TP302", "rule-tp302"), Link("amp-bf16", "technique-amp-bf16"))
    refs = next(s for s in doc.sections if s.id == "references")
    anchors = {e.anchor for e in refs.blocks if isinstance(e, Entry)}
    linked = {link.anchor for row in table.rows for link in row[-1]}  # type: ignore[union-attr]
    assert linked <= anchors  # every link lands on an entry
    entry = next(
        e for e in refs.blocks if isinstance(e, Entry) and e.anchor == "technique-amp-bf16"
    )
    assert entry.title == f"{catalog.get('amp-bf16').title} (amp-bf16)"


def test_a_tune_document_has_every_section_and_the_plan_to_copy() -> None:
    res = result(TUNE)
    doc = document("tune", res)
    assert [s.id for s in doc.sections] == [
        "summary",
        "speedups",
        "loss",
        "memory",
        "verdicts",
        "batch",
        "plan",
        "references",
    ]
    plan = next(s for s in doc.sections if s.id == "plan")
    code = plan.blocks[-1]
    assert json.loads(code.text) == res["plan"]  # type: ignore[union-attr]


def test_the_loss_chart_draws_the_seed_band_the_plan_and_every_rejected_trial() -> None:
    res = result(TUNE)
    chart = charts(document("tune", res))["tune-loss"]
    plot = chart.plot
    assert isinstance(plot, Curves)
    roles = {c.label: c.role for c in plot.curves}
    assert [k for k, v in roles.items() if v == "baseline"] == ["baseline", "baseline, seed 1"]
    assert roles["plan (confirm plan 1)"] == "plan"
    not_kept = {
        r["name"] for r in res["rows"] if r["verdict"].startswith(("rejected", "not worth it"))
    }
    assert {k for k, v in roles.items() if v == "rejected"} == not_kept
    band = plot.band
    assert band is not None and (band.lo, band.hi) == (res["band"]["lo"], res["band"]["hi"])
    # Against samples seen: the band spans the baseline's last 8 steps of batch 64 ...
    assert (band.first, band.last) == ((15 - 8 + 1) * 64, 15 * 64)
    # ... and the batch-128 trial lines up by samples, not by steps.
    batch = next(c for c in plot.curves if c.label == "batch 128")
    assert batch.steps[:2] == (128, 256)


def test_speedup_bars_carry_their_spread_and_whether_they_were_kept() -> None:
    chart = charts(document("tune", result(TUNE)))["tune-speedups"]
    bars = {b.label: b for b in chart.plot.bars}  # type: ignore[union-attr]
    assert (bars["bf16"].value, bars["bf16"].lo, bars["bf16"].hi) == pytest.approx(
        (1.8476, 1.7504, 1.8992), abs=1e-4
    )
    assert bars["bf16"].kept and not bars["fused optimizer"].kept
    assert bars["+ fold conv bias"].series == "combined"
    assert "compile 11.6 s" in chart.how  # compile time shown separately


def test_files_that_are_not_results_get_an_error_naming_what_to_give(tmp_path: Path) -> None:
    cases = {
        "missing.json": None,
        "broken.json": "{not json",
        "list.json": "[1, 2]",
        "other.json": '{"hello": 1}',
        "old-tune.json": '{"kind": "tune", "version": 99}',
        "future-doctor.json": '{"schema": "torchpace.doctor/9"}',
    }
    expect = {
        "missing.json": "no such file",
        "broken.json": "not valid JSON",
        "list.json": "not a result object",
        "other.json": "not a torchpace doctor, tune or compare result",
        "old-tune.json": "reads version 1",
        "future-doctor.json": "reads 'torchpace.doctor/1'",
    }
    for name, text in cases.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        with pytest.raises(ResultError, match=expect[name]):
            load_result(tmp_path / name)


def test_a_result_cut_short_names_the_missing_field() -> None:
    res = result(TUNE)
    del res["rows"]
    with pytest.raises(ResultError, match="no 'rows' field"):
        document("tune", res)


def test_a_cuda_result_draws_the_host_clock_and_the_gpu_events_side_by_side() -> None:
    res = result(DOCTOR)
    res["device_breakdown"] = {
        name: {**row, "seconds": {**row["seconds"], "median": row["seconds"]["median"] / 2}}
        for name, row in res["breakdown"].items()
    }
    chart = charts(document("doctor", res))["doctor-breakdown"]
    assert isinstance(chart.plot, StackedBars)
    assert chart.plot.bars == ("host clock", "GPU events")
    backward = next(s for s in chart.plot.segments if s.name == "backward")
    assert backward.values[1] == pytest.approx(backward.values[0] / 2)
    assert "host clock and CUDA events" in chart.how
    assert chart.data.columns == ("phase", "host clock ms", "share", "GPU events ms", "share")


def test_results_with_nothing_measured_still_render() -> None:
    # A tune whose every trial failed, and a doctor run stopped before a step was kept: the page
    # and the terminal leave out what there is no data for instead of failing.
    from torchpace.report.html import page
    from torchpace.report.terminal import to_text

    tune = result(TUNE)
    tune.update(band=None, confirm={}, loader={}, batch_search=[])
    for t in tune["trials"]:
        t.update(losses=[], peak_memory_bytes=None, compile_seconds=None)
    tune["rows"] = [r for r in tune["rows"] if r["name"] == "baseline"]
    tune["plan"]["techniques"] = []
    doctor = result(DOCTOR)
    for key in ("step_seconds", "breakdown", "samples_per_s", "syncs"):
        del doctor[key]
    doctor["findings"] = []
    docs = [document("tune", tune), document("doctor", doctor)]
    assert [s.id for s in docs[0].sections] == ["summary", "verdicts", "plan"]
    assert [s.id for s in docs[1].sections] == ["step-time", "findings", "memory"]
    assert "the recipe as written" in to_text(docs[0])
    assert "No findings." in page(docs)


def test_a_script_findings_fix_names_the_tune_command_for_that_script() -> None:
    from torchpace.report.doctor_doc import build

    doc = build(result(DOCTOR))
    text = json.dumps(doc, default=lambda o: getattr(o, "__dict__", str(o)))
    # Once, below the table: repeated in every row, a long command line made each row a
    # paragraph (issue 20: reports of 75-221 lines).
    command = "`torchpace tune /home/ada/project/examples/naive_cnn.py -- --steps 200`"
    assert text.count(command) == 1


def test_lint_findings_not_seen_running_fold_into_one_line() -> None:
    from torchpace.report.doctor_doc import build
    from torchpace.report.terminal import to_text

    res = result(DOCTOR)
    unseen = [f for f in res["findings"] if f["status"] == "not seen running"]
    assert len(unseen) >= 3
    text = to_text(build(res))
    flat = " ".join(text.split())
    assert f"{len(unseen)} lint findings in code the measured steps did not run" in flat
    assert "(not seen running)" not in flat


def test_a_demoted_finding_says_why_not_that_it_was_slower() -> None:
    # Issue 29: --verify's "not applicable" was shown as "Demoted: not faster here".
    from torchpace.findings import Applies, DoctorFinding
    from torchpace.report.doctor_doc import _change

    finding = DoctorFinding(
        "conv-bias-before-bn",
        "conv bias before BatchNorm",
        "bias=False",
        Applies(None, True),
        demoted="--verify: not applicable: torch.fx could not trace the model",
    )
    text = _change(finding)
    assert "not faster" not in text
    assert text.endswith("Demoted: --verify: not applicable: torch.fx could not trace the model.")
    finding.demoted = "--verify measured 0.97x with the change alone"
    assert _change(finding).endswith("Demoted: --verify measured 0.97x with the change alone.")
