"""The lint corpus's scorer (benchmarks/realworld/score.py) matches each judgement to the right
finding: a finding judged at its own line keeps its verdict when another judgement of the same
text, whose line no longer reports, is nearer in the file's order of judgements."""

from __future__ import annotations

import collections
import importlib.util
import json
import sys
from pathlib import Path

SCORE = Path(__file__).resolve().parents[1] / "benchmarks" / "realworld" / "score.py"


def _score_module():
    spec = importlib.util.spec_from_file_location("realworld_score", SCORE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["realworld_score"] = module
    spec.loader.exec_module(module)
    return module


def _judged(line: int, verdict: str) -> dict:
    text = "attn = (q @ k) * self.scale"
    return {"path": "m.py", "cell": None, "line": line, "code": "TP307", "text": text,
            "verdict": verdict, "cause": None, "why": ""}  # fmt: skip


def test_a_judgement_at_the_findings_own_line_wins_over_a_stale_one_of_the_same_text() -> None:
    score = _score_module()
    text = "attn = (q @ k) * self.scale"
    found = [score.Found("r", "m.py", None, 360, 360, "TP307", text)]
    # the judgement at 217 comes first in the file, and its finding is gone
    judged = {"r": {"findings": [_judged(217, "false"), _judged(360, "debatable")], "patterns": []}}
    counts = score.score(found, judged)["counts"]
    assert counts["all"]["debatable"] == 1 and counts["all"]["false"] == 0
    # a finding that moved (an edit above it) still takes its old judgement, the nearest one
    moved = [score.Found("r", "m.py", None, 365, 365, "TP307", text)]
    counts = score.score(moved, {"r": {"findings": [_judged(360, "true")], "patterns": []}})[
        "counts"
    ]
    assert counts["all"]["true"] == 1


def test_each_repository_of_the_corpus_is_listed_once() -> None:
    # A repository in two sets would be scored twice and its judged file shared between a set
    # the rules were changed against and one that measures them (session 13 nearly did so).
    listed = json.loads((SCORE.parent / "repos.json").read_text())
    repos = listed["repos"] if isinstance(listed, dict) else listed
    twice = [r for r, n in collections.Counter(r["repo"].lower() for r in repos).items() if n > 1]
    assert twice == []
    judged = {p.stem.lower() for p in (SCORE.parent / "judged").glob("*.json")}
    assert judged <= {r["repo"].replace("/", "+").lower() for r in repos}
