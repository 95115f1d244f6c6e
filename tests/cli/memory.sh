#!/usr/bin/env bash
# Memory options of the CLI: the planned breakdown in `kerac summary --batch-size`, and
# training with --batch-size auto / --grad-accum / --memory-limit (the CPU stands in for a
# small GPU: the limit is enforced by the allocator).
set -euo pipefail
kerac=${1:?usage: memory.sh KERAC}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# --- the plan, printed by summary
out=$("$kerac" summary --batch-size 128)
for row in "parameters" "gradients" "optimizer state" "activations kept for backward" \
           "activation gradients" "workspace" "arena: the three above after reuse" "device total (peak)" \
           "host: loader ring"; do
  echo "$out" | grep -q "$row" || { echo "$out"; fail "summary --batch-size: no '$row' row"; }
done
echo "$out" | grep -q "batch size 128, optimizer adam, on cpu" || { echo "$out"; fail "summary: no header line"; }
small=$("$kerac" summary --batch-size 32 | awk '/device total/ {print $4, $5}')
big=$("$kerac" summary --batch-size 256 | awk '/device total/ {print $4, $5}')
[ "$small" != "$big" ] || fail "the plan does not grow with the batch ($small vs $big)"
"$kerac" summary --grad-accum 4 >/dev/null 2>&1 && fail "--grad-accum without --batch-size must be a usage error"
set +e; "$kerac" summary --grad-accum 4 >/dev/null 2>&1; rc=$?; set -e
[ "$rc" = 1 ] || fail "expected exit 1, got $rc"
# --- training under a memory limit, on a small generated dataset
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then echo "SKIP: training part needs /usr/bin/python3 with numpy"; exit 77; fi
"$py" - "$tmp" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(0)
x = rng.integers(0, 256, size=(512, 28, 28), dtype=np.uint8)
y = (np.arange(512) % 10).astype(np.int64)
np.save(sys.argv[1] + "/x.npy", x); np.save(sys.argv[1] + "/y.npy", y)
PY
data="npy:$tmp/x.npy,$tmp/y.npy"

# host memory: .npy images are memory-mapped, only the labels are held
out=$("$kerac" summary --data "$data")
echo "$out" | grep -q "memory-mapped (read on demand) *392.00 KiB" || { echo "$out"; fail "npy images are not reported as mapped"; }
echo "$out" | grep -q "held in memory *2.00 KiB" || { echo "$out"; fail "held bytes are not the labels only"; }

# auto batch size under a limit: one info line with the choice and the reason
"$kerac" train --data "$data" --epochs 1 --batch-size auto --memory-limit 40M --json >"$tmp/auto.out" 2>"$tmp/auto.err" ||
  { cat "$tmp/auto.err"; fail "train --batch-size auto exited non-zero"; }
grep -q "auto batch size [0-9]*: needs .* MiB of 40.0 MiB usable (memory limit 40.0 MiB)" "$tmp/auto.err" ||
  { cat "$tmp/auto.err"; fail "no auto batch size line"; }
bs=$(sed -n 's/.*auto batch size \([0-9]*\):.*/\1/p' "$tmp/auto.err")
[ $((bs % 8)) = 0 ] && [ "$bs" -ge 8 ] || fail "auto batch size $bs is not a positive multiple of 8"
# that size is the largest whose plan fits: the next multiple of 8 is over the limit
next=$((bs + 8))
plan_next=$("$kerac" summary --batch-size "$next" | awk '/device total/ {print $4, $5}')
case "$plan_next" in *MiB) awk -v v="${plan_next% MiB}" 'BEGIN { exit !(v > 40.0) }' ||
  fail "batch $next plans $plan_next, which fits 40M: auto should have picked it";; esac

# out-of-memory recovery: 13.5M fits micro-batch 32 (x4) but not 64 (x2) or 128
"$kerac" train --data "$data" --epochs 1 --batch-size 128 --memory-limit 13.5M --json >"$tmp/oom.out" 2>"$tmp/oom.err" ||
  { cat "$tmp/oom.err"; fail "training with OOM recovery exited non-zero"; }
[ "$(grep -c 'out of memory at micro-batch' "$tmp/oom.err")" = 2 ] || { cat "$tmp/oom.err"; fail "expected two recovery warnings"; }
grep -q "continuing with micro-batch 32 x 4 accumulation steps, batch size 128 unchanged" "$tmp/oom.err" ||
  { cat "$tmp/oom.err"; fail "no 32 x 4 warning"; }
# recovery off: the same run stops with exit 3
set +e; "$kerac" train --data "$data" --epochs 1 --batch-size 128 --memory-limit 13.5M --no-oom-recovery >/dev/null 2>"$tmp/off.err"; rc=$?; set -e
[ "$rc" = 3 ] || fail "--no-oom-recovery: expected exit 3, got $rc"
grep -q "memory limit" "$tmp/off.err" || fail "--no-oom-recovery: message does not name the memory limit"

# a limit too small for micro-batch 1: a clear error, exit 3
set +e; "$kerac" train --data "$data" --epochs 1 --batch-size 16 --memory-limit 720K >/dev/null 2>"$tmp/tiny.err"; rc=$?; set -e
[ "$rc" = 3 ] || { cat "$tmp/tiny.err"; fail "tiny limit: expected exit 3, got $rc"; }
grep -q "out of memory even at micro-batch 1" "$tmp/tiny.err" || { cat "$tmp/tiny.err"; fail "tiny limit: unexpected message"; }

# gradient accumulation is accepted and reported
"$kerac" train --data "$data" --epochs 1 --batch-size 64 --grad-accum 4 >"$tmp/acc.out" 2>&1 || fail "--grad-accum run failed"
grep -q "batch size 64 (4 micro-batches)" "$tmp/acc.out" || { cat "$tmp/acc.out"; fail "no accumulation in the header"; }
set +e; "$kerac" train --data "$data" --memory-limit 12Q >/dev/null 2>&1; rc=$?; set -e
[ "$rc" = 1 ] || fail "a bad --memory-limit must be a usage error (got $rc)"
echo "memory: ok"
