#!/usr/bin/env bash
# bench/profile_overhead.sh [BUILD] — what profiling costs: bench_train's training rate
# (workload A, batch 128) without and with BENCH_PROFILE=1 (every step profiled and traced,
# as `kerac train --profile` does for its steps), alternating off, on, off, on, ... for
# ROUNDS rounds (default 5), BENCH_STEPS steps each (default 40), no inference. Prints the
# JSON lines, then the median of each and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
cmake --build "$B" --target bench_train >/dev/null
export BENCH_STEPS="${BENCH_STEPS:-40}" BENCH_WARMUP="${BENCH_WARMUP:-5}" BENCH_INFER_REPS=0
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
for round in $(seq "${ROUNDS:-5}"); do
  for p in 0 1; do
    BENCH_PROFILE=$p KERAC_NUM_THREADS=2 OMP_NUM_THREADS=2 "$B/bench/bench_train" | tee -a "$OUT"
  done
done
/usr/bin/python3 - "$OUT" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
med = {p: statistics.median(r["train_images_per_second"] for r in runs if r["profile"] == p) for p in (0, 1)}
print(f"median train images/s: profiling off {med[0]:.1f}, on {med[1]:.1f}; on / off = {med[1] / med[0]:.3f}")
PY
