#!/bin/bash
# train_small.sh — `kerac train` end to end on tiny generated data (12x12 images, 4
# classes): --json output (one JSON object per line, Keras history keys, a final test_*
# object only when the data has a test split), the plain per-epoch lines when stdout is
# not a terminal, --quiet, --save, then `kerac predict` and `kerac evaluate` on the saved
# model. Needs /usr/bin/python3 with numpy to make the data (else skipped, exit 77).
set -u
K=${1:?usage: train_small.sh PATH/TO/kerac}
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PY with numpy is needed to make the data"; exit 77; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { # run kerac with a time limit; stdout -> $T/out, stderr -> $T/err
    timeout 120 "$K" "$@" >"$T/out" 2>"$T/err" || fail "kerac $* exited $?: $(cat "$T/err")"
}

# x.npy (240, 12, 12) uint8 + y.npy (240,) int64; an IDX dir in Keras/LeCun names, with a
# test split of 40 examples. Class k lights up quadrant k.
"$PY" - "$T" <<'PY' || fail "could not make the data"
import sys, struct, os
import numpy as np
t = sys.argv[1]
rng = np.random.default_rng(0)
def make(n):
    y = rng.integers(0, 4, n)
    x = rng.integers(0, 60, (n, 12, 12)).astype(np.uint8)
    for i, k in enumerate(y):
        r, c = divmod(int(k), 2)
        x[i, r * 6:(r + 1) * 6, c * 6:(c + 1) * 6] += 180
    return x, y
x, y = make(240)
np.save(os.path.join(t, "x.npy"), x)
np.save(os.path.join(t, "y.npy"), y.astype(np.int64))
os.mkdir(os.path.join(t, "mn"))
for prefix, n in (("train", 200), ("t10k", 40)):
    xi, yi = make(n)
    with open(os.path.join(t, "mn", prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 12, 12) + xi.tobytes())
    with open(os.path.join(t, "mn", prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 2049, n) + yi.astype(np.uint8).tobytes())
PY

# check_json FILE EPOCHS TEST(yes|no): every line is a JSON object; EPOCHS epoch lines
# with Keras history keys; a final test_* object or none
check_json() {
    "$PY" - "$@" <<'PY'
import sys, json, math
path, epochs, test = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "yes"
lines = open(path).read().splitlines()
def die(msg):
    print("FAIL: " + msg + "\n" + "\n".join(lines), file=sys.stderr); sys.exit(1)
objs = []
for i, line in enumerate(lines):
    try:
        o = json.loads(line)
    except ValueError as e:
        die("line %d is not JSON (%s)" % (i + 1, e))
    if not isinstance(o, dict):
        die("line %d is not a JSON object" % (i + 1))
    objs.append(o)
if len(objs) != epochs + (1 if test else 0):
    die("expected %d epoch lines%s, got %d lines" % (epochs, " + 1 test line" if test else "", len(objs)))
for e in range(epochs):
    o = objs[e]
    if o.get("epoch") != e + 1:
        die("line %d: epoch is %r, expected %d" % (e + 1, o.get("epoch"), e + 1))
    for k in ("loss", "accuracy", "val_loss", "val_accuracy", "lr", "images_per_second", "seconds"):
        if not isinstance(o.get(k), (int, float)) or not math.isfinite(o[k]):
            die("line %d: %r is missing or not a finite number" % (e + 1, k))
    if not 0 <= o["accuracy"] <= 1 or not 0 <= o["val_accuracy"] <= 1:
        die("line %d: accuracy out of [0, 1]" % (e + 1))
    if o["loss"] < 0 or o["images_per_second"] <= 0 or o["seconds"] <= 0:
        die("line %d: negative loss or no throughput" % (e + 1))
    if abs(o["lr"] - 0.001) > 1e-9:
        die("line %d: lr %r is not adam's default 0.001" % (e + 1, o["lr"]))
    if any(k.startswith("test_") for k in o):
        die("line %d: an epoch line has test_* keys" % (e + 1))
last = objs[-1]
if test:
    if set(last) != {"test_loss", "test_accuracy"}:
        die("the last line should be exactly {test_loss, test_accuracy}, got %r" % sorted(last))
    if not 0 <= last["test_accuracy"] <= 1 or not math.isfinite(last["test_loss"]):
        die("bad test results %r" % last)
elif any(k.startswith("test_") for k in last):
    die("data without a test split printed test_* results")
PY
}

