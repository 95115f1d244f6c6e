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
  echo "$out" | grep -q "$row" || fail "summary --batch-size: no '$row' row"
done
echo "$out" | grep -q "batch size 128, optimizer adam, on cpu" || fail "summary: no header line"
small=$("$kerac" summary --batch-size 32 | awk '/device total/ {print $4, $5}')
big=$("$kerac" summary --batch-size 256 | awk '/device total/ {print $4, $5}')
[ "$small" != "$big" ] || fail "the plan does not grow with the batch ($small vs $big)"
"$kerac" summary --grad-accum 4 >/dev/null 2>&1 && fail "--grad-accum without --batch-size must be a usage error"
set +e; "$kerac" summary --grad-accum 4 >/dev/null 2>&1; rc=$?; set -e
[ "$rc" = 1 ] || fail "expected exit 1, got $rc"
echo "memory: ok"
