#!/bin/bash
# transfer.sh — the fine-tuning recipe with the command alone: a new head on a saved base
# (--head; the base's layers frozen), then the top of the base unfrozen (--trainable-from)
# at a lower learning rate; the frozen layers are kept in the saved files, `kerac summary`
# counts trainable and non-trainable parameters as Keras does, --resume refuses a new
# trainable set, and bad --head / --freeze values are usage errors.
set -u
K=${1:?usage: transfer.sh PATH/TO/kerac}
. "$(dirname "$0")/lib/tiny.sh"
tiny_setup 200
cat >"$T/base.json" <<'JSON'
{"class_name": "Sequential", "config": {"name": "base", "layers": [
 {"class_name": "InputLayer", "config": {"batch_shape": [null, 12, 12, 1], "dtype": "float32", "name": "input"}},
 {"class_name": "Conv2D", "config": {"name": "block1_conv", "filters": 4, "kernel_size": [3, 3], "activation": "relu"}},
 {"class_name": "BatchNormalization", "config": {"name": "block1_bn"}},
 {"class_name": "Conv2D", "config": {"name": "block2_conv", "filters": 6, "kernel_size": [3, 3], "activation": "relu"}}]}}
JSON
"$K" convert "$T/base.json" "$T/base.keras" --quiet >"$T/out" 2>&1 || fail "convert: $(cat "$T/out")"
# stage 1: frozen base + new head; the base's 4*9+4 + 4*4 + 6*4*9+6 = 278 weights stay
"$K" train "$T/base.keras" --head 'GlobalAveragePooling2D,Dropout:0.2,Dense:4:softmax' "${DATA[@]}" --epochs 2 \
    --save "$T/s1.keras" >"$T/out" 2>&1 || fail "stage 1: $(cat "$T/out")"
grep -q "training 'base' (306 params, 28 trainable)" "$T/out" || fail "stage 1 header: $(cat "$T/out")"
"$K" summary "$T/s1.keras" >"$T/sum" 2>&1 || fail "summary: $(cat "$T/sum")"
grep -q "^Trainable params: 28 " "$T/sum" && grep -q "^Non-trainable params: 278 " "$T/sum" ||
    fail "stage 1 summary: $(cat "$T/sum")"
"$PY" - "$T/s1.keras" <<'PY' || fail "stage 1: the saved config does not freeze the base"
import json, sys, zipfile
cfg = json.loads(zipfile.ZipFile(sys.argv[1]).read("config.json"))
flags = {l["config"]["name"]: l["config"].get("trainable", True) for l in cfg["config"]["layers"]}
want = {"block1_conv": False, "block1_bn": False, "block2_conv": False, "head_global_average_pooling2d": True,
        "head_dropout": True, "head_dense": True}
sys.exit(0 if all(flags.get(k) == v for k, v in want.items()) else 1)
PY
# stage 2: unfreeze the top block, lower learning rate; checkpoints for the resume below
"$K" train "$T/s1.keras" --trainable-from block2_conv --lr 1e-4 "${DATA[@]}" --epochs 1 --checkpoint "$T/ck" \
    --save "$T/s2.h5" >"$T/out" 2>&1 || fail "stage 2: $(cat "$T/out")"
"$K" summary "$T/s2.h5" >"$T/sum" 2>&1 || fail "summary: $(cat "$T/sum")"
grep -q "^Trainable params: 250 " "$T/sum" && grep -q "^Non-trainable params: 56 " "$T/sum" ||
    fail "stage 2 summary: $(cat "$T/sum")"
# a resume goes on with the checkpoint's trainable set, and refuses another
"$K" train --resume "$T/ck" --freeze head_dense "${DATA[@]}" >"$T/out" 2>&1
[ $? = 1 ] && grep -q -- "--init-from" "$T/out" || fail "--resume with --freeze: $(cat "$T/out")"
"$K" train --resume "$T/ck" --epochs 2 "${DATA[@]}" --quiet >"$T/out" 2>&1 || fail "resume: $(cat "$T/out")"
# usage errors name what is wrong
"$K" train "$T/s1.keras" --freeze nosuchlayer "${DATA[@]}" >"$T/out" 2>&1
[ $? = 1 ] && grep -q "no layer named 'nosuchlayer'" "$T/out" || fail "--freeze nosuchlayer: $(cat "$T/out")"
"$K" train "$T/base.keras" --head 'Dense:4:softmax:extra' "${DATA[@]}" >"$T/out" 2>&1
[ $? = 1 ] && grep -q "CLASS\[:ARG...\]" "$T/out" || fail "--head with a bad item: $(cat "$T/out")"
"$K" train --head 'Dense:4' "${DATA[@]}" >"$T/out" 2>&1
[ $? = 1 ] || fail "--head without a model: $(cat "$T/out")"
echo "fine-tuning with the CLI: --head freezes the base (28 of 306 trainable), --trainable-from unfreezes the top (250)"
exit 0
