#!/bin/bash
# train_gpus.sh — `kerac train --gpus LIST|all`: several GPUs in one process (one replica
# per GPU, the global batch split across them, NCCL's all-reduce in buckets).
# Everywhere: the refusals that need no GPU (--device cpu, a list that is not GPU indices).
# Then, by the GPUs nvidia-smi -L lists:
#   none: SKIP (77) after the refusals;
#   1:    --gpus 0 trains as --device cuda:0 does (predictions within 1e-5 after 2 epochs of
#         SGD, global batch 32), then SKIP (77) for the rest;
#   2+:   on 256 synthetic 28x28 images (Dense 64 relu, Dense 10 softmax; SGD lr 0.05,
#         seed 7, 2 epochs, global batch 32):
#         a. --gpus 0,1 predicts as 1 GPU within 1e-4, says NCCL sums the gradients, prints
#            one "saved model to" line and per-epoch loss lines;
#         b. --gpus 0,1 --bucket-size 0.0005 (one bucket per layer): within 1e-4 of 1 GPU;
#         c. with a BatchNormalization: --gpus 0,1 --sync-batchnorm within 1e-4 of 1 GPU,
#            without it more than 1e-4 away (each replica's own statistics);
#         d. --gpus all with batch 16 x the GPU count finishes an epoch;
#         e. a GPU index past the last is refused naming it.
# Needs python3 (no numpy: .npy files written and read by hand). Run by scripts/gpu-check.
set -u
K=${1:?usage: train_gpus.sh PATH/TO/kerac}
PY=${PY:-python3}
fail() { echo "FAIL: $*" >&2; exit 1; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
command -v "$PY" >/dev/null || { echo "SKIP: $PY is needed to make the data"; exit 77; }
"$PY" - "$T" <<'PY' || fail "could not make the data"
import random, struct, sys
def save(path, descr, shape, data):
    head = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    head += " " * (63 - (10 + len(head)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode("latin1") + data)
r = random.Random(3)
lab = [r.randrange(10) for _ in range(256)]
# images whose mean brightness depends on the label: something to learn
img = bytes(min(255, max(0, int(r.gauss(20 * lab[i // 784], 40)))) for i in range(256 * 784))
save(sys.argv[1] + "/x.npy", "|u1", "(256, 28, 28)", img)
save(sys.argv[1] + "/y.npy", "<i8", "(256,)", struct.pack("<256q", *lab))
save(sys.argv[1] + "/probe.npy", "<f4", "(8, 28, 28)", struct.pack("<%df" % (8 * 784), *[r.random() for _ in range(8 * 784)]))
PY
model() {
    cat >"$1" <<JSON
{"class_name": "Sequential", "config": {"name": "mirrored", "layers": [
  {"class_name": "InputLayer", "config": {"batch_shape": [null, 28, 28, 1], "dtype": "float32", "name": "in"}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "hidden", "units": 64, "activation": "relu"}},${2:-}
  {"class_name": "Dense", "config": {"name": "out", "units": 10, "activation": "softmax"}}]}}
JSON
}
model "$T/m.json"
model "$T/bn.json" '
  {"class_name": "BatchNormalization", "config": {"name": "bn", "momentum": 0.9}},'
BASE=(train --data "npy:$T/x.npy,$T/y.npy" --seed 7 --optimizer sgd --lr 0.05 --validation-split 0)
TRAIN=("${BASE[@]}" --epochs 2 --batch-size 32)

# ---- refusals that need no GPU
"$K" "${TRAIN[@]}" "$T/m.json" --gpus 0,1 --device cpu >"$T/cpu.out" 2>&1 && fail "--gpus with --device cpu ran"
grep -q "'--gpus' trains on GPUs but the device is 'cpu'" "$T/cpu.out" || fail "--device cpu: $(cat "$T/cpu.out")"
"$K" "${TRAIN[@]}" "$T/m.json" --gpus 0,x >"$T/bad.out" 2>&1 && fail "--gpus 0,x ran"
grep -q "'x' is not a GPU index" "$T/bad.out" || fail "--gpus 0,x: $(cat "$T/bad.out")"
"$K" "${TRAIN[@]}" "$T/m.json" --gpus 0,,1 >"$T/empty.out" 2>&1 && fail "--gpus 0,,1 ran"
grep -q "needs GPU indices separated by commas" "$T/empty.out" || fail "--gpus 0,,1: $(cat "$T/empty.out")"

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "${gpus:-0}" -ge 1 ] || { echo "SKIP: no GPU (nvidia-smi -L lists none); the refusals passed"; exit 77; }

# max |a - b| over two float32 .npy files of the same shape, printed; exit 1 when over $3
cmp_npy() {
    "$PY" - "$1" "$2" "$3" "$4" <<'PY'
import array, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<H", b[8:10])[0]
    a = array.array("f")
    a.frombytes(b[10 + n:])
    return a
a, b = load(sys.argv[1]), load(sys.argv[2])
d = max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else float("inf")
print(f"{sys.argv[4]}: max |difference| = {d:.3g}")
sys.exit(0 if d <= float(sys.argv[3]) else 1)
PY
}
run() { # NAME MODEL ARGS...: train and save $T/NAME.keras, predictions into $T/NAME.npy
    local name=$1 m=$2
    shift 2
    "$K" "${TRAIN[@]}" "$m" "$@" --save "$T/$name.keras" >"$T/$name.out" 2>&1 || fail "$name: $(cat "$T/$name.out")"
    "$K" predict "$T/$name.keras" --device cpu --input "$T/probe.npy" --output "$T/$name.npy" --quiet ||
        fail "predict $name"
}
run one "$T/m.json" --device cuda:0
run gpu0 "$T/m.json" --gpus 0
cmp_npy "$T/one.npy" "$T/gpu0.npy" 1e-5 "--device cuda:0 vs --gpus 0" || fail "--gpus 0 differs from --device cuda:0"
[ "$gpus" -ge 2 ] || { echo "SKIP: 1 GPU: --gpus 0 matched --device cuda:0; the rest needs 2"; exit 77; }

run two "$T/m.json" --gpus 0,1
grep -q "the gradients are summed on the devices: NCCL" "$T/two.out" ||
    fail "--gpus 0,1 does not say NCCL sums the gradients: $(cat "$T/two.out")"
[ "$(grep -c "saved model to" "$T/two.out")" = 1 ] || fail "not one save line: $(cat "$T/two.out")"
grep -q "loss" "$T/two.out" || fail "no loss printed: $(cat "$T/two.out")"
cmp_npy "$T/one.npy" "$T/two.npy" 1e-4 "1 GPU vs --gpus 0,1" || fail "--gpus 0,1 differs from 1 GPU"
run small "$T/m.json" --gpus 0,1 --bucket-size 0.0005
cmp_npy "$T/one.npy" "$T/small.npy" 1e-4 "1 GPU vs --gpus 0,1, a bucket per layer" || fail "small buckets differ"

run bn1 "$T/bn.json" --device cuda:0
run bnsync "$T/bn.json" --gpus 0,1 --sync-batchnorm
run bnown "$T/bn.json" --gpus 0,1
cmp_npy "$T/bn1.npy" "$T/bnsync.npy" 1e-4 "1 GPU vs --gpus 0,1 --sync-batchnorm" || fail "--sync-batchnorm differs"
cmp_npy "$T/bn1.npy" "$T/bnown.npy" 1e-4 "1 GPU vs --gpus 0,1, own statistics" >/dev/null &&
    fail "each replica's own BatchNormalization statistics gave 1 GPU's result: the check cannot tell"

"$K" "${BASE[@]}" "$T/m.json" --gpus all --epochs 1 --batch-size $((16 * gpus)) >"$T/all.out" 2>&1 ||
    fail "--gpus all: $(cat "$T/all.out")"
"$K" "${TRAIN[@]}" "$T/m.json" --gpus "0,$gpus" >"$T/past.out" 2>&1 && fail "--gpus 0,$gpus ran"
grep -q "GPU $gpus does not exist" "$T/past.out" || fail "--gpus 0,$gpus: $(cat "$T/past.out")"
echo "OK"
