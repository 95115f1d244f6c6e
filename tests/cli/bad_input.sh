#!/bin/bash
# bad_input.sh — every bad input to `kerac` gives its own clear message on stderr and the
# documented exit code (2: bad input file, 3: failure while running): malformed JSON,
# unknown layer class, missing data file, truncated and wrong-magic IDX files, a model
# whose input shape does not fit the data, labels out of the model's range, bad .npy
# input to predict. Files are made here with printf/head (no Python needed).
set -u
K=${1:?usage: bad_input.sh PATH/TO/kerac}
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODES PATTERN ARGS...: kerac exits with one of CODES ("2" or "2|3"), says
# "kerac: ..." on stderr, and stderr matches the extended regex PATTERN (case-insensitive)
expect() {
    local codes=$1 pat=$2; shift 2
    timeout 60 "$K" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [[ "$rc" =~ ^($codes)$ ]] || fail "kerac $* exited $rc, expected $codes; stderr: $(cat "$T/err")"
    grep -q '^kerac: ' "$T/err" || fail "kerac $*: no 'kerac: ' error line on stderr: $(cat "$T/err")"
    grep -Eiq -- "$pat" "$T/err" || fail "kerac $*: stderr does not match '$pat': $(cat "$T/err")"
}

# npy FILE DESCR SHAPE: write a version 1.0 .npy header, then the data from stdin
npy() {
    local dict="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
    local total=$((10 + ${#dict} + 1))
    local padded=$(((total + 63) / 64 * 64))
    local hlen=$((padded - 10))
    {
        printf '\x93NUMPY\x01\x00'
        printf "\\x$(printf %02x $((hlen & 255)))\\x$(printf %02x $((hlen >> 8)))"
        printf '%s%*s\n' "$dict" $((padded - total)) ""
        cat
    } >"$1"
}
# int64 little-endian labels from the arguments
labels() { for v in "$@"; do printf "\\x$(printf %02x "$v")\\x00\\x00\\x00\\x00\\x00\\x00\\x00"; done; }
# be32 N: a big-endian 32-bit number (IDX header fields)
be32() { printf "\\x$(printf %02x $(($1 >> 24 & 255)))\\x$(printf %02x $(($1 >> 16 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))\\x$(printf %02x $(($1 & 255)))"; }

# a small Sequential model for (H, W, C) inputs and 10 classes: Flatten -> Dense(10)
model() {
    cat >"$1" <<JSON
{"class_name": "Sequential", "config": {"name": "$2", "layers": [
  {"class_name": "InputLayer", "config": {"batch_shape": [null, $3], "dtype": "float32", "name": "in"}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 10, "activation": "softmax"}}]}}
JSON
}

# 16 examples of 28x28 uint8 images (N, 28, 28) with labels 0..9, and labels 0..12
head -c $((16 * 784)) /dev/zero | npy "$T/x.npy" '|u1' '(16, 28, 28)'
labels 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 | npy "$T/y.npy" '<i8' '(16,)'
labels 0 1 2 3 4 5 6 7 8 9 10 11 12 0 1 2 | npy "$T/y13.npy" '<i8' '(16,)'
model "$T/m28.json" m28 "28, 28, 1"
model "$T/m32.json" m32 "32, 32, 3"

# ---- malformed JSON
printf '{"class_name": "Sequential", "config": {"name": "broken", "layers": [' >"$T/broken.json"
expect 2 'json' summary "$T/broken.json"
expect 2 'broken\.json' summary "$T/broken.json"
expect 2 'json' train "$T/broken.json" --data "npy:$T/x.npy,$T/y.npy" --epochs 1
expect 2 'json' evaluate "$T/broken.json" --data "npy:$T/x.npy,$T/y.npy"
expect 2 'json' predict "$T/broken.json" --input "$T/x.npy" --output "$T/p.npy"
[ -e "$T/p.npy" ] && fail "predict wrote an output for a broken model"

# ---- an unknown layer class
sed 's/"Flatten"/"FancyLayer"/' "$T/m28.json" >"$T/fancy.json"
expect 2 'FancyLayer' summary "$T/fancy.json"
expect 2 'FancyLayer' train "$T/fancy.json" --data "npy:$T/x.npy,$T/y.npy" --epochs 1

# ---- missing files
expect 2 'nope\.npy' train --data "npy:$T/nope.npy,$T/y.npy" --epochs 1
expect 2 'nope_model\.json' summary "$T/nope_model.json"
expect 2 'nope_model\.json' evaluate "$T/nope_model.json" --data "npy:$T/x.npy,$T/y.npy"
expect 2 'no_such_dir' train --data "mnist:$T/no_such_dir" --epochs 1

# ---- IDX files: a valid tiny pair (8 images of 12x12), a truncated copy, a wrong magic
{ be32 2051; be32 8; be32 12; be32 12; head -c $((8 * 144)) /dev/zero; } >"$T/images.idx"
{ be32 2049; be32 8; printf '\x00\x01\x02\x03\x04\x05\x06\x07'; } >"$T/labels.idx"
head -c 600 "$T/images.idx" >"$T/trunc.idx"
{ printf 'GIF8'; tail -c +5 "$T/images.idx"; } >"$T/magic.idx"
expect 2 'trunc\.idx' train --data "idx:$T/trunc.idx,$T/labels.idx" --epochs 1
expect 2 'truncat|short|expect|bytes|size|end of file' train --data "idx:$T/trunc.idx,$T/labels.idx" --epochs 1
expect 2 'magic' train --data "idx:$T/magic.idx,$T/labels.idx" --epochs 1
expect 2 'magic\.idx' train --data "idx:$T/magic.idx,$T/labels.idx" --epochs 1
# labels and images that disagree on the count
{ be32 2049; be32 5; printf '\x00\x01\x02\x03\x04'; } >"$T/labels5.idx"
expect 2 '5|8' train --data "idx:$T/images.idx,$T/labels5.idx" --epochs 1

# ---- a model for 32x32x3 trained on 28x28x1 data
expect '2|3' 'shape' train "$T/m32.json" --data "npy:$T/x.npy,$T/y.npy" --epochs 1
expect '2|3' '32, 32, 3' train "$T/m32.json" --data "npy:$T/x.npy,$T/y.npy" --epochs 1
expect '2|3' 'shape' evaluate "$T/m32.json" --data "npy:$T/x.npy,$T/y.npy"
expect 2 'shape' predict "$T/m32.json" --input "$T/x.npy" --output "$T/p.npy"

# ---- labels 0..12 for a model with 10 outputs
expect '2|3' 'label' train "$T/m28.json" --data "npy:$T/x.npy,$T/y13.npy" --epochs 1
expect '2|3' '12|13' train "$T/m28.json" --data "npy:$T/x.npy,$T/y13.npy" --epochs 1
expect '2|3' 'label' evaluate "$T/m28.json" --data "npy:$T/x.npy,$T/y13.npy"

# ---- --save to a path that cannot be written fails before training starts
expect 2 'no_dir/m\.json' train --data "npy:$T/x.npy,$T/y.npy" --epochs 1 --save "$T/no_dir/m.json"
grep -q '^epoch' "$T/out" && fail "train --save into a missing folder trained before failing"
expect '2|3' "'[^']*m\.unknownext'" train --data "npy:$T/x.npy,$T/y.npy" --epochs 1 --save "$T/m.unknownext"
grep -q 'kerac-check' "$T/err" && fail "the --save check leaked its scratch file name: $(cat "$T/err")"
ls "$T" | grep -q 'kerac-check' && fail "the --save check left a scratch file behind"
expect '1|2|3' "'[^']*/modelnoext': unknown model file extension: use \.keras, \.h5, \.weights\.h5 or \.json" \
    train --data "npy:$T/x.npy,$T/y.npy" --epochs 1 --save "$T/modelnoext"
grep -q 'kerac-check' "$T/err" && fail "the --save check leaked its scratch file name: $(cat "$T/err")"

# ---- --grad-accum larger than the batch, a malformed KERAC_MEMORY_LIMIT: usage errors (exit 1)
# before anything runs, not a failure after training started or a "model file" error
"$K" train --data "npy:$T/x.npy,$T/y.npy" --batch-size 4 --grad-accum 8 --epochs 1 >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 1 ] && grep -q "'--grad-accum 8' splits each batch into 8 micro-batches, more than the 4" "$T/err" ||
    fail "--grad-accum 8 with --batch-size 4: exit $rc: $(cat "$T/err")"
grep -q '^epoch' "$T/out" && fail "--grad-accum larger than the batch started training"
KERAC_MEMORY_LIMIT=garbage "$K" summary "$T/m28.json" >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 1 ] && grep -q "^kerac: environment variable KERAC_MEMORY_LIMIT='garbage' is not a memory size" "$T/err" ||
    fail "KERAC_MEMORY_LIMIT=garbage: exit $rc: $(cat "$T/err")"

# ---- bad .npy input to predict
printf 'this is not numpy' >"$T/garbage.npy"
expect 2 'not a \.npy file' predict "$T/m28.json" --input "$T/garbage.npy" --output "$T/p.npy"
head -c 200 "$T/x.npy" >"$T/short.npy"
expect 2 'truncated' predict "$T/m28.json" --input "$T/short.npy" --output "$T/p.npy"
head -c 64 /dev/zero | npy "$T/i16.npy" '<i2' '(2, 4, 4)'
expect 2 "unsupported \.npy dtype '<i2'" predict "$T/m28.json" --input "$T/i16.npy" --output "$T/p.npy"
expect 2 'cannot open' predict "$T/m28.json" --input "$T/missing.npy" --output "$T/p.npy"
[ -e "$T/p.npy" ] && fail "predict wrote an output for bad input"
echo "bad_input.sh: all checks passed"
