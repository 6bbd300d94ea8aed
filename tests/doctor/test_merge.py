"""Static and runtime findings merged: one entry per problem, lint findings confirmed or not."""

from __future__ import annotations

from torchpace.doctor.merge import merge
from torchpace.doctor.patterns import RuntimeFinding
from torchpace.findings import Finding, Location

PATH = "/proj/train.py"


def _lint(code: str, technique: str, line: int, end_line: int | None = None) -> Finding:
    loc = Location(PATH, line, 1, end_line or line, 10)
    return Finding(code, "name", technique, f"{code} message", loc)


def _runtime(technique: str, line: int, gain: float | None) -> RuntimeFinding:
    return RuntimeFinding(
        "input-bound", technique, "high", "waits", "add workers", (PATH, line), gain
    )


def test_a_finding_seen_both_ways_is_one_entry_with_the_rule_code() -> None:
    # The loader call spans lines 7-9; the runtime finding points at line 8 (where the frame was).
    entries = merge(
        [_runtime("loader-workers", 8, 0.4)],
        [_lint("TP101", "loader-workers", 7, 9)],
        lines_seen=set(),
        syncs=[],
    )
    (entry,) = entries
    assert entry.source == "lint+runtime"
    assert entry.code == "TP101"
    assert entry.gain == 0.4
    assert entry.status == "measured"


def test_lint_findings_are_confirmed_by_lines_that_ran_and_carry_sync_counts() -> None:
    syncs = [{"path": PATH, "line": 30, "per_step": 2.0, "blocked_s_per_step": None}]
    entries = merge(
        [],
        [
            _lint("TP201", "avoid-syncs", 30),
            _lint("TP402", "grad-set-to-none", 25),
            _lint("TP403", "no-grad-eval", 60),
        ],
        lines_seen={(PATH, 25)},
        syncs=syncs,
    )
    by_code = {e.code: e for e in entries}
    assert by_code["TP201"].status == "seen running"
    assert by_code["TP201"].measured == {"syncs_per_step": 2.0, "blocked_s_per_step": None}
    assert by_code["TP402"].status == "seen running"
    assert by_code["TP403"].status == "not seen running"
    assert [e.code for e in entries][-1] == "TP403"  # not seen running ranks last


def test_different_technique_on_the_same_line_stays_separate() -> None:
    entries = merge(
        [_runtime("loader-workers", 7, 0.3)],
        [_lint("TP102", "pinned-memory", 7)],
        lines_seen={(PATH, 7)},
        syncs=[],
    )
    assert sorted(e.source for e in entries) == ["lint", "runtime"]
    assert entries[0].source == "runtime"  # the measured gain ranks first


def test_a_lint_finding_carries_the_runs_own_check_and_ranks_after_when_it_would_not_pay() -> None:
    # The VAE on a CPU: "CUDA loop without autocast" (seen running) ranked second, while the
    # same run's timing of the model's calls said bf16 would not pay here.
    why = "bfloat16 would not pay on this model: its own calls take 85 ms in float32 and 141 ms"
    entries = merge(
        [],
        [_lint("TP302", "amp-bf16", 20), _lint("TP402", "grad-set-to-none", 25)],
        lines_seen={(PATH, 20), (PATH, 25)},
        syncs=[],
        checked={"amp-bf16": why, "loader-workers": "no DataLoader"},
    )
    assert [e.code for e in entries] == ["TP402", "TP302"]
    assert entries[1].runtime_check == why and entries[0].runtime_check is None


def test_the_runs_own_files_say_whether_it_stands_in_for_a_gpu_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from torchpace.doctor.result import _uses_accelerator

    cpu = tmp_path / "cpu.py"
    cpu.write_text("import torch\nx = torch.ones(2)\nprint(x.sum().item())\n")
    gpu = tmp_path / "gpu.py"
    gpu.write_text(
        "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "x = torch.ones(2).to(device)\nprint(x.sum().item())\n"
    )
    assert _uses_accelerator({str(cpu)}) is False
    assert _uses_accelerator({str(cpu), str(gpu)}) is True
    assert _uses_accelerator({str(tmp_path / "gone.py")}) is True  # unreadable: nothing dropped


def test_a_finding_no_plan_can_apply_is_not_offered_to_the_tune() -> None:
    from torchpace.doctor.evidence import RuntimeFinding
    from torchpace.doctor.merge import _from_runtime

    as_stated = RuntimeFinding("padding-waste", "length-bucketing", "high", "m", "f", None, 0.3)
    assert _from_runtime(as_stated).applies.tune is True
    trim_first = RuntimeFinding(
        "padding-waste", "length-bucketing", "high", "m", "f", None, 0.3, plan_applies=False
    )
    assert _from_runtime(trim_first).applies.tune is False
