"""The doctor's result file against its published schema (docs/doctor-result.schema.json), and
docs/doctor.md against the code: real runs validate, drift in either fails a test."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from torchpace.catalog import ids
from torchpace.doctor.patterns import PATTERNS
from torchpace.doctor.ranks import PATTERNS as RANK_PATTERNS
from torchpace.doctor.result import SCHEMA, schema_errors
from torchpace.doctor.syncs import TENSOR_SYNCS
from torchpace.findings import jsonable
from torchpace.runtime.phases import PHASES

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "docs" / "doctor-result.schema.json"
DOC = ROOT / "docs" / "doctor.md"
SCRIPT = Path(__file__).parent / "scripts" / "schema_tiny.py"

Result = dict[str, Any]


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text())


@pytest.fixture(scope="module")
def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _run(args: list[str], *, steps: int, warmup: int) -> Result:
    from torchpace.doctor import script

    ran = script.run(str(SCRIPT), args, steps=steps, warmup=warmup)
    assert ran.exit_code == 0, ran.outcome
    assert ran.result is not None, ran.saw
    return jsonable(ran.result)  # as the result file holds it


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Result]]:
    """One real doctor run measured to the end (~1 s once torch is warm), and one whose script
    ends during warm-up (no step kept: the optional figures are absent, settings empty)."""
    with pytest.MonkeyPatch.context() as mp:
        # The conftest's cache isolation is per test and this fixture runs before it: use the
        # same folder, so the peak FLOP/s measured once serve the whole session.
        mp.setenv("TORCHPACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
        yield {
            "measured": _run([], steps=3, warmup=1),
            "ended in warm-up": _run(["--steps", "1"], steps=3, warmup=2),
        }


@pytest.fixture(scope="module")
def result(runs: dict[str, Result]) -> Result:
    return runs["measured"]


def _errors(validator: Draft202012Validator, instance: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<top>'}: {e.message}"
        for e in validator.iter_errors(instance)
    ]


def test_the_schema_is_valid_draft_2020_12(schema: dict[str, Any]) -> None:
    Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"]["const"] == SCHEMA


def test_the_run_covers_the_optional_parts_of_the_schema(result: Result) -> None:
    # Not a vacuous validation: the tiny script yields sync rows, an evaluation step, two loader
    # roles and both merged and lint-only findings.
    assert result["steps"] == {
        "warmup": 1,
        "probe": 1,
        "measured": 3,
        "kept": 2,
        "excluded": {"evaluation": 1},
    }
    assert result["syncs"] and result["syncs"][0]["call"] == ".item()"
    assert {ld["role"] for ld in result["loaders"]} == {"train", "other"}
    assert {f["source"] for f in result["findings"]} >= {"lint", "lint+runtime"}
    assert result["utilisation"]["flops_per_step"]


@pytest.mark.parametrize("name", ["measured", "ended in warm-up"])
def test_real_results_validate(
    runs: dict[str, Result], validator: Draft202012Validator, name: str
) -> None:
    assert _errors(validator, runs[name]) == []
    # What `--json` writes: the same after a round trip through JSON.
    assert _errors(validator, json.loads(json.dumps(runs[name]))) == []


# Whole results kept in the repository: the report's fixtures, the newest corpus run's
# (benchmarks/script_corpus/doctor_corpus.py --results) and results written on a lent GPU
# (gpu-doctor/: CUDA fields this machine never fills). The dated single results beside them in
# benchmarks/results/ are records of what an older doctor wrote and are not walked.
STORED = ROOT / "benchmarks" / "results" / "corpus-doctor"
GPU_STORED = ROOT / "benchmarks" / "results" / "gpu-doctor"


def _stored_results() -> list[Path]:
    files = [*sorted((ROOT / "tests").rglob("*.json")), *sorted(STORED.glob("*.json")),
             *sorted(GPU_STORED.glob("*.json"))]  # fmt: skip
    loaded = [(p, json.loads(p.read_text())) for p in files]  # fixtures may be lists, too
    return [p for p, d in loaded if isinstance(d, dict) and d.get("schema") == SCHEMA]


def test_every_stored_result_validates() -> None:
    stored = _stored_results()
    corpus = [p for p in stored if p.parent == STORED]
    # The corpus run keeps one result per script that wrote one: the walk is not vacuous.
    assert len(corpus) >= 10 and len(stored) > len(corpus), stored
    assert any(p.parent == GPU_STORED for p in stored), "no CUDA-written result walked"
    broken = {p.name: schema_errors(json.loads(p.read_text())) for p in stored}
    assert {name: e for name, e in broken.items() if e} == {}


def test_a_run_that_ended_in_warm_up_has_no_figures(runs: dict[str, Result]) -> None:
    short = runs["ended in warm-up"]
    assert "step_seconds" not in short and "breakdown" not in short
    assert short["settings"] == {}
    assert short["utilisation"]["mfu"] is None


def test_the_result_is_strict_json(result: Result) -> None:
    json.dumps(result, allow_nan=False)


def test_every_finding_names_a_catalogue_technique(result: Result) -> None:
    known = set(ids())
    assert result["findings"]
    assert {f["technique"] for f in result["findings"]} <= known
    assert {p.technique for p in PATTERNS} <= known


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Result], None]:
    def mutate(r: Result) -> None:
        target = r
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _delete(*path: Any) -> Callable[[Result], None]:
    def mutate(r: Result) -> None:
        target = r
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


MUTATIONS: dict[str, tuple[Callable[[Result], None], tuple[Any, ...]]] = {
    "unknown top-level key": (_set(("speedup",), 2.0), ()),
    "a phase missing": (_delete("breakdown", "sync"), ("breakdown",)),
    "an unknown phase": (_set(("breakdown", "io"), {"share": 0.0}), ("breakdown",)),
    "share as a string": (_set(("breakdown", "data", "share"), "5%"), ("breakdown", "data")),
    "share above 1": (_set(("breakdown", "forward", "share"), 1.5), ("breakdown", "forward")),
    "a schema version from elsewhere": (_set(("schema",), "torchpace.doctor/0"), ("schema",)),
    "an unknown pattern skipped": (
        _set(("skipped_patterns", "slow-disk"), "why"),
        ("skipped_patterns",),
    ),
    "an unknown sync call": (_set(("syncs", 0, "call"), "sleep()"), ("syncs", 0, "call")),
    "null peak memory": (_set(("memory", "peak_bytes"), None), ("memory", "peak_bytes")),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_result_that_drifted_fails(
    result: Result, validator: Draft202012Validator, name: str
) -> None:
    mutate, where = MUTATIONS[name]
    drifted = copy.deepcopy(result)
    mutate(drifted)
    errors = list(validator.iter_errors(drifted))
    assert errors, f"{name}: the schema accepted it"
    assert any(tuple(e.absolute_path)[: len(where)] == where for e in errors)


@pytest.mark.parametrize(
    ("source", "field", "value"),
    [
        ("lint", "status", "measured"),  # a lint-only finding is seen running or not
        ("lint", "gain", 0.1),  # lint cannot estimate a gain
        ("lint+runtime", "status", "seen running"),
        ("lint+runtime", "severity", "critical"),
        ("lint", "technique", None),
        ("lint", "confidence", 0.9),  # not a field of a finding
    ],
)
def test_a_finding_that_drifted_fails(
    result: Result, validator: Draft202012Validator, source: str, field: str, value: Any
) -> None:
    drifted = copy.deepcopy(result)
    i = next(i for i, f in enumerate(drifted["findings"]) if f["source"] == source)
    drifted["findings"][i][field] = value
    errors = list(validator.iter_errors(drifted))
    assert errors, f"a {source} finding with {field}={value!r} was accepted"
    assert all(tuple(e.absolute_path)[:2] == ("findings", i) for e in errors)


def test_the_schema_names_the_phases_patterns_and_calls_of_the_code(
    schema: dict[str, Any],
) -> None:
    defs = schema["$defs"]
    assert defs["phase"]["enum"] == list(PHASES)
    assert defs["breakdown"]["required"] == list(PHASES)
    assert set(defs["pattern"]["enum"]) == {p.name for p in PATTERNS}
    assert set(defs["rankPattern"]["enum"]) == set(RANK_PATTERNS)
    assert set(TENSOR_SYNCS.values()) <= set(defs["sync"]["properties"]["call"]["enum"])


def test_the_doc_names_every_field_pattern_and_phase(schema: dict[str, Any]) -> None:
    doc = DOC.read_text()
    named = set(re.findall(r"`([^`\n]+)`", doc))
    missing = {
        "top-level field": set(schema["properties"]) - named,
        "pattern": ({p.name for p in PATTERNS} | set(RANK_PATTERNS)) - named,
        "phase": set(PHASES) - named,
    }
    assert {kind: sorted(m) for kind, m in missing.items() if m} == {}
    assert "doctor-result.schema.json" in doc


# -- every pattern's finding, from planted evidence ----------------------------------------------
def _phases(shares: dict[str, float], step_s: float) -> dict[str, Any]:
    return {
        p: {"share": shares.get(p, 0.0), "seconds": {"median": shares.get(p, 0.0) * step_s}}
        for p in PHASES
    }


def _precision(source: str, to: str) -> dict[str, Any]:
    """A timed precision estimate as doctor/precision.py writes it, list of recurrent layers
    included (the list that, spread into a finding's measured, broke the schema)."""
    return {
        "basis": "this model's own calls, timed in both precisions",
        "from": source,
        "to": to,
        "signatures": 4,
        "timed": 4,
        "failed": 0,
        "flops_share_timed": 1.0,
        "share_of": "FLOPs" if source == "float32" else "calls",
        "from_timed_s": 0.06,
        "to_timed_s": 0.02,
        "cast_timed_s": 0.001,
        "saved_s": 0.039,
        "speedup": 0.06 / 0.021,
        "recurrent_twins": [
            {"module": "LSTM", "calls": 1, "float64_s": 0.01, "float32_s": 0.002},
        ],
        "compute_measured_s": 0.045,
    }


def _planted(device: str, dtype: str) -> Any:
    """Evidence on which every pattern of that device and dtype finds something."""
    from torchpace.doctor.evidence import Evidence

    step_s = 0.1
    shares = {"data": 0.25, "copy": 0.1, "forward": 0.2, "backward": 0.25, "optimizer": 0.15}
    site = {"path": "/x/train.py", "line": 7}
    summary = {
        "steps": {"measured": 12, "kept": 10, "excluded": {"compiled": 2}},
        "step_seconds": {"median": step_s},
        "breakdown": _phases(shares, step_s),
        "device_breakdown": _phases(shares, step_s) if device == "cuda" else None,
        "syncs": [
            {"path": "/x/train.py", "line": 30, "call": ".item()", "per_step": 1.0,
             "every_step": True, "blocked_s_per_step": 0.004 if device == "cuda" else None}
        ],
        "padding": {"share": 0.5, "tokens_per_step": 4096.0, "padded_per_step": 2048.0},
        "data_cpu_fraction": 0.9,
    }  # fmt: skip
    settings = {
        "autocast": [],
        "optimizers": [{"class": "Adam", "fused": False, "foreach": None, "site": site}],
        "conv_model": True,
        "channels_last_input": False,
        "cudnn_benchmark": False,
        "anomaly_detection": True,
        "data_parallel": True,
        "param_dtypes": [dtype],
    }
    loader = {"role": "train", "num_workers": 0, "pin_memory": False, "site": site, "key": 1}
    return Evidence.of(
        summary=summary,
        settings=settings,
        loaders=[loader],
        device=device,
        peaks={"fp32": 50.0, "bf16": 800.0},
        flops_per_step=int(1e12),
        forward_site=("/x/train.py", 20),
        memory={"alloc_retries": 3},
        precision=_precision(dtype, "bfloat16" if dtype == "float32" else "float32"),
        threads=2,
    )


def test_every_patterns_finding_from_planted_evidence_validates(
    result: Result, validator: Draft202012Validator
) -> None:
    from torchpace.doctor.merge import merge
    from torchpace.doctor.patterns import diagnose

    found = []
    for device in ("cpu", "cuda"):
        for dtype in ("float32", "float64"):
            found += diagnose(_planted(device, dtype))[0]
    assert {f.pattern for f in found} == {p.name for p in PATTERNS}
    for finding in found:
        doc = copy.deepcopy(result)
        doc["findings"] = [f.to_json() for f in merge([finding], [], lines_seen=set(), syncs=[])]
        assert _errors(validator, json.loads(json.dumps(doc))) == [], finding.pattern


def test_a_finding_with_a_list_in_measured_is_refused_when_built() -> None:
    from torchpace.doctor.evidence import RuntimeFinding

    with pytest.raises(TypeError, match=r"measured\['param_dtypes'\] is a list"):
        RuntimeFinding(
            "float64-compute", "float32-not-float64", "high", "m", "f", None, 0.5,
            measured={"param_dtypes": ["float64"]},
        )  # fmt: skip
    with pytest.raises(TypeError, match="is a bool"):
        RuntimeFinding("x", "avoid-syncs", "info", "m", "f", None, None, measured={"ok": True})
