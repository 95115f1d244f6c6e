#!/bin/bash
# distributed_gpu.sh — GPU ranks: mpirun -np 2 kerac train --device cuda, one rank per GPU
# (the local rank picks cuda:0 and cuda:1), NCCL's communicator id sent over MPI, the
# gradient buckets summed by NCCL on its own stream: the log says so on rank 0, and the
# weights equal 1 process's on one GPU with the same global batch (predictions within
# 1e-4); with --bucket-size 0.0005 (one bucket per layer) too.
# Skipped (77) without mpirun, with fewer than 2 GPUs (nvidia-smi -L), or when kerac was
# built without MPI; run by scripts/gpu-check on a GPU machine.
set -u
K=${1:?usage: distributed_gpu.sh PATH/TO/kerac}
. "$(dirname "$0")/lib/dist.sh"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "${gpus:-0}" -ge 2 ] || { echo "SKIP: needs 2 GPUs (nvidia-smi -L lists ${gpus:-0})"; exit 77; }
dist_setup
model "$T/m.json" 64 '
  {"class_name": "Dense", "config": {"name": "mid", "units": 32, "activation": "relu"}},'
TRAIN=("$K" train "$T/m.json" --data "$DATA" --seed 7 --optimizer sgd --lr 0.05 --epochs 2 --batch-size 32
       --device cuda)
"${TRAIN[@]}" --save "$T/one.keras" >"$T/one.out" 2>&1 || fail "1 process on cuda:0: $(cat "$T/one.out")"
mpi_or_skip "$T/two.out" -np 2 "${TRAIN[@]}" --save "$T/two.keras"
grep -q "the gradients are summed on the devices: NCCL" "$T/two.out" ||
    fail "rank 0 does not say NCCL sums the gradients: $(cat "$T/two.out")"
mpi_or_skip "$T/small.out" -np 2 "${TRAIN[@]}" --bucket-size 0.0005 --save "$T/small.keras"
predict one two small
"$PY" - "$T" <<'PY' || fail "2 GPU ranks differ from 1 GPU"
import sys
import numpy as np
t = sys.argv[1]
one, two, small = (np.load(f"{t}/{r}.npy") for r in ("one", "two", "small"))
d, ds = float(np.abs(one - two).max()), float(np.abs(one - small).max())
print(f"max |1 GPU - 2 GPU ranks (NCCL)| = {d:.3g}; with a bucket per layer {ds:.3g}")
sys.exit(0 if d < 1e-4 and ds < 1e-4 else 1)
PY
echo "OK"
