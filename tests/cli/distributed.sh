#!/bin/bash
# distributed.sh — `mpirun -np 2 kerac train` (data-parallel over Open MPI) on the CPU.
#  1. equivalence: 2 ranks with global batch 32 end with the same weights (kerac predict
#     outputs on a probe, within 1e-5) as 1 process with batch 32 and the same seed, on 256
#     Fashion-MNIST training images (a Dense model: no Dropout, no BatchNorm; SGD, 16
#     steps); and the check can fail: 1 process with batch 16 differs from both;
#     rank 1 given other initial weights ends as rank 0's (the broadcast);
#     also a 2-rank run checkpointed after epoch 1 and resumed in 1 process matches;
#  2. refusal: ranks given different model files stop at start naming rank 1; a batch
#     size that does not split over the ranks is refused; --gpus under mpirun is refused;
# (the failures: distributed_failure.sh; buckets, --deterministic, resuming with another
# number of ranks: distributed_overlap.sh; --sync-batchnorm: distributed_bn.sh)
# Skipped (77) when mpirun is absent or kerac was built without MPI; needs python3 + numpy.
set -u
K=${1:?usage: distributed.sh PATH/TO/kerac}
. "$(dirname "$0")/lib/dist.sh"
dist_setup
model "$T/m.json" 32
model "$T/m2.json" 33

"$K" train "$T/m.json" "${COMMON[@]}" --epochs 2 --batch-size 32 --save "$T/one.keras" >"$T/one.out" 2>&1 ||
    fail "1 process: $(cat "$T/one.out")"
"$K" train "$T/m.json" "${COMMON[@]}" --epochs 2 --batch-size 16 --save "$T/half.keras" >"$T/half.out" 2>&1 ||
    fail "1 process, batch 16: $(cat "$T/half.out")"
mpi_or_skip "$T/two.out" -np 2 "$K" train "$T/m.json" "${COMMON[@]}" --epochs 2 --batch-size 32 --save "$T/two.keras"
grep -q "saved model to" "$T/two.out" || fail "rank 0 did not report the save: $(cat "$T/two.out")"
[ "$(grep -c "saved model to" "$T/two.out")" = 1 ] || fail "more than one rank printed: $(cat "$T/two.out")"
# rank 1 starts from other weights (the trained one.keras, same architecture): rank 0's are
# broadcast, so the result is two.keras's
timeout 300 "${MPI[@]}" -np 1 "$K" train "$T/m.json" "${COMMON[@]}" --epochs 2 --batch-size 32 --save "$T/bcast.keras" : \
    -np 1 "$K" train "$T/one.keras" "${COMMON[@]}" --epochs 2 --batch-size 32 >"$T/bcast.out" 2>&1 ||
    fail "2 ranks from different weights: $(cat "$T/bcast.out")"
# a checkpoint of a 2-rank run (1 epoch), resumed in one process for the 2nd epoch
timeout 300 "${MPI[@]}" -np 2 "$K" train "$T/m.json" "${COMMON[@]}" --epochs 1 --batch-size 32 --checkpoint "$T/ck" \
    >"$T/ck.out" 2>&1 || fail "2 ranks with --checkpoint: $(cat "$T/ck.out")"
"$K" train --resume "$T/ck" --data "$DATA" --epochs 2 --threads 1 --quiet --save "$T/resumed.keras" \
    >"$T/resumed.out" 2>&1 || fail "resume in 1 process: $(cat "$T/resumed.out")"
predict one two half resumed bcast
"$PY" - "$T" <<'PY' || fail "2-rank weights differ from 1 process"
import sys
import numpy as np
t = sys.argv[1]
one, two, half, res, bc = (np.load(f"{t}/{r}.npy") for r in ("one", "two", "half", "resumed", "bcast"))
d, dh = float(np.abs(one - two).max()), float(np.abs(one - half).max())
dr, db = float(np.abs(one - res).max()), float(np.abs(two - bc).max())
print(f"max |1 process - 2 ranks| = {d:.3g}; |1 process - 2 ranks + resume in 1| = {dr:.3g}; "
      f"|2 ranks - 2 ranks, rank 1 from other weights| = {db:.3g}; |batch 32 - batch 16| = {dh:.3g}")
sys.exit(0 if d < 1e-5 and dr < 1e-5 and db < 1e-6 and dh > 1e-3 else 1)
PY

# ---- refusals: a different model on rank 1; a batch that does not split over 2 ranks
timeout 120 "${MPI[@]}" -np 1 "$K" train "$T/m.json" "${COMMON[@]}" --batch-size 32 : \
    -np 1 "$K" train "$T/m2.json" "${COMMON[@]}" --batch-size 32 >"$T/diff.out" 2>&1 &&
    fail "different models on the ranks were not refused"
grep -q "rank 1's model differs from rank 0's" "$T/diff.out" || fail "refusal does not name rank 1: $(cat "$T/diff.out")"
timeout 120 "${MPI[@]}" -np 2 "$K" train "$T/m.json" "${COMMON[@]}" --batch-size 33 >"$T/odd.out" 2>&1 &&
    fail "batch 33 over 2 ranks was not refused"
grep -q "must split evenly over the 2 ranks" "$T/odd.out" || fail "odd batch message: $(cat "$T/odd.out")"
# --gpus (several GPUs in one process) under mpirun ranks: refused on every rank, with the
# form to use (the other --gpus checks: train_gpus.sh)
timeout 120 "${MPI[@]}" -np 2 "$K" train "$T/m.json" "${COMMON[@]}" --gpus 0,1 >"$T/gpus.out" 2>&1 &&
    fail "--gpus under mpirun was not refused"
grep -q "the two together are not supported" "$T/gpus.out" || fail "--gpus message: $(cat "$T/gpus.out")"

echo "OK"
