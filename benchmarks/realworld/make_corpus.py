#!/usr/bin/env python
"""Materialise the lint corpus: public training code at pinned commits (``repos.json``).

Only Python files and notebooks are taken (plus any file a path names exactly), each written
byte for byte from its git blob at the pinned commit, with the blob id re-checked. Nothing is
edited and nothing is run.

    python benchmarks/realworld/make_corpus.py --out .corpus/lint                 # git fetch
    python benchmarks/realworld/make_corpus.py --mirror /work/.mirror             # local mirrors

OUT gets one folder per repository, named ``owner+name``, and ``MANIFEST.json`` (every file with
its blob id). A path of ``""`` takes the whole repository; a trailing ``/`` takes a folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "script_corpus"))

from make_corpus import materialise_repo, repo_dirname, write_manifest  # noqa: E402

REPOS = json.loads((HERE / "repos.json").read_text())
SUFFIXES = (".py", ".ipynb")
# Configuration files, copied where the mirror has them: what a project's own files name (a
# class a YAML config builds) is part of what lint reads of the project (lint.unreferenced).
CONTEXT = (".yaml", ".yml", ".json", ".toml", ".cfg")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, default=HERE.parent.parent / ".corpus" / "lint")
    ap.add_argument("--mirror", type=Path, default=None, help="bare mirrors named owner+name")
    ap.add_argument("--only", action="append", default=[], help="owner/name (repeatable)")
    args = ap.parse_args(argv)
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    known = {r["repo"]: r for r in REPOS}
    for name in args.only:
        if name not in known:
            raise SystemExit(f"unknown repository {name}; known: {', '.join(known)}")
    manifest = []
    for entry in REPOS:
        if args.only and entry["repo"] not in args.only:
            continue
        print(f"[corpus] {entry['repo']}@{entry['commit'][:12]}", flush=True)
        spec = {"commit": entry["commit"], "files": entry["paths"]}
        manifest.append(
            materialise_repo(
                entry["repo"], spec, out, args.mirror, out / ".git-cache", SUFFIXES, CONTEXT
            )
        )
        # Each folder stands for a checkout, whose top is its repository's: lint reads a
        # project up to its git root (lint.unreferenced), not up to this one's.
        (out / repo_dirname(entry["repo"]) / ".git").mkdir(exist_ok=True)
    write_manifest(out, manifest)
    print(f"[corpus] {sum(len(m['files']) for m in manifest)} files in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
