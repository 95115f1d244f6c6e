#!/bin/bash
# distributed_bn.sh — BatchNormalization under mpirun -np 2 kerac train (256 Fashion-MNIST
# images; Flatten, Dense 32, BatchNormalization, Dense 10; global batch 32, 2 epochs):
#  1. statistics alone (SGD with lr 1e-30: the weights stay put, only the moving mean and
#     variance move; predictions use them): --sync-batchnorm on 2 ranks gives 1 process's
#     statistics (predictions within 1e-4); without it rank 0 keeps its own half-batch
#     statistics, which differ (more than 1e-3);
#  2. training (lr 0.05): --sync-batchnorm gives 1 process's weights and statistics within
#     1e-4 (the backward's sums are the ranks' too); without it they differ.
# Skipped (77) when mpirun is absent or kerac was built without MPI; needs python3 + numpy.
set -u
K=${1:?usage: distributed_bn.sh PATH/TO/kerac}
. "$(dirname "$0")/lib/dist.sh"
dist_setup
model "$T/m.json" 32 '
  {"class_name": "BatchNormalization", "config": {"name": "bn", "momentum": 0.9}},'
for lr in 1e-30 0.05; do
    TRAIN=("$K" train "$T/m.json" --data "$DATA" --seed 7 --threads 1 --optimizer sgd --lr "$lr" --quiet
           --epochs 2 --batch-size 32)
    "${TRAIN[@]}" --save "$T/one$lr.keras" >"$T/one.out" 2>&1 || fail "1 process: $(cat "$T/one.out")"
    mpi_or_skip "$T/sync.out" -np 2 "${TRAIN[@]}" --sync-batchnorm --save "$T/sync$lr.keras"
    mpi_or_skip "$T/own.out" -np 2 "${TRAIN[@]}" --save "$T/own$lr.keras"
    predict "one$lr" "sync$lr" "own$lr"
done
"$PY" - "$T" <<'PY' || fail "synchronised BatchNormalization does not match 1 process"
import sys
import numpy as np
t = sys.argv[1]
ok = True
for lr in ("1e-30", "0.05"):
    one, sync, own = (np.load(f"{t}/{r}{lr}.npy") for r in ("one", "sync", "own"))
    ds, do = float(np.abs(one - sync).max()), float(np.abs(one - own).max())
    print(f"lr {lr}: max |1 process - 2 ranks --sync-batchnorm| = {ds:.3g}; without it {do:.3g}")
    ok = ok and ds < 1e-4 and do > 1e-3
sys.exit(0 if ok else 1)
PY
echo "OK"