# ---- npy data (no test split), default CNN (validation split 0.1), 1 epoch, --save
run train --data "npy:$T/x.npy,$T/y.npy" --epochs 1 --batch-size 32 --seed 7 --json --save "$T/m.json"
check_json "$T/out" 1 no || exit 1
[ -s "$T/m.json" ] || fail "--save did not write $T/m.json"
"$PY" -c 'import json, sys; json.load(open(sys.argv[1]))' "$T/m.json" || fail "the saved model is not JSON"

# ---- IDX data in a directory (mnist:DIR has a test split), 2 epochs
run train --data "mnist:$T/mn" --epochs 2 --batch-size 32 --json
check_json "$T/out" 2 yes || exit 1

# ---- stdout not a terminal: one plain line per epoch, then the test results
run train --data "mnist:$T/mn" --epochs 1 --batch-size 50 --validation-split 0.2
n='[0-9]+\.[0-9]+(e-[0-9]+)?'
grep -Eq "^epoch 1/1 - [0-9.]+s - [0-9]+ img/s - loss: $n - accuracy: $n - val_loss: $n - val_accuracy: $n$" "$T/out" ||
    fail "no plain epoch line in: $(cat "$T/out")"
grep -Eq "^test_loss: $n - test_accuracy: $n \(40 examples" "$T/out" || fail "no test line in: $(cat "$T/out")"
grep -q $'\r' "$T/out" && fail "a progress bar was drawn although stdout is not a terminal"
[ -s "$T/err" ] && fail "unexpected stderr output: $(cat "$T/err")"

# ---- --quiet: only the final results
run train --data "mnist:$T/mn" --epochs 1 --batch-size 50 --quiet
grep -q '^epoch ' "$T/out" && fail "--quiet still printed epoch lines"
grep -Eq "^test_loss: $n" "$T/out" || fail "--quiet dropped the test results: $(cat "$T/out")"

# ---- predict and evaluate with the saved model. A .json file holds the model config
# only, so these run on freshly initialised weights: they check the commands and the file
# formats, not the trained accuracy.
run predict "$T/m.json" --input "$T/x.npy" --output "$T/p.npy" --batch-size 64
grep -q "wrote '$T/p.npy'" "$T/out" || fail "predict did not say what it wrote: $(cat "$T/out")"
"$PY" - "$T/p.npy" <<'PY' || exit 1
import sys
import numpy as np
p = np.load(sys.argv[1])
if p.dtype != np.float32 or p.shape != (240, 4):
    sys.exit("FAIL: predictions have dtype %s shape %s, expected float32 (240, 4)" % (p.dtype, p.shape))
if not np.all(np.isfinite(p)) or not np.allclose(p.sum(axis=1), 1, atol=1e-4) or (p < 0).any():
    sys.exit("FAIL: predictions are not softmax probabilities")
PY
run evaluate "$T/m.json" --data "npy:$T/x.npy,$T/y.npy" --json --batch-size 100
"$PY" - "$T/out" <<'PY' || exit 1
import sys, json, math
lines = open(sys.argv[1]).read().splitlines()
if len(lines) != 1:
    sys.exit("FAIL: evaluate --json printed %d lines" % len(lines))
o = json.loads(lines[0])
if o.get("samples") != 240 or not math.isfinite(o.get("loss", float("nan"))) or not 0 <= o.get("accuracy", -1) <= 1:
    sys.exit("FAIL: evaluate --json gave %r" % o)
PY
run evaluate "$T/m.json" --data "npy:$T/x.npy,$T/y.npy"
grep -Eq "^loss: $n - accuracy: $n \(240 examples" "$T/out" || fail "evaluate printed: $(cat "$T/out")"
echo "train_small.sh: all checks passed"
