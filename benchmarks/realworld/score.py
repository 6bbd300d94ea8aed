#!/usr/bin/env python
"""Precision and recall of ``torchpace lint`` on the real-world corpus, against judgements by hand.

    make bench-lint-realworld            # materialises the corpus, then runs this
    python benchmarks/realworld/score.py --corpus .corpus/lint [--json OUT] [--save-run]

``judged/<owner+name>.json`` holds, per repository, every finding of a judged run with its
verdict (true / false / debatable, a cause and one line why) and the recall set: slow patterns
listed by hand in training loops, each with the rule code that should report it.

Patterns for rules that are off by default (TP306, TP405) are listed but left out of recall: the
default run does not look for them, and a user who selects them gets them. Repositories are in
one of two sets (``repos.json``): *tuned*, the ones the rules were changed against, and
*held-out*, judged once after the changes, which say how the rules do on code they were not
fitted to; each set gets its own row. A current finding is
matched to a judgement by path, cell, code and the stripped source line
(the nearest such line, so that an edit elsewhere in the file does not lose the match); a
pattern counts as found when a current finding with its code covers its line (or names its
source text in the same file). Precision is true / (true + false), debatable left out; recall is
found / listed. Findings with no judgement yet are listed as "unjudged" and left out of
precision until someone judges them; ``last-run.json`` (``--save-run``) keeps the previous run's
keys, so the listing shows what appeared and what went away since.
"""

from __future__ import annotations

import argparse
import ast
import collections
import datetime
import json
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))

from _provenance import git_state  # noqa: E402

JUDGED = HERE / "judged"
# "tuned": the repositories the rules were changed against; "held-out": judged once, after.
SETS = {
    r["repo"].replace("/", "+"): r.get("set", "tuned")
    for r in json.loads((HERE / "repos.json").read_text())
}
LAST_RUN = HERE / "last-run.json"


@dataclass(frozen=True)
class Found:
    repo: str
    path: str
    cell: int | None
    line: int
    end_line: int
    code: str
    text: str
    col: int | None = None

    def key(self) -> str:
        cell = "" if self.cell is None else f"cell {self.cell}:"
        return f"{self.repo}/{self.path}:{cell}{self.line}:{self.code}"


def source_line(corpus: Path, repo: str, path: str, cell: int | None, line: int) -> str:
    file = corpus / repo / path
    if cell is not None:
        cells = json.loads(file.read_text(encoding="utf-8")).get("cells", [])
        src = cells[cell - 1].get("source", "") if 0 < cell <= len(cells) else ""
        lines = ("".join(src) if isinstance(src, list) else src).splitlines()
    else:
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def run_lint(corpus: Path, repos: list[str]) -> list[Found]:
    """``torchpace lint --format json`` over each repository, as a user runs it from its root."""
    found: list[Found] = []
    for repo in repos:
        proc = subprocess.run(
            [sys.executable, "-m", "torchpace", "lint", ".", "--format", "json"],
            cwd=corpus / repo,
            capture_output=True,
            text=True,
        )
        if proc.returncode not in (0, 1) and not _only_unparsable(corpus / repo, proc.stderr):
            raise SystemExit(f"lint failed on {repo} (exit {proc.returncode}):\n{proc.stderr}")
        for f in json.loads(proc.stdout):
            path = f["path"].removeprefix("./")
            text = source_line(corpus, repo, path, f["cell"], f["line"])
            found.append(
                Found(repo, path, f["cell"], f["line"], f["end_line"], f["code"], text, f["col"])
            )
    return found


def _only_unparsable(root: Path, stderr: str) -> bool:
    """Lint's exit 2 says some file could not be linted: acceptable here only when each such
    file is one Python itself cannot parse (a repository's own syntax error, as
    p-christ's ``results/HRL_Taxi_Experiments.py``), or a notebook that is not valid JSON
    (FastSpeech2's ``demo_fastspeech2.ipynb``, a comma missing), so the other files' findings
    stand."""
    errors = [
        line.partition(": error: ")[0]
        for line in stderr.splitlines()
        if ": error: " in line and not line.startswith("torchpace:")
    ]
    if not errors:
        return False
    for path in errors:
        try:
            data = (root / path).read_bytes()
            if path.endswith(".ipynb"):
                json.loads(data)
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ast.parse(data)
        except (SyntaxError, ValueError):
            continue  # json.JSONDecodeError is a ValueError
        except OSError:
            return False
        return False
    return True


