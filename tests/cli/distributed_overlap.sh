#!/bin/bash
# distributed_overlap.sh — the bucketed all-reduce, --deterministic and resuming with
# another number of ranks (mpirun -np 2 kerac train on 256 Fashion-MNIST images, a model
# of three Dense layers, SGD, 16 steps):
#  1. buckets: --bucket-size 0.0005 (1 KiB: one bucket per layer, 3) gives the weights of 1
#     process with the same global batch (predictions on a probe within 1e-5) and of the
#     default bucket (one); its --profile trace has 3 "all-reduce bucket" spans per traced
#     step, and the first of each step starts before that step's backward pass ends (the
#     all-reduce runs while backward computes); with --grad-accum 2 (the same buckets after
#     the accumulation) too;
#  2. --deterministic: two repeated 2-rank runs give bit-identical predictions, within 1e-5
#     of 1 process; 3 ranks (global batch 30) give bit-identical predictions with a bucket
#     per layer and with one bucket (the sums are in rank order, whatever MPI does);
#  3. resume with another number of ranks: a 1-process run checkpointed mid-epoch (step 6
#     of 8) resumed by 2 ranks, and a 2-rank checkpoint at step 5 resumed by 1 process,
#     both end within 1e-5 of the uninterrupted run.
# Skipped (77) when mpirun is absent or kerac was built without MPI; needs python3 + numpy.
set -u
K=${1:?usage: distributed_overlap.sh PATH/TO/kerac}
. "$(dirname "$0")/lib/dist.sh"
dist_setup
model "$T/m.json" 32 '
  {"class_name": "Dense", "config": {"name": "mid", "units": 24, "activation": "relu"}},'
TRAIN=("$K" train "$T/m.json" "${COMMON[@]}" --epochs 2 --batch-size 32)

"${TRAIN[@]}" --save "$T/one.keras" >"$T/one.out" 2>&1 || fail "1 process: $(cat "$T/one.out")"
mpi_or_skip "$T/big.out" -np 2 "${TRAIN[@]}" --save "$T/big.keras"
mpi_or_skip "$T/small.out" -np 2 "${TRAIN[@]}" --bucket-size 0.0005 --save "$T/small.keras" \
    --profile "$T/trace.json" --profile-steps 2:4
"${TRAIN[@]}" --freeze hidden --save "$T/frz1.keras" >"$T/frz1.out" 2>&1 || fail "1 process, frozen: $(cat "$T/frz1.out")"
mpi_or_skip "$T/frz2.out" -np 2 "${TRAIN[@]}" --bucket-size 0.0005 --freeze hidden --save "$T/frz2.keras"
mpi_or_skip "$T/accum.out" -np 2 "${TRAIN[@]}" --bucket-size 0.0005 --grad-accum 2 --save "$T/accum.keras"
mpi_or_skip "$T/det1.out" -np 2 "${TRAIN[@]}" --bucket-size 0.0005 --deterministic --save "$T/det1.keras"
mpi_or_skip "$T/det2.out" -np 2 "${TRAIN[@]}" --bucket-size 0.0005 --deterministic --save "$T/det2.keras"
mpi_or_skip "$T/d3a.out" -np 3 "$K" train "$T/m.json" "${COMMON[@]}" --epochs 1 --batch-size 30 --deterministic \
    --bucket-size 0.0005 --save "$T/d3a.keras"
mpi_or_skip "$T/d3b.out" -np 3 "$K" train "$T/m.json" "${COMMON[@]}" --epochs 1 --batch-size 30 --deterministic \
    --save "$T/d3b.keras"

# ---- resume: 1 process checkpointed at step 6 of epoch 1 -> 2 ranks; 2 ranks at step 5 -> 1
"$K" train "$T/m.json" "${COMMON[@]}" --epochs 1 --batch-size 32 --checkpoint "$T/c1" --checkpoint-every 3 \
    --keep 5 >"$T/c1.out" 2>&1 || fail "1 process with checkpoints: $(cat "$T/c1.out")"
c1=$(ls "$T"/c1/ckpt-*-e0000-s000006.keras 2>/dev/null | head -1)
[ -n "$c1" ] || fail "no checkpoint at step 6: $(ls "$T/c1")"
mpi_or_skip "$T/r2.out" -np 2 "$K" train --resume "$c1" --data "$DATA" --epochs 2 --threads 1 --quiet \
    --save "$T/r2.keras"
mpi_or_skip "$T/c2.out" -np 2 "$K" train "$T/m.json" "${COMMON[@]}" --epochs 1 --batch-size 32 \
    --checkpoint "$T/c2" --checkpoint-every 5 --keep 5
c2=$(ls "$T"/c2/ckpt-*-e0000-s000005.keras 2>/dev/null | head -1)
[ -n "$c2" ] || fail "no 2-rank checkpoint at step 5: $(ls "$T/c2")"
"$K" train --resume "$c2" --data "$DATA" --epochs 2 --threads 1 --quiet --save "$T/r1.keras" >"$T/r1.out" 2>&1 ||
    fail "resume in 1 process: $(cat "$T/r1.out")"
predict one big small accum det1 det2 r1 r2 d3a d3b frz1 frz2

"$PY" - "$T" <<'PY' || fail "the bucketed or resumed 2-rank weights differ"
import json, sys
import numpy as np
t = sys.argv[1]
p = {r: np.load(f"{t}/{r}.npy") for r in ("one", "big", "small", "accum", "det1", "det2", "r1", "r2")}
d = {r: float(np.abs(p["one"] - p[r]).max()) for r in p}
print("max |1 process - X|:", ", ".join(f"{r} {v:.3g}" for r, v in d.items()))
ok = all(v < 1e-5 for v in d.values())
same = np.array_equal(p["det1"].view(np.uint32), p["det2"].view(np.uint32))
d3 = [np.load(f"{t}/{r}.npy") for r in ("d3a", "d3b")]
same3 = np.array_equal(d3[0].view(np.uint32), d3[1].view(np.uint32))
# a frozen layer has no gradient: its buckets skip it, and 2 ranks still match 1 process
fz = float(np.abs(np.load(f"{t}/frz1.npy") - np.load(f"{t}/frz2.npy")).max())
fz_moved = float(np.abs(np.load(f"{t}/frz1.npy") - p["one"]).max())
print(f"--freeze hidden: max |1 process - 2 ranks| {fz:.3g}; frozen vs not {fz_moved:.3g}")
ok = ok and fz < 1e-5 and fz_moved > 1e-4
print("--deterministic runs bit-identical:", same, "; 3 ranks, a bucket per layer vs one:", same3)
same = same and same3
ev = [e for e in json.load(open(f"{t}/trace.json"))["traceEvents"] if e.get("ph") == "X"]
steps = sorted({e["args"]["step"] for e in ev if e["name"] == "all-reduce bucket"})
overlap = 0
for s in steps:
    b = sorted(e["ts"] for e in ev if e["name"] == "all-reduce bucket" and e["args"]["step"] == s)
    bw = [e for e in ev if e["name"] == "backward" and e["args"]["step"] == s]
    if len(b) != 3 or len(bw) != 1:
        print(f"step {s}: {len(b)} bucket spans, {len(bw)} backward spans (want 3 and 1)")
        ok = False
        continue
    overlap += b[0] < bw[0]["ts"] + bw[0]["dur"]
print(f"traced steps {steps}: 3 buckets each; the first starts inside backward in {overlap}")
sys.exit(0 if ok and same and len(steps) == 3 and overlap == len(steps) else 1)
PY
echo "OK"
