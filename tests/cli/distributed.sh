#!/bin/bash
# distributed.sh — `mpirun -np 2 kerac train` (data-parallel over Open MPI) on the CPU.
#  1. equivalence: 2 ranks with global batch 32 end with the same weights (kerac predict
#     outputs on a probe, within 1e-5) as 1 process with batch 32 and the same seed, on 256
#     Fashion-MNIST training images (a Dense model: no Dropout, no BatchNorm; SGD, 16
#     steps); and the check can fail: 1 process with batch 16 differs from both;
#     rank 1 given other initial weights ends as rank 0's (the broadcast);
#     also a 2-rank run checkpointed after epoch 1 and resumed in 1 process matches;
#  2. refusal: ranks given different model files stop at start naming rank 1; a batch
#     size that does not split over the ranks is refused;
#  3. failure: kill -9 of one rank mid-training makes mpirun (and the other rank) exit
#     non-zero within 60 s.
# Skipped (77) when mpirun is absent or kerac was built without MPI; needs python3 + numpy.
set -u
K=${1:?usage: distributed.sh PATH/TO/kerac}
PY=/usr/bin/python3
FM=/usr/share/datasets/fashion-mnist
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PY with numpy is needed to make the data"; exit 77; }
[ -f "$FM/train-images-idx3-ubyte.gz" ] || { echo "SKIP: $FM not installed"; exit 77; }
T=$(mktemp -d) || exit 1
BG=
trap '[ -n "$BG" ] && kill -9 "$BG" 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MPI=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader)

# 256 training images and labels, 8 probe images (float32)
"$PY" - "$T" "$FM" <<'PY' || fail "could not make the data"
import gzip, os, sys
import numpy as np
t, fm = sys.argv[1], sys.argv[2]
with gzip.open(os.path.join(fm, "train-images-idx3-ubyte.gz")) as f:
    x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
with gzip.open(os.path.join(fm, "train-labels-idx1-ubyte.gz")) as f:
    y = np.frombuffer(f.read(), np.uint8, offset=8)
np.save(os.path.join(t, "x.npy"), x[:256].copy())
np.save(os.path.join(t, "y.npy"), y[:256].astype(np.int64))
np.save(os.path.join(t, "probe.npy"), (x[1000:1008] / 255.0).astype(np.float32))
PY
model() { # Flatten -> Dense(UNITS, relu) -> Dense(10, softmax)
    cat >"$1" <<JSON
{"class_name": "Sequential", "config": {"name": "dp", "layers": [
  {"class_name": "InputLayer", "config": {"batch_shape": [null, 28, 28, 1], "dtype": "float32", "name": "in"}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "hidden", "units": $2, "activation": "relu"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 10, "activation": "softmax"}}]}}
JSON
}
model "$T/m.json" 32
model "$T/m2.json" 33
DATA="npy:$T/x.npy,$T/y.npy"
COMMON=(--data "$DATA" --seed 7 --threads 1 --optimizer sgd --lr 0.05 --quiet)

"$K" train "$T/m.json" "${COMMON[@]}" --epochs 2 --batch-size 32 --save "$T/one.keras" >"$T/one.out" 2>&1 ||
    fail "1 process: $(cat "$T/one.out")"
"$K" train "$T/m.json" "${COMMON[@]}" --epochs 2 --batch-size 16 --save "$T/half.keras" >"$T/half.out" 2>&1 ||
    fail "1 process, batch 16: $(cat "$T/half.out")"
if ! timeout 300 "${MPI[@]}" -np 2 "$K" train "$T/m.json" "${COMMON[@]}" --epochs 2 --batch-size 32 --save "$T/two.keras" \
        >"$T/two.out" 2>&1; then
    grep -q "built without MPI" "$T/two.out" && { echo "SKIP: kerac was built without MPI"; exit 77; }
    fail "2 ranks: $(cat "$T/two.out")"
fi
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
for r in one two half resumed bcast; do
    "$K" predict "$T/$r.keras" --input "$T/probe.npy" --output "$T/$r.npy" --quiet || fail "predict $r"
done
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

# ---- kill -9 one rank while training: the job ends non-zero within 60 s
"${MPI[@]}" -np 2 "$K" train "$T/m.json" --data "$DATA" --epochs 100000 --batch-size 32 --threads 1 \
    --optimizer sgd --json >"$T/kill.out" 2>&1 &
BG=$!
for _ in $(seq 600); do grep -q '"epoch"' "$T/kill.out" 2>/dev/null && break; sleep 0.2; done
grep -q '"epoch"' "$T/kill.out" || fail "the 2-rank run did not start training: $(cat "$T/kill.out")"
victim=$(pgrep -P "$BG" -f "kerac train" | tail -1)
[ -n "$victim" ] || fail "no rank process found under mpirun $BG"
t0=$(date +%s.%N)
kill -9 "$victim"
rc=0
for _ in $(seq 600); do kill -0 "$BG" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$BG" 2>/dev/null; then fail "mpirun still runs 60 s after a rank was killed"; fi
wait "$BG" || rc=$?
BG=
t1=$(date +%s.%N)
[ "$rc" -ne 0 ] || fail "mpirun exited 0 after a rank was killed"
pgrep -f "$T/m.json" >/dev/null && fail "a rank outlived mpirun"
echo "after kill -9 of rank pid $victim, mpirun exited $rc in $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s"
echo "OK"