def _match(
    item: dict[str, Any],
    repo: str,
    pool: dict[tuple, list[Found]],
    used: set[int],
    *,
    exact: bool = False,
) -> Found | None:
    """The unused current finding with the item's path, cell, code and text, nearest its line
    (and at its column, where the judgement gives one: two findings of a rule on one line);
    ``exact``: only one at its line, with its text."""
    cands = [
        f
        for f in pool.get((repo, item["path"], item.get("cell"), item["code"]), [])
        if id(f) not in used
        and (f.text == item["text"] or f.line == item["line"])
        and (item.get("col") is None or f.col == item["col"])
        and (not exact or (f.line == item["line"] and f.text == item["text"]))
    ]
    if not cands:
        return None
    return min(cands, key=lambda f: (f.text != item["text"], abs(f.line - item["line"])))


def score(found: list[Found], judged: dict[str, dict[str, Any]]) -> dict[str, Any]:
    pool: dict[tuple, list[Found]] = collections.defaultdict(list)
    for f in found:
        pool[(f.repo, f.path, f.cell, f.code)].append(f)
    used: set[int] = set()
    verdicts: dict[int, dict[str, Any]] = {}
    # Judgements at their finding's very line first: a judgement whose line no longer reports
    # must not take, as the nearest with the same text, a finding judged at its own line (two
    # attention layers of one file, both `attn = (q @ k) * self.scale`).
    placed: set[int] = set()
    for exact in (True, False):
        for repo, data in judged.items():
            for item in data["findings"]:
                if id(item) in placed:
                    continue
                hit = _match(item, repo, pool, used, exact=exact)
                if hit is not None:
                    used.add(id(hit))
                    placed.add(id(item))
                    verdicts[id(hit)] = item
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    unjudged = []
    for f in found:
        item = verdicts.get(id(f))
        verdict = item["verdict"] if item else "unjudged"
        for group in ("all", f"rule {f.code}", f"repo {f.repo}", f"set {SETS.get(f.repo)}"):
            counts[group][verdict] += 1
        if item is None:
            unjudged.append(f)
    missed = []
    opt_in = _off_by_default()
    for repo, data in judged.items():
        for pat in data.get("patterns", []):
            code = pat["code"]
            if code in opt_in:
                counts["opt-in rules (not in recall)"]["listed"] += 1
                continue
            hit = any(
                f.code == code
                and f.path == pat["path"]
                and (f.line <= pat["line"] <= f.end_line or (pat["text"] and f.text == pat["text"]))
                for f in pool.get((repo, pat["path"], pat.get("cell"), code), [])
            )
            for group in ("all", f"rule {code}", f"repo {repo}", f"set {SETS.get(repo)}"):
                counts[group]["listed"] += 1
                counts[group]["found"] += hit
            if not hit:
                missed.append({"repo": repo, **pat})
    false_causes = collections.Counter(
        verdicts[id(f)].get("cause") or "?"
        for f in found
        if id(f) in verdicts and verdicts[id(f)]["verdict"] == "false"
    )
    judged_now = [(f, verdicts[id(f)]) for f in found if id(f) in verdicts]
    return {
        "counts": counts,
        "unjudged": unjudged,
        "missed": missed,
        "causes": false_causes,
        "judged": judged_now,
    }


def _off_by_default() -> set[str]:
    from torchpace.lint import RULES

    return {r.code for r in RULES if not r.default}


def ratio(num: int, den: int) -> str:
    return f"{100 * num / den:5.1f}%" if den else "    –"


