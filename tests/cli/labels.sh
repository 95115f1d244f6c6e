#!/bin/bash
# labels.sh — `kerac train` / `kerac evaluate` with labels other than one class index per
# example: a binary head (Dense(1) logits, binary_crossentropy --from-logits) on float 0/1
# labels (N, 1), and a per-pixel head (Conv2D(3) softmax, the U-Net's last layer) on
# integer masks (N, H, W) with sparse_categorical_crossentropy. Each trains a few epochs
# with a validation split; the loss must go down and the accuracy reach what the data
# allows. Labels that do not fit the model are refused naming both shapes.
set -u
K=${1:?usage: labels.sh PATH/TO/kerac}
. "$(dirname "$0")/lib/tiny.sh"
tiny_setup 240
tiny_py <<'PY'
y = np.load(t + "/y.npy")
np.save(t + "/bin.npy", (y >= 2).astype(np.float32)[:, None])  # binary labels (N, 1), float
rng = np.random.default_rng(3)
x = rng.random((240, 8, 8, 1), dtype=np.float32)
np.save(t + "/px.npy", x)
np.save(t + "/mask.npy", np.digitize(x[..., 0], [0.33, 0.66]).astype(np.uint8))  # masks (N, 8, 8)
open(t + "/binary.json", "w").write(
    '{"class_name": "Sequential", "config": {"name": "binary", "layers": ['
    '{"class_name": "InputLayer", "config": {"batch_shape": [null, 12, 12, 1], "dtype": "float32", "name": "input"}}, '
    '{"class_name": "Flatten", "config": {"name": "flatten"}}, '
    '{"class_name": "Dense", "config": {"name": "hidden", "units": 32, "activation": "relu"}}, '
    '{"class_name": "Dense", "config": {"name": "logit", "units": 1}}]}}')
open(t + "/pixel.json", "w").write(
    '{"class_name": "Sequential", "config": {"name": "pixel", "layers": ['
    '{"class_name": "InputLayer", "config": {"batch_shape": [null, 8, 8, 1], "dtype": "float32", "name": "input"}}, '
    '{"class_name": "Conv2D", "config": {"name": "hidden", "filters": 8, "kernel_size": [1, 1], "activation": "relu"}}, '
    '{"class_name": "Conv2D", "config": {"name": "classes", "filters": 3, "kernel_size": [3, 3], "padding": "same", '
    '"activation": "softmax"}}]}}')
PY

# epochs_ok FILE MIN_ACC: the --json lines' loss goes down from the first epoch to the last,
# and the last val_accuracy reaches MIN_ACC
epochs_ok() {
    "$PY" - "$1" "$2" <<'PY' || fail "$(cat "$1")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and '"epoch"' in l]
loss = [r["loss"] for r in rows]
print("loss by epoch:", " ".join("%.4f" % v for v in loss), " val_accuracy: %.3f" % rows[-1]["val_accuracy"])
assert len(rows) >= 3 and loss[-1] < 0.9 * loss[0], "the loss did not go down"
assert rows[-1]["val_accuracy"] >= float(sys.argv[2]), "val_accuracy too low"
PY
}

# a binary head on float labels (N, 1), from logits
timeout 300 "$K" train "$T/binary.json" --data "npy:$T/x.npy,$T/bin.npy" --loss binary_crossentropy --from-logits \
    --epochs 4 --batch-size 16 --lr 0.003 --validation-split 0.2 --seed 1 --threads 1 --json --save "$T/binary.keras" \
    >"$T/out" 2>&1 || fail "binary training: $(cat "$T/out")"
echo -n "binary head:  "; epochs_ok "$T/out" 0.8
timeout 300 "$K" evaluate "$T/binary.keras" --data "npy:$T/x.npy,$T/bin.npy" --loss binary_crossentropy \
    --from-logits --json >"$T/out" 2>&1 || fail "binary evaluate: $(cat "$T/out")"
grep -q '"accuracy"' "$T/out" || fail "binary evaluate: $(cat "$T/out")"

# a per-pixel head on integer masks (N, H, W)
timeout 300 "$K" train "$T/pixel.json" --data "npy:$T/px.npy,$T/mask.npy" --loss sparse_categorical_crossentropy \
    --epochs 6 --batch-size 16 --lr 0.01 --validation-split 0.2 --seed 1 --threads 1 --json --save "$T/pixel.keras" \
    >"$T/out" 2>&1 || fail "per-pixel training: $(cat "$T/out")"
echo -n "per-pixel head: "; epochs_ok "$T/out" 0.7
timeout 300 "$K" evaluate "$T/pixel.keras" --data "npy:$T/px.npy,$T/mask.npy" --json >"$T/out" 2>&1 ||
    fail "per-pixel evaluate: $(cat "$T/out")"

# labels that do not fit: masks for the binary head, class indices for the per-pixel head
# (exit 2, a bad input, before training starts)
timeout 60 "$K" train "$T/pixel.json" --data "npy:$T/px.npy,$T/bin.npy" --epochs 1 --threads 1 >"$T/out" 2>&1
rc=$?
[ $rc = 2 ] || fail "per-pixel head on (N, 1) labels: exit $rc, expected 2: $(cat "$T/out")"
grep -q "labels have shape (N, 1) but model 'pixel' outputs (N, 8, 8, 3)" "$T/out" || fail "no shapes in: $(cat "$T/out")"
grep -q "training" "$T/out" && fail "the labels were refused after training started: $(cat "$T/out")"
timeout 60 "$K" evaluate "$T/binary.keras" --data "npy:$T/x.npy,$T/mask.npy" --loss binary_crossentropy >"$T/out" 2>&1
rc=$?
[ $rc = 2 ] || fail "masks for a binary head: exit $rc, expected 2: $(cat "$T/out")"
grep -q "labels have shape (N, 8, 8) but model 'binary' outputs (N, 1)" "$T/out" || fail "unclear error: $(cat "$T/out")"
# no --loss: the loss the .keras file was compiled with in Keras (BinaryCrossentropy(from_logits=True))
F=${KERAC_SOURCE_DIR:-$(dirname "$0")/../..}/tests/fixtures/labels/binary_logits
timeout 60 "$K" evaluate "$F/compiled.keras" --data "npy:$F/x.npy,$F/y.npy" --json >"$T/out" 2>&1 ||
    fail "evaluate with the file's loss: $(cat "$T/out")"
"$PY" - "$T/out" "$F/keras.json" <<'PY' || fail "the file's compile_config loss was not used: $(cat "$T/out")"
import json, sys
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
print("compiled.keras without --loss: loss %.6f (Keras %.6f)" % (got["loss"], want["loss"]))
assert abs(got["loss"] - want["loss"]) < 1e-5 and abs(got["accuracy"] - want["accuracy"]) < 1e-6
PY
echo "labels: a binary head and a per-pixel head train and evaluate; mismatched labels refused"
exit 0
