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
