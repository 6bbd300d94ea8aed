"""`--format sarif` (valid against the SARIF 2.1.0 schema) and `--format github`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from torchpace import __version__
from torchpace.cli import main
from torchpace.findings import Finding, Location
from torchpace.lint import get
from torchpace.lint.output import render_github

SCHEMA = Path(__file__).parent / "data" / "sarif-2.1.0-rtm.5.json"
SOURCE = (
    "import torch  # \u00e9\n"
    "from torch.utils.data import DataLoader\n"
    "loader = DataLoader(ds, pin_memory=True)\n"
    "s = '\u00e9'; scaler = torch.cuda.amp.GradScaler()\n"
)
NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# nb"},
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": ["import torch\n", "s = torch.cuda.amp.GradScaler()\n"],
        },
    ],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def _validate(doc: dict[str, Any]) -> list[str]:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [e.message for e in validator.iter_errors(doc)]


@pytest.fixture
def sarif(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub dir").mkdir()
    (tmp_path / "sub dir" / "a.py").write_text(SOURCE, encoding="utf-8")
    (tmp_path / "nb.ipynb").write_text(json.dumps(NOTEBOOK, indent=1))  # as nbformat writes
    (tmp_path / "bad.py").write_bytes(b"\0")
    rc = main(["lint", "--format", "sarif", "--select", "TP101,TP301", "."])
    out, err = capsys.readouterr()
    assert rc == 2 and err == "bad.py: error: binary file (contains NUL bytes)\n"
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_sarif_is_valid_against_the_schema(sarif: dict[str, Any]) -> None:
    assert _validate(sarif) == []
    broken = json.loads(json.dumps(sarif))
    broken["runs"][0]["results"][0]["level"] = "severe"
    assert _validate(broken), "the schema check must be able to fail"


def test_sarif_tool_and_rules(sarif: dict[str, Any]) -> None:
    assert sarif["version"] == "2.1.0"
    [run] = sarif["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("torchpace", __version__)
    assert driver["informationUri"].startswith("https://")
    assert [r["id"] for r in driver["rules"]] == ["TP101", "TP301"]
    tp101 = get("TP101")
    assert driver["rules"][0] == {
        "id": "TP101",
        "name": "dataloader-without-workers",
        "shortDescription": {"text": tp101.message},
        "fullDescription": {"text": driver["rules"][0]["fullDescription"]["text"]},
        "help": {"text": tp101.doc, "markdown": tp101.doc},
        "defaultConfiguration": {"enabled": True, "level": "warning"},
        "properties": {"technique": "loader-workers", "tags": ["performance", "loader-workers"]},
    }
    assert driver["rules"][0]["fullDescription"]["text"].startswith("Flags a `torch.utils.data")
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["invocations"] == [
        {
            "executionSuccessful": False,
            "toolExecutionNotifications": [
                {
                    "level": "error",
                    "message": {"text": "binary file (contains NUL bytes)"},
                    "locations": [
                        {
                            "physicalLocation": {
                                "artifactLocation": {"uri": "bad.py", "uriBaseId": "%SRCROOT%"}
                            }
                        }
                    ],
                }
            ],
        }
    ]


def test_sarif_results_locations_and_fixes(sarif: dict[str, Any]) -> None:
    results = sarif["runs"][0]["results"]
    assert [(r["ruleId"], r["ruleIndex"], r["level"]) for r in results] == [
        ("TP301", 1, "warning"),  # nb.ipynb sorts before "sub dir"
        ("TP101", 0, "warning"),
        ("TP301", 1, "warning"),
    ]
    notebook, loader, scaler = results
    assert notebook["message"]["text"].endswith("(notebook cell 2, line 2)")
    assert notebook["properties"] == {"cell": 2, "cellLine": 2} and "fixes" not in notebook
    # The region is in the .ipynb file itself: open it at the reported line.
    where = notebook["locations"][0]["physicalLocation"]
    assert where["artifactLocation"] == {"uri": "nb.ipynb", "uriBaseId": "%SRCROOT%"}
    file_line = Path("nb.ipynb").read_text().splitlines()[where["region"]["startLine"] - 1]
    assert json.loads(file_line.strip().rstrip(",")) == "s = torch.cuda.amp.GradScaler()\n"
    assert where["region"]["endLine"] == where["region"]["startLine"]
    artifact = {"uri": "sub%20dir/a.py", "uriBaseId": "%SRCROOT%"}
    assert loader["locations"] == [
        {
            "physicalLocation": {
                "artifactLocation": artifact,
                "region": {"startLine": 3, "startColumn": 10, "endLine": 3, "endColumn": 41},
            }
        }
    ]
    assert "fixes" not in loader
    # Columns count code points: the "é" before the call is one column, two bytes.
    assert scaler["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 4,
        "startColumn": 19,
        "endLine": 4,
        "endColumn": 44,
    }
    assert scaler["fixes"] == [
        {
            "description": {"text": 'Use `torch.amp.GradScaler("cuda", ...)`'},
            "artifactChanges": [
                {
                    "artifactLocation": artifact,
                    "replacements": [
                        {
                            "deletedRegion": {
                                "startLine": 4,
                                "startColumn": 19,
                                "endLine": 4,
                                "endColumn": 44,
                            },
                            "insertedContent": {"text": "torch.amp.GradScaler"},
                        },
                        {
                            "deletedRegion": {
                                "startLine": 4,
                                "startColumn": 45,
                                "endLine": 4,
                                "endColumn": 45,
                            },
                            "insertedContent": {"text": '"cuda"'},
                        },
                    ],
                }
            ],
            "properties": {"safety": "safe"},
        }
    ]


def test_sarif_with_no_findings_is_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("x = 1\n")
    assert main(["lint", "--format", "sarif", "a.py"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["runs"][0]["results"] == [] and _validate(doc) == []


def test_sarif_uris_are_relative_to_the_repository_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Linting ../other from a sub-directory gave file:/// URIs that code scanning cannot map.
    (tmp_path / "other").mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "other" / "a.py").write_text(SOURCE, encoding="utf-8")

    def uris() -> tuple[str, list[str]]:
        main(["lint", "--format", "sarif", "--select", "TP101", "../other"])
        run = json.loads(capsys.readouterr().out)["runs"][0]
        artifacts = [
            r["locations"][0]["physicalLocation"]["artifactLocation"] for r in run["results"]
        ]
        assert all(a["uriBaseId"] == "%SRCROOT%" for a in artifacts)
        return run["originalUriBaseIds"]["%SRCROOT%"]["uri"], [a["uri"] for a in artifacts]

    monkeypatch.chdir(tmp_path / "work")
    assert uris() == ((tmp_path / "work").resolve().as_uri() + "/", ["../other/a.py"])
    (tmp_path / ".git").mkdir()  # now both are in one repository: its root is the base
    assert uris() == (tmp_path.resolve().as_uri() + "/", ["other/a.py"])


def test_github_escapes_and_levels() -> None:
    def finding(path: str, message: str, cell: int | None = None) -> Finding:
        return Finding("TP405", "name", "t", message, Location(path, 3, 4, 5, 6, cell))

    text = render_github(
        [
            finding("C:\\dir,x\\a.py", "100% done\r\nnext: step"),
            finding("n.ipynb", "m", cell=7),
            Finding("TP101", "loader", "t", "w", Location("b.py", 1, 1, 1, 2)),
        ],
        [],
        {"TP405": "info", "TP101": "warning"},
    )
    assert text.splitlines() == [
        "::notice file=C%3A\\dir%2Cx\\a.py,line=3,col=4,endLine=5,endColumn=6,title=TP405 name"
        "::100%25 done%0D%0Anext: step",
        "::notice file=n.ipynb,title=TP405 name::cell 7, line 3, col 4: m",
        "::warning file=b.py,line=1,col=1,endLine=1,endColumn=2,title=TP101 loader::w",
    ]


def test_github_summarises_past_ten_per_kind_and_maps_notebook_lines() -> None:
    # GitHub shows 10 annotations of a kind per step: the 11th onwards vanished unannounced.
    warnings = [
        Finding("TP101", "loader", "t", f"w{i}", Location(f"f{i:02}.py", 1, 1, 1, 2))
        for i in range(12)
    ]
    nb = Finding("TP405", "fused", "t", "m", Location("nb.ipynb", 2, 1, 2, 3, cell=2))
    source = json.dumps(NOTEBOOK, indent=1).encode()
    text = render_github([*warnings, nb], [], {"TP405": "info"}, {"nb.ipynb": source})
    lines = text.splitlines()
    annotations = [ln for ln in lines if ln.startswith("::warning")]
    assert len(annotations) == 10
    assert (
        annotations[-1]
        == "::warning title=torchpace%3A 12 warnings::3 more warnings are listed in this step's log"
    )
    assert [ln for ln in lines if not ln.startswith("::")] == [
        f"f{i:02}.py:1:1: TP101 w{i}" for i in (9, 10, 11)
    ]
    notice = next(ln for ln in lines if ln.startswith("::notice"))
    row = int(notice.split("line=")[1].split(",")[0])
    assert json.loads(source.decode().splitlines()[row - 1].strip().rstrip(",")) == (
        "s = torch.cuda.amp.GradScaler()\n"
    )
    assert notice.endswith("::cell 2, line 2, col 1: m")
