#!/bin/bash
# npy_rule.sh — one .npy rule for training data and predict's input: uint8, float32 and
# float64, little- or big-endian, all read (float64 narrowed to float32). train used to take
# big-endian and refuse float64 while predict did the opposite. The same values in every
# encoding train the same model (with one seed) and give the same predictions, byte for byte.
set -u
K=${1:?usage: npy_rule.sh PATH/TO/kerac}
. "$(dirname "$0")/lib/tiny.sh"
tiny_setup 200
tiny_py <<'PY'
x = (np.load(t + "/x.npy").astype(np.float32) / 255)[..., None]
for name, dt in [("lf4", "<f4"), ("bf4", ">f4"), ("lf8", "<f8"), ("bf8", ">f8")]:
    np.save(t + "/" + name + ".npy", x.astype(dt))
PY
ref=
for enc in lf4 bf4 lf8 bf8; do
    "$K" train "$T/tiny.json" --data "npy:$T/$enc.npy,$T/y.npy" --threads 1 --epochs 1 --seed 9 --quiet --save "$T/$enc.keras" \
        >"$T/out" 2>&1 || fail "train on $enc: $(cat "$T/out")"
    "$K" predict "$T/$enc.keras" --input "$T/$enc.npy" --output "$T/p_$enc.npy" >"$T/out" 2>&1 ||
        fail "predict with $enc input: $(cat "$T/out")"
    [ -z "$ref" ] && ref=$enc
    cmp -s "$T/p_$ref.npy" "$T/p_$enc.npy" || fail "$enc: other predictions than $ref"
done
echo ".npy rule: float32 and float64, little- and big-endian, the same for train and predict"
exit 0
