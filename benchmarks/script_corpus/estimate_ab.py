"""Hand A/B of doctor estimates no plan can apply: the script as written against a copy with only
the finding's change made by hand, both under ``torchpace doctor`` (the same instruments on both
sides), rounds alternating. The speed-up is the ratio of the doctor's median step times.

    python benchmarks/script_corpus/estimate_ab.py --variant time-sequence-prediction/float32
    python benchmarks/script_corpus/estimate_ab.py --variant mingpt-adder/cached-samples

Each variant is a list of exact substitutions in one file of the materialised corpus
(``.corpus/scripts``, see make_corpus.py); each must match exactly once, so a changed upstream
fails loudly instead of measuring something else. The copy is written beside the original
(``<name>_ab.py``) so that its relative imports and data paths hold.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from run_corpus import entry_env, load_entries

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / ".corpus" / "scripts"

VARIANTS: dict[str, dict[str, Any]] = {
    # float64-compute -> float32-not-float64: the model, its zero states and the data in float32.
    "time-sequence-prediction/float32": {
        "entry": "time-sequence-prediction",
        "file": "train.py",
        "subs": [
            ("dtype=torch.double", "dtype=torch.float", 4),
            ("seq.double()", "seq.float()", 1),
            *[
                (
                    f"= torch.from_numpy(data[{rows}, {cols}])",
                    f"= torch.from_numpy(data[{rows}, {cols}]).float()",
                    1,
                )
                for rows, cols in (("3:", ":-1"), ("3:", "1:"), (":3", ":-1"), (":3", "1:"))
            ],
        ],
        # 2 LBFGS steps are fewer than warm-up + probe: 5 steps, 1 warm-up, 2 measured
        "args": ["--steps", "5"],
        "doctor": ["--warmup", "1", "--steps", "2", "--first-step-timeout", "300"],
    },
    # input-bound with 4 workers -> fast-input-format: every sample made once, up front.
    "mingpt-adder/cached-samples": {
        "entry": "mingpt-adder",
        "file": "adder.py",
        "subs": [
            ("    def __getitem__(self, idx):", "    def _make(self, idx):", 1),
            (
                "        self.ixes = perm[:num_test] if split == 'test' else perm[num_test:]\n",
                "        self.ixes = perm[:num_test] if split == 'test' else perm[num_test:]\n"
                "        self._made = [self._make(i) for i in range(len(self))]\n\n"
                "    def __getitem__(self, idx):\n"
                "        return self._made[idx]\n",
                1,
            ),
        ],
        "args": None,  # the entry's own
        "doctor": ["--warmup", "3", "--steps", "40"],
    },
}


def make_variant(spec: dict[str, Any], entry: dict[str, Any]) -> Path:
    """The entry's script with the substitutions made, written beside it."""
    original = CORPUS / entry["script"]
    if original.name != spec["file"]:
        raise SystemExit(f"{spec['entry']}: changes {spec['file']}, not the script {original}")
    text = original.read_text()
    for old, new, count in spec["subs"]:
        found = text.count(old)
        if found != count:
            raise SystemExit(f"{original}: {old!r} found {found} times, expected {count}")
        text = text.replace(old, new)
    copy = original.with_name(original.stem + "_ab.py")
    copy.write_text(text)
    return copy


def doctor_step(script: Path, args: list[str], doctor: list[str], entry: dict[str, Any]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "doctor.json"
        cmd = [sys.executable, "-m", "torchpace", "doctor", "--no-lint", *doctor]
        cmd += ["--json", str(out), str(script), "--", *args]
        done = subprocess.run(
            cmd,
            cwd=CORPUS / entry["cwd"],
            env=entry_env(entry, CORPUS),
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if not out.exists():
            raise SystemExit(f"no result from {' '.join(cmd)}:\n{done.stderr[-3000:]}")
        result = json.loads(out.read_text())
    return float(result["step_seconds"]["median"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the rounds here")
    a = ap.parse_args()
    spec = VARIANTS[a.variant]
    (entry,) = load_entries([spec["entry"]])
    original = CORPUS / entry["script"]
    script_b = make_variant(spec, entry)
    args = spec["args"] if spec["args"] is not None else list(entry["args"])
    rounds = []
    for i in range(a.rounds):
        order = [("as written", original), ("changed", script_b)]
        if i % 2:
            order.reverse()
        got = {name: doctor_step(path, args, spec["doctor"], entry) for name, path in order}
        ratio = got["as written"] / got["changed"]
        rounds.append({**got, "speedup": ratio})
        print(
            f"round {i + 1}: as written {got['as written'] * 1e3:.1f} ms, changed "
            f"{got['changed'] * 1e3:.1f} ms, speed-up {ratio:.3f}",
            flush=True,
        )
    ratios = [r["speedup"] for r in rounds]
    spread = f"[{min(ratios):.3f}-{max(ratios):.3f}]"
    print(f"{a.variant}: speed-up {statistics.median(ratios):.3f} {spread}")
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {
                    "variant": a.variant,
                    "entry": entry["name"],
                    "commit": entry["commit"],
                    "subs": spec["subs"],
                    "doctor": spec["doctor"],
                    "args": args,
                    "rounds": rounds,
                    "speedup_median": statistics.median(ratios),
                    "torchpace_git": subprocess.run(
                        ["git", "rev-parse", "--short", "HEAD"],
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                    ).stdout.strip(),
                    "loadavg": os.getloadavg(),
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
