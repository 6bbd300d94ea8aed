#!/usr/bin/env bash
# The test suite beside two CPU-bound processes (issue 27's "done when"):
#   A: `make test` RUNS times in a row on a clean clone of this checkout's HEAD;
#   B: the planted-truth, signal and noise-guard tests TRUTH_RUNS times, on another clean clone;
# A and B run at the same time, both beside the two hogs (so each sees more than two).
#   bash benchmarks/suite_under_load.sh [RUNS=5] [TRUTH_RUNS=20]
# Logs and a summary line per run go to $OUT (default /tmp/suite-under-load). A stops at its first
# failure ("in a row"). Results of a run: benchmarks/results/*-suite-under-load.json.
set -u
RUNS=${1:-5}
TRUTH_RUNS=${2:-20}
OUT=${OUT:-/tmp/suite-under-load}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
python3 -c "while True: pass" & H1=$!
python3 -c "while True: pass" & H2=$!
trap 'kill $H1 $H2 2>/dev/null' EXIT
echo "hogs $H1 $H2; $(git -C "$ROOT" log --oneline -1 | cut -c1-8); $(date +%T)" | tee "$OUT/summary.txt"
for side in a b; do rm -rf "$OUT/clone-$side" && git clone -q "$ROOT" "$OUT/clone-$side"; done
(
  cd "$OUT/clone-a" || exit 1
  for i in $(seq 1 "$RUNS"); do
    s=$(date +%s)
    make test > "$OUT/a.$i.log" 2>&1; rc=$?
    echo "A run $i: rc=$rc $(( $(date +%s) - s )) s; $(grep -E '^=+ .*(passed|failed)' "$OUT/a.$i.log" | tail -1); load $(cut -d' ' -f1-3 /proc/loadavg)"
    [ $rc = 0 ] || break
  done
) >> "$OUT/summary.txt" 2>&1 &
A=$!
(
  cd "$OUT/clone-b" || exit 1
  make .venv/.installed > "$OUT/b.setup.log" 2>&1 || exit 1
  for i in $(seq 1 "$TRUTH_RUNS"); do
    s=$(date +%s)
    .venv/bin/python -m pytest -q -p no:cacheprovider tests/doctor/test_truth.py \
      tests/test_signals.py tests/tune/test_noise_guard.py > "$OUT/b.$i.log" 2>&1; rc=$?
    echo "B run $i: rc=$rc $(( $(date +%s) - s )) s; $(tail -1 "$OUT/b.$i.log"); load $(cut -d' ' -f1-3 /proc/loadavg)"
  done
) >> "$OUT/summary.txt" 2>&1 &
B=$!
wait $A $B
echo "done $(date +%T)" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
