#!/usr/bin/env python
"""Raw, unjudged findings of ``torchpace lint`` on the second corpus (repos.json sets new-change
and new-eval, then change-2 and new-rules), run as score.py runs it: ``python -m torchpace lint
. --format json`` from each repository's folder in the materialised corpus, default rules and
settings.

    python benchmarks/realworld/make_corpus.py --mirror /work/.mirror --only OWNER/NAME ...
    python benchmarks/realworld/new-corpus-raw/collect_raw.py [--corpus .corpus/lint]

Writes new-corpus-raw/<owner+name>.json (a list of findings: code, name, path, cell, line,
end_line, col, text = the stripped source line as score.py reads it, message) and prints the
per-rule table used in SUMMARY.md. Set PYTHONPATH to run a given torchpace source tree.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REALWORLD = HERE.parent
ROOT = REALWORLD.parent.parent
sys.path.insert(0, str(REALWORLD))

from score import source_line  # noqa: E402

NEW_SETS = ("new-change", "new-eval", "change-2", "new-rules")


def lint(corpus: Path, dirname: str) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "torchpace", "lint", ".", "--format", "json"],
        cwd=corpus / dirname,
        capture_output=True,
        text=True,
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"lint failed on {dirname} (exit {proc.returncode}):\n{proc.stderr}")
    rows = []
    for f in json.loads(proc.stdout):
        path = f["path"].removeprefix("./")
        rows.append(
            {
                "code": f["code"],
                "name": f["name"],
                "path": path,
                "cell": f["cell"],
                "line": f["line"],
                "end_line": f["end_line"],
                "col": f["col"],
                "text": source_line(corpus, dirname, path, f["cell"], f["line"]),
                "message": f["message"],
            }
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", type=Path, default=ROOT / ".corpus" / "lint")
    ap.add_argument("--set", action="append", default=[], help="only these sets (repeatable)")
    args = ap.parse_args()
    sets = tuple(args.set) or NEW_SETS
    repos = [r for r in json.loads((REALWORLD / "repos.json").read_text()) if r["set"] in sets]
    manifest = {m["repo"]: m for m in json.loads((args.corpus / "MANIFEST.json").read_text())}
    table = []
    codes: set[str] = set()
    for r in repos:
        dirname = r["repo"].replace("/", "+")
        m = manifest.get(r["repo"])
        if m is None or m["commit"] != r["commit"]:
            raise SystemExit(f"{r['repo']}@{r['commit']} is not materialised in {args.corpus}")
        rows = lint(args.corpus, dirname)
        (HERE / f"{dirname}.json").write_text(json.dumps(rows, indent=1) + "\n")
        per = collections.Counter(f["code"] for f in rows)
        codes |= set(per)
        table.append((r, len(m["files"]), len({f["path"] for f in rows}), per))
        print(f"{r['repo']}: {len(rows)} findings", flush=True)
    cols = sorted(codes)
    head = ["repo", "set", "commit", "files", "files with findings", "findings", *cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r, nfiles, nwith, per in sorted(table, key=lambda t: (t[0]["set"], t[0]["repo"].lower())):
        lines.append(
            "| "
            + " | ".join(
                [
                    r["repo"],
                    r["set"],
                    r["commit"][:12],
                    str(nfiles),
                    str(nwith),
                    str(sum(per.values())),
                ]
                + [str(per.get(c, 0)) for c in cols]
            )
            + " |"
        )
        for key in (r["set"], "all"):
            totals[key].update(per)
            totals[key]["_files"] += nfiles
    for key in (*sets, "all"):
        t = totals[key]
        lines.append(
            "| "
            + " | ".join(
                [
                    f"**{key}**",
                    "",
                    "",
                    str(t["_files"]),
                    "",
                    str(sum(v for k, v in t.items() if k != "_files")),
                ]
                + [str(t.get(c, 0)) for c in cols]
            )
            + " |"
        )
    where = subprocess.run(
        [sys.executable, "-c", "import torchpace; print(torchpace.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"\ntorchpace imported from {where}\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
