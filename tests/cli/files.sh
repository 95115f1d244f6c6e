#!/bin/bash
# files.sh — Keras model files through the `kerac` command: train 1 epoch on tiny
# generated IDX data and --save m.keras; the archive holds Keras 3's three entries;
# `kerac evaluate m.keras` gives exactly the test results training printed; `kerac convert`
# between .keras, .h5 and .json keeps predictions and evaluation identical (and says on
# stderr when weights are dropped or freshly made); `train --init-from`; summary of a
# .keras file; bad files exit 2 with a message naming them. Needs /usr/bin/python3 (its
# standard library only) to make the data and look into the zip (else skipped, exit 77).
set -u
K=${1:?usage: files.sh PATH/TO/kerac}
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: $PY is needed to make the data"; exit 77; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { # run kerac with a time limit; stdout -> $T/out, stderr -> $T/err
    timeout 120 "$K" "$@" >"$T/out" 2>"$T/err" || fail "kerac $* exited $?: $(cat "$T/err")"
}
# expect CODE PATTERN ARGS...: kerac exits CODE and stderr matches PATTERN (extended regex)
expect() {
    local code=$1 pat=$2; shift 2
    timeout 60 "$K" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" -eq "$code" ] || fail "kerac $* exited $rc, expected $code; stderr: $(cat "$T/err")"
    grep -Eq -- "$pat" "$T/err" || fail "kerac $*: stderr does not match '$pat': $(cat "$T/err")"
    grep -q 'HDF5-DIAG' "$T/err" && fail "kerac $*: HDF5 printed its own errors: $(cat "$T/err")"
    return 0
}

# IDX train/test split (12x12 images, 4 classes: class k lights up quadrant k) and
# x.npy (40, 12, 12) uint8 for predict
"$PY" - "$T" <<'PY' || fail "could not make the data"
import os, random, struct, sys
t = sys.argv[1]
rnd = random.Random(0)
def make(n):
    ys = [rnd.randrange(4) for _ in range(n)]
    xs = bytearray()
    for k in ys:
        r, c = divmod(k, 2)
        for i in range(12):
            for j in range(12):
                v = rnd.randrange(60)
                if r * 6 <= i < r * 6 + 6 and c * 6 <= j < c * 6 + 6:
                    v += 180
                xs.append(v)
    return bytes(xs), bytes(ys)
os.mkdir(os.path.join(t, "mn"))
for prefix, n in (("train", 160), ("t10k", 40)):
    x, y = make(n)
    with open(os.path.join(t, "mn", prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 12, 12) + x)
    with open(os.path.join(t, "mn", prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 2049, n) + y)
