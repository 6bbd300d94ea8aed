"""Hand A/B of doctor estimates no plan can apply: the script as written against a copy with only
the finding's change made by hand, both under ``torchpace doctor`` (the same instruments on both
sides), rounds alternating. The speed-up is the ratio of the doctor's median step times; the
estimate is the gain of the variant's finding (by technique) in the run of the script as written.

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
        "technique": "float32-not-float64",
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
        "technique": "fast-input-format",
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
    # input-bound, workers would not shorten it -> fast-input-format: the training images made
    # into tensors once, before the loop (a TensorDataset), instead of per sample per epoch.
    "vae-mnist/cached-samples": {
        "entry": "vae-mnist",
        "technique": "fast-input-format",
        "file": "main.py",
        "subs": [
            (
                "train_loader = torch.utils.data.DataLoader(\n"
                "    datasets.MNIST('../data', train=True, download=True,\n"
                "                   transform=transforms.ToTensor()),\n",
                "def _made_once(ds):\n"
                "    xs, ys = zip(*(ds[i] for i in range(len(ds))))\n"
                "    return torch.utils.data.TensorDataset(torch.stack(xs), torch.tensor(ys))\n"
                "\n"
                "train_loader = torch.utils.data.DataLoader(\n"
                "    _made_once(datasets.MNIST('../data', train=True, download=True,\n"
                "                   transform=transforms.ToTensor())),\n",
                1,
            ),
        ],
        "args": None,
        "doctor": ["--warmup", "5", "--steps", "60"],
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


def estimated_speedup(result: dict[str, Any], technique: str) -> float | None:
    """The speed-up the run's finding for ``technique`` promises (its gain is the share of the
    step saved; a gain withheld on a loaded machine still counts here), None without one."""
    for finding in result["findings"]:
        if finding.get("technique") == technique:
            gain = finding["gain"]
            gain = finding["measured"].get("withheld_gain") if gain is None else gain
            return None if gain is None else 1 / (1 - gain)
    return None


def doctor_run(
    script: Path, args: list[str], doctor: list[str], entry: dict[str, Any]
) -> dict[str, Any]:
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
        return dict(json.loads(out.read_text()))


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
        results = {name: doctor_run(path, args, spec["doctor"], entry) for name, path in order}
        got = {name: float(r["step_seconds"]["median"]) for name, r in results.items()}
        ratio = got["as written"] / got["changed"]
        promised = estimated_speedup(results["as written"], spec["technique"])
        rounds.append({**got, "speedup": ratio, "estimated": promised})
        print(
            f"round {i + 1}: as written {got['as written'] * 1e3:.1f} ms, changed "
            f"{got['changed'] * 1e3:.1f} ms, speed-up {ratio:.3f}, estimated "
            f"{'none' if promised is None else f'{promised:.3f}'}",
            flush=True,
        )
    ratios = [r["speedup"] for r in rounds]
    estimates = [r["estimated"] for r in rounds if r["estimated"] is not None]
    spread = f"[{min(ratios):.3f}-{max(ratios):.3f}]"
    estimated = statistics.median(estimates) if estimates else None
    print(
        f"{a.variant}: speed-up {statistics.median(ratios):.3f} {spread}; {spec['technique']} "
        f"estimated {'none' if estimated is None else f'{estimated:.3f}'}"
    )
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
                    "technique": spec["technique"],
                    "estimated_median": estimated,
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