def table(counts: dict[str, collections.Counter]) -> str:
    rows = [
        "group                                      findings true false debat unjudg  precision"
        "  patterns found  recall"
    ]
    rules = sorted(k for k in counts if k.startswith("rule "))
    order = ["all", *rules, *sorted(k for k in counts if k.startswith("repo "))]
    order += sorted(k for k in counts if k.startswith("set "))
    order += [k for k in counts if k.startswith("opt-in")]
    for group in order:
        c = counts[group]
        n = c["true"] + c["false"] + c["debatable"] + c["unjudged"]
        rows.append(
            f"{group:42s} {n:8d} {c['true']:4d} {c['false']:5d} {c['debatable']:5d} "
            f"{c['unjudged']:6d}     {ratio(c['true'], c['true'] + c['false'])}"
            f"  {c['listed']:8d} {c['found']:5d}  {ratio(c['found'], c['listed'])}"
        )
    return "\n".join(rows)


def load_judged(only: list[str]) -> dict[str, dict[str, Any]]:
    judged = {}
    for file in sorted(JUDGED.glob("*.json")):
        data = json.loads(file.read_text())
        if not only or file.stem in only:
            judged[file.stem] = data
    return judged


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--corpus", type=Path, default=ROOT / ".corpus" / "lint")
    ap.add_argument("--only", action="append", default=[], help="owner+name (repeatable)")
    ap.add_argument("--json", type=Path, help="write the figures and lists here")
    ap.add_argument("--save-run", action="store_true", help=f"update {LAST_RUN.name}")
    ap.add_argument("--show", type=int, default=40, help="list at most this many of each kind")
    ap.add_argument(
        "--list",
        choices=("true", "false", "debatable"),
        action="append",
        default=[],
        help="also list the current findings judged so, with the judge's reason",
    )
    args = ap.parse_args(argv)
    judged = load_judged(args.only)
    if not judged:
        raise SystemExit(f"no judgements in {JUDGED}")
    missing = [r for r in judged if not (args.corpus / r).is_dir()]
    if missing:
        raise SystemExit(
            f"{', '.join(missing)} not in {args.corpus}: run "
            "benchmarks/realworld/make_corpus.py first"
        )
    found = run_lint(args.corpus, list(judged))
    result = score(found, judged)
    print(table(result["counts"]))
    print("\nfalse findings by cause:", dict(result["causes"].most_common()))
    keys = sorted(f.key() for f in found)
    if LAST_RUN.is_file():
        last = set(json.loads(LAST_RUN.read_text())["findings"])
        new, gone = sorted(set(keys) - last), sorted(last - set(keys))
        print(f"\nsince the last saved run: {len(new)} new, {len(gone)} gone")
        for k in new[: args.show]:
            print(f"  + {k}")
        for k in gone[: args.show]:
            print(f"  - {k}")
    for verdict in args.list:
        rows = [(f, j) for f, j in result["judged"] if j["verdict"] == verdict]
        print(f"\n{verdict} findings: {len(rows)}")
        for f, j in rows:
            print(f"  {f.key()}  [{j.get('cause')}] {j['why'][:110]}")
    print(f"\nunjudged findings: {len(result['unjudged'])}")
    for f in result["unjudged"][: args.show]:
        print(f"  ? {f.key()}  {f.text[:70]}")
    print(f"\nmissed patterns: {len(result['missed'])}")
    for m in result["missed"][: args.show]:
        print(f"  ! {m['repo']}/{m['path']}:{m['line']}:{m['code']}  {m['why'][:70]}")
    if args.save_run:
        LAST_RUN.write_text(json.dumps({"findings": keys}, indent=0) + "\n")
    if args.json:
        repos = json.loads((HERE / "repos.json").read_text())
        args.json.write_text(
            json.dumps(
                {
                    "environment": {
                        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                        "torchpace_git": git_state(),
                        "corpus": {r["repo"]: r["commit"] for r in repos},
                    },
                    "counts": {k: dict(v) for k, v in result["counts"].items()},
                    "false_causes": dict(result["causes"]),
                    "unjudged": [f.__dict__ for f in result["unjudged"]],
                    "missed": result["missed"],
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
