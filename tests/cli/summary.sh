#!/bin/bash
# summary.sh — `kerac summary`: the default CNN's table (layer rows, 34,826 parameters,
# FLOPs), the default CNN for other input shapes, and tables for Sequential and
# Functional models read from Keras JSON files.
set -u
K=${1:?usage: summary.sh PATH/TO/kerac}
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
has() { grep -Eq -- "$1" "$T/out" || fail "$2: no line matching '$1' in:
$(cat "$T/out")"; }

# ---- the default CNN (Keras's mnist_convnet for 28x28x1, 10 classes)
"$K" summary >"$T/out" 2>"$T/err" || fail "kerac summary exited $?: $(cat "$T/err")"
what="default CNN"
has '^Model: "[A-Za-z0-9_]+"$' "$what"
has 'Layer \(type\) +Output Shape +Param # +FLOPs' "$what"
has '\(Conv2D\) +\(None, 26, 26, 32\) +320 +[1-9][0-9,]*$' "$what"
has '\(MaxPooling2D\) +\(None, 13, 13, 32\) +0 ' "$what"
has '\(Conv2D\) +\(None, 11, 11, 64\) +18,496 +[1-9]' "$what"
has '\(MaxPooling2D\) +\(None, 5, 5, 64\) +0 ' "$what"
has '\(Flatten\) +\(None, 1600\) +0 ' "$what"
has '\(Dropout\) +\(None, 1600\) +0 ' "$what"
has '\(Dense\) +\(None, 10\) +16,010 +[1-9]' "$what"
has '^Total params: 34,826 \(136\.04 KB\)$' "$what"
has '^Trainable params: 34,826 \(136\.04 KB\)$' "$what"
has '^Non-trainable params: 0 \(0\.00 B\)$' "$what"
has '^FLOPs per example: [1-9][0-9,]+ \([0-9.]+ [KMG]?FLOPs\)$' "$what"
# a Sequential table has no InputLayer row and no "Connected to" column
grep -q 'InputLayer' "$T/out" && fail "$what: the Sequential table shows the InputLayer"
grep -q 'Connected to' "$T/out" && fail "$what: the Sequential table has a 'Connected to' column"
[ "$(grep -c '(None, ' "$T/out")" -eq 7 ] || fail "$what: expected 7 layer rows"
# conv2d FLOPs: 26*26 positions x 32 filters x 3*3*1 multiply-adds x 2 = 389,376
has '\(None, 26, 26, 32\) +320 +389,376$' "$what FLOPs"
# the column of FLOPs adds up to the total
total=$(sed -n 's/^FLOPs per example: \([0-9,]*\) .*/\1/p' "$T/out" | tr -d ,)
sum=$(grep '(None, ' "$T/out" | awk '{gsub(",", "", $NF); s += $NF} END {print s}')
[ "$total" = "$sum" ] || fail "$what: FLOPs column sums to $sum, total says $total"

# ---- the default CNN for CIFAR-sized input: (32, 32, 3) -> 30x30x32 ... 6x6x64 = 2304
"$K" summary --input-shape 32,32,3 --classes 10 >"$T/out" 2>"$T/err" || fail "summary --input-shape exited $?: $(cat "$T/err")"
what="default CNN 32x32x3"
has '\(Conv2D\) +\(None, 30, 30, 32\) +896 ' "$what"
has '\(Flatten\) +\(None, 2304\) +0 ' "$what"
has '\(Dense\) +\(None, 10\) +23,050 ' "$what"
has '^Total params: 42,442 ' "$what"

# ---- a Sequential model from Keras 3 JSON
cat >"$T/seq.json" <<'JSON'
{"module": "keras", "class_name": "Sequential", "registered_name": null,
 "config": {"name": "tiny_seq", "trainable": true, "layers": [
  {"module": "keras.layers", "class_name": "InputLayer", "registered_name": null,
   "config": {"batch_shape": [null, 8, 8, 1], "dtype": "float32", "sparse": false, "name": "input_layer"}},
  {"module": "keras.layers", "class_name": "Conv2D", "registered_name": null,
   "config": {"name": "c1", "trainable": true, "dtype": "float32", "filters": 4, "kernel_size": [3, 3],
              "strides": [1, 1], "padding": "valid", "data_format": "channels_last", "dilation_rate": [1, 1],
              "groups": 1, "activation": "relu", "use_bias": true}},
  {"module": "keras.layers", "class_name": "Flatten", "registered_name": null,
   "config": {"name": "flat", "trainable": true, "dtype": "float32", "data_format": "channels_last"}},
  {"module": "keras.layers", "class_name": "Dense", "registered_name": null,
   "config": {"name": "out", "trainable": true, "dtype": "float32", "units": 3, "activation": "softmax",
              "use_bias": true}}]}}
JSON
"$K" summary "$T/seq.json" >"$T/out" 2>"$T/err" || fail "summary seq.json exited $?: $(cat "$T/err")"
what="Sequential JSON"
has '^Model: "tiny_seq"$' "$what"
has '^ c1 \(Conv2D\) +\(None, 6, 6, 4\) +40 ' "$what"
has '^ flat \(Flatten\) +\(None, 144\) +0 ' "$what"
has '^ out \(Dense\) +\(None, 3\) +435 ' "$what"
has '^Total params: 475 \(1\.86 KB\)$' "$what"

# ---- a Functional model (Keras 2 JSON): two branches joined by Add
cat >"$T/func.json" <<'JSON'
{"class_name": "Functional", "config": {"name": "tiny_res", "layers": [
  {"class_name": "InputLayer", "name": "img", "inbound_nodes": [],
   "config": {"batch_input_shape": [null, 8, 8, 2], "dtype": "float32", "name": "img"}},
  {"class_name": "Conv2D", "name": "a", "inbound_nodes": [[["img", 0, 0, {}]]],
   "config": {"name": "a", "filters": 2, "kernel_size": [3, 3], "padding": "same", "activation": "relu"}},
  {"class_name": "Conv2D", "name": "b", "inbound_nodes": [[["img", 0, 0, {}]]],
   "config": {"name": "b", "filters": 2, "kernel_size": [1, 1]}},
  {"class_name": "Add", "name": "sum", "inbound_nodes": [[["a", 0, 0, {}], ["b", 0, 0, {}]]],
   "config": {"name": "sum"}},
  {"class_name": "GlobalAveragePooling2D", "name": "gap", "inbound_nodes": [[["sum", 0, 0, {}]]],
   "config": {"name": "gap"}},
  {"class_name": "Dense", "name": "out", "inbound_nodes": [[["gap", 0, 0, {}]]],
   "config": {"name": "out", "units": 2, "activation": "softmax"}}],
 "input_layers": [["img", 0, 0]], "output_layers": [["out", 0, 0]]}}
JSON
"$K" summary "$T/func.json" >"$T/out" 2>"$T/err" || fail "summary func.json exited $?: $(cat "$T/err")"
what="Functional JSON"
has '^Model: "tiny_res"$' "$what"
has 'Layer \(type\) +Output Shape +Param # +FLOPs +Connected to' "$what"
has '^ img \(InputLayer\) +\(None, 8, 8, 2\) +0 ' "$what"
has '^ a \(Conv2D\) +\(None, 8, 8, 2\) +38 +[0-9,]+ +img\[0\]\[0\]$' "$what"
has '^ b \(Conv2D\) +\(None, 8, 8, 2\) +6 +[0-9,]+ +img\[0\]\[0\]$' "$what"
has '^ sum \(Add\) +\(None, 8, 8, 2\) +0 +[0-9,]+ +a\[0\]\[0\]$' "$what"
has '^ +b\[0\]\[0\]$' "$what"
has '^ out \(Dense\) +\(None, 2\) +6 +[0-9,]+ +gap\[0\]\[0\]$' "$what"
has '^Total params: 50 \(200\.00 B\)$' "$what"
echo "summary.sh: all checks passed"