x, _ = make(40)
hdr = "{'descr': '|u1', 'fortran_order': False, 'shape': (40, 12, 12), }"
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
with open(os.path.join(t, "x.npy"), "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + x)
PY

# a JSON value from a one-line JSON object: jget FILE KEY
jget() { "$PY" -c 'import json, sys; print(repr(json.loads(open(sys.argv[1]).read().splitlines()[-1])[sys.argv[2]]))' "$1" "$2"; }

# ---- train and save a .keras file
run train --data "mnist:$T/mn" --epochs 1 --batch-size 32 --seed 3 --json --save "$T/m.keras"
test_loss=$(jget "$T/out" test_loss) && test_acc=$(jget "$T/out" test_accuracy) || fail "no test results: $(cat "$T/out")"
[ -s "$T/m.keras" ] || fail "--save did not write m.keras"
ls "$T" | grep -q '\.tmp$' && fail "a temporary file was left behind: $(ls "$T")"
"$PY" - "$T/m.keras" <<'PY' || exit 1
import json, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = z.namelist()
    if names != ["metadata.json", "config.json", "model.weights.h5"]:
        sys.exit("FAIL: m.keras holds %r" % names)
    if z.testzip() is not None:
        sys.exit("FAIL: m.keras has a bad CRC")
    meta = json.loads(z.read("metadata.json"))
    if not meta.get("keras_version", "").startswith("3.") or "@" not in meta.get("date_saved", ""):
        sys.exit("FAIL: metadata.json is %r" % meta)
    cfg = json.loads(z.read("config.json"))
    if cfg.get("class_name") != "Sequential" or len(cfg["config"]["layers"]) != 8:
        sys.exit("FAIL: config.json is not the 8-layer Sequential CNN")
    if not z.read("model.weights.h5").startswith(b"\x89HDF\r\n\x1a\n"):
        sys.exit("FAIL: model.weights.h5 is not HDF5")
PY

# ---- the saved model evaluates exactly as the trained one did
run evaluate "$T/m.keras" --data "mnist:$T/mn:test" --batch-size 32 --json
[ "$(jget "$T/out" loss)" = "$test_loss" ] || fail "evaluate m.keras: loss $(jget "$T/out" loss), training said $test_loss"
[ "$(jget "$T/out" accuracy)" = "$test_acc" ] || fail "evaluate m.keras: accuracy $(jget "$T/out" accuracy), training said $test_acc"
run predict "$T/m.keras" --input "$T/x.npy" --output "$T/p_keras.npy"
run summary "$T/m.keras"
grep -q 'mnist_convnet' "$T/out" || fail "summary of m.keras: $(cat "$T/out")"

# ---- .keras -> .h5 -> .keras: same evaluation, same predictions, byte for byte
run convert "$T/m.keras" "$T/m.h5"
grep -q "converted '$T/m.keras'.* to '$T/m.h5'" "$T/out" || fail "convert said: $(cat "$T/out")"
[ -s "$T/err" ] && fail "convert .keras -> .h5 wrote to stderr: $(cat "$T/err")"
head -c 8 "$T/m.h5" | cmp -s - <(printf '\x89HDF\r\n\x1a\n') || fail "m.h5 is not an HDF5 file"
run evaluate "$T/m.h5" --data "mnist:$T/mn:test" --batch-size 32 --json
[ "$(jget "$T/out" loss)" = "$test_loss" ] || fail "evaluate m.h5: loss $(jget "$T/out" loss), expected $test_loss"
[ "$(jget "$T/out" accuracy)" = "$test_acc" ] || fail "evaluate m.h5: accuracy differs"
run predict "$T/m.h5" --input "$T/x.npy" --output "$T/p_h5.npy"
cmp -s "$T/p_keras.npy" "$T/p_h5.npy" || fail "predictions of m.keras and m.h5 differ"
run convert "$T/m.h5" "$T/back.keras"
run predict "$T/back.keras" --input "$T/x.npy" --output "$T/p_back.npy"
cmp -s "$T/p_keras.npy" "$T/p_back.npy" || fail "predictions of m.keras and back.keras differ"

# ---- .json drops the weights, and a .json input gets fresh ones: both said on stderr
run convert "$T/m.keras" "$T/m.json"
grep -q "weights" "$T/err" || fail "convert to .json did not say that the weights are dropped"
run convert "$T/m.json" "$T/fresh.keras"
grep -q "freshly initialised" "$T/err" || fail "convert from .json did not say the weights are fresh"
run predict "$T/fresh.keras" --input "$T/x.npy" --output "$T/p_fresh.npy"
cmp -s "$T/p_keras.npy" "$T/p_fresh.npy" && fail "fresh weights predict exactly like the trained ones"

# ---- train --init-from continues from the saved weights; --save by extension
run train --init-from "$T/m.keras" --data "mnist:$T/mn" --epochs 1 --batch-size 32 --json --save "$T/m2.h5"
loss2=$(jget "$T/out" test_loss)
run evaluate "$T/m2.h5" --data "mnist:$T/mn:test" --batch-size 32 --json
[ "$(jget "$T/out" loss)" = "$loss2" ] || fail "evaluate m2.h5: loss $(jget "$T/out" loss), training said $loss2"
run train --init-from "$T/m.h5" --data "mnist:$T/mn" --epochs 1 --batch-size 32 --quiet --save "$T/w.weights.h5"
grep -q "saved model to '$T/w.weights.h5' (the weights only)" "$T/out" || fail "train --save .weights.h5: $(cat "$T/out")"
expect 1 "holds no weights" train --init-from "$T/m.json" --data "mnist:$T/mn"
expect 1 "not both" train "$T/m.json" --init-from "$T/m.keras" --data "mnist:$T/mn"

# ---- bad files: exit 2, the file named
head -c 3000 "$T/m.keras" >"$T/trunc.keras"
expect 2 "trunc\.keras.*zip" evaluate "$T/trunc.keras" --data "mnist:$T/mn:test"
expect 2 "trunc\.keras" predict "$T/trunc.keras" --input "$T/x.npy" --output "$T/p.npy"
expect 2 "trunc\.keras" summary "$T/trunc.keras"
expect 2 "trunc\.keras" convert "$T/trunc.keras" "$T/out.h5"
expect 2 "trunc\.keras" train --init-from "$T/trunc.keras" --data "mnist:$T/mn" --epochs 1
[ -e "$T/p.npy" ] || [ -e "$T/out.h5" ] && fail "a bad input still produced an output"
"$PY" - "$T/m.keras" "$T/noconfig.keras" <<'PY' || fail "could not make noconfig.keras"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(sys.argv[2], "w") as dst:
    for name in ("metadata.json", "model.weights.h5"):
        dst.writestr(name, src.read(name))
PY
expect 2 "noconfig\.keras.*config\.json" evaluate "$T/noconfig.keras" --data "mnist:$T/mn:test"
head -c 5000 /dev/urandom >"$T/garbage.h5"
expect 2 "garbage\.h5.*HDF5" evaluate "$T/garbage.h5" --data "mnist:$T/mn:test"
expect 2 "garbage\.h5" convert "$T/garbage.h5" "$T/out.keras"
head -c 4000 "$T/m.h5" >"$T/short.h5"
expect 2 "short\.h5" predict "$T/short.h5" --input "$T/x.npy" --output "$T/p.npy"
expect 2 "weights only|weights-only" summary "$T/w.weights.h5"
expect 1 "no model file extension" convert "$T/m.keras" "$T/m.txt"
expect 2 "no_dir/m\.keras" train --data "mnist:$T/mn" --epochs 1 --save "$T/no_dir/m.keras"
grep -q '^epoch' "$T/out" && fail "train --save into a missing folder trained before failing"
expect 2 "no_dir" convert "$T/m.keras" "$T/no_dir/m.h5"
ls "$T" | grep -Eq '\.tmp$|kerac-check' && fail "a temporary file was left behind: $(ls "$T")"
echo "files.sh: all checks passed"
