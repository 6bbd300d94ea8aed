"""The doctor's findings are typed values (issue 31): checked when built, read back from a result
file into the same type, and written as the published schema lists them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchpace.doctor.merge import entry, merge
from torchpace.findings import Applies, DoctorFinding, FindingError, Location, jsonable
from torchpace.findings import Finding as LintFinding

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "docs" / "doctor-result.schema.json").read_text()
)


def test_a_finding_with_figures_the_schema_refuses_is_refused_when_built() -> None:
    with pytest.raises(FindingError, match=r"measured\['dtypes'\] is list"):
        entry("float32-not-float64", message="m", fix="f", measured={"dtypes": ["float64"]})
    with pytest.raises(FindingError, match=r"measured\['pinned'\] is bool"):
        entry("pinned-memory", message="m", fix="f", measured={"pinned": True})
    with pytest.raises(FindingError, match="status 'done'"):
        entry("avoid-syncs", message="m", fix="f", status="done")


def test_a_finding_is_written_key_for_key_as_the_schema_lists_it_and_read_back() -> None:
    lint = LintFinding(
        "TP101", "dataloader-without-workers", "loader-workers", "no workers",
        Location("/p/train.py", 7, 1, 9, 2),
    )  # fmt: skip
    (found,) = merge([], [lint], lines_seen={("/p/train.py", 8)}, syncs=[])
    written = found.to_json()
    assert list(written) == SCHEMA["$defs"]["finding"]["required"]
    assert written["applies"] == {"verb": found.applies.verb, "tune": found.applies.tune}
    assert DoctorFinding.of(json.loads(json.dumps(written))) == found
    # Optional keys appear only when set, after the required ones, as the files always had them.
    found.demoted = "--verify measured 0.90x with the change alone"
    assert list(found.to_json())[-1] == "demoted"
    assert DoctorFinding.of(found.to_json()).demoted == found.demoted


def test_a_result_file_with_a_foreign_finding_is_an_error_naming_it() -> None:
    with pytest.raises(FindingError, match="not a doctor finding"):
        DoctorFinding.of({"technique": "x", "gain": 0.2})
    result = {"schema": "x", "findings": [DoctorFinding("x", "m", "f", Applies(None, False))]}
    assert jsonable(result)["findings"][0]["technique"] == "x"
    assert result["findings"][0].technique == "x"  # the live result keeps its typed findings


# The two flat mappings Evidence declares (doctor/evidence.py): peak TFLOP/s by math mode and
# the step's phases by name, each value typed.
FLAT_MAPPINGS = {"ev.peaks", "ev.summary.timed"}


def test_the_patterns_read_the_run_as_typed_values_not_dicts_by_key() -> None:
    # Issue 31: the patterns read nested dicts by key path (the precision replay as
    # timed["from_timed_s"], timed.get("share_of")); a key renamed in the result broke them only
    # at run time. Every string-keyed read left in a pattern module is of a flat typed mapping.
    import ast

    doctor = Path(__file__).resolve().parents[2] / "src" / "torchpace" / "doctor"
    reads = []
    for path in sorted(doctor.glob("*patterns.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            keyed = None
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    keyed = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                first = node.args[0] if node.args else None
                if node.func.attr == "get" and isinstance(first, ast.Constant):
                    keyed = node.func.value if isinstance(first.value, str) else None
            if keyed is not None and ast.unparse(keyed) not in FLAT_MAPPINGS:
                reads.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert reads == []


def test_the_precision_replay_is_read_once_into_a_typed_value_naming_a_missing_key() -> None:
    from torchpace.doctor.run_facts import Replay

    written = {
        "basis": "this model's own calls, timed in both precisions",
        "from": "float32", "to": "bfloat16", "signatures": 4, "timed": 4, "failed": 0,
        "flops_share_timed": 1.0, "share_of": "FLOPs", "from_timed_s": 0.06,
        "to_timed_s": 0.02, "cast_timed_s": 0.001, "saved_s": 0.039, "speedup": 0.06 / 0.021,
        "recurrent_twins": [{"module": "LSTM", "calls": 1, "float64_s": 0.01, "float32_s": 0.002}],
        "compute_measured_s": 0.045,
    }  # fmt: skip
    replay = Replay.of(written)
    assert replay.recurrent_twins == 1 and replay.saved_s == pytest.approx(0.039)
    # a finding's figures: the result's names and order, the twins counted, no basis of its own
    expected = {k: v for k, v in written.items() if k not in ("basis", "recurrent_twins")}
    assert replay.figures() == {**expected, "recurrent_twins": 1}
    assert list(replay.figures()) == [*expected, "recurrent_twins"]
    with pytest.raises(KeyError, match="share_of"):
        Replay.of({k: v for k, v in written.items() if k != "share_of"})
