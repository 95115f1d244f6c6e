#!/bin/bash
# nonfinite.sh — a float32 .npy dataset holding one NaN (or Inf) is refused when it is opened,
# exit 2 naming the file and the first bad example (it used to train to exit 0 and leave NaN
# weights in the saved model); --allow-nonfinite-input accepts it for those who mean it.
set -u
K=${1:?usage: nonfinite.sh PATH/TO/kerac}
. "$(dirname "$0")/lib/tiny.sh"
tiny_setup 100
tiny_py <<'PY'
x = np.load(t + "/x.npy").astype(np.float32) / 255
x[17, 3, 4] = np.nan
np.save(t + "/nan.npy", x)
x[17, 3, 4] = 0
x[42, 0, 0] = np.inf
np.save(t + "/inf.npy", x)
PY
"$K" "${TRAIN[@]}" --epochs 1 --quiet --save "$T/w0.keras" >"$T/out" 2>&1 || fail "clean data: $(cat "$T/out")"
for bad in nan:NaN:17 inf:Inf:42; do
    f=${bad%%:*}; rest=${bad#*:}; what=${rest%%:*}; ex=${rest#*:}
    for cmd in train evaluate; do
        m=$T/tiny.json
        "$K" $cmd $([ $cmd = train ] && echo "$m --epochs 1 --save $T/w.keras" || echo "$T/w0.keras") \
            --data "npy:$T/$f.npy,$T/y.npy" >"$T/out" 2>"$T/err"
        rc=$?
        [ $rc = 2 ] || fail "$cmd on $f.npy: exit $rc, expected 2: $(cat "$T/err")"
        grep -q "images file '$T/$f.npy' holds $what at example $ex " "$T/err" ||
            fail "$cmd on $f.npy: the message does not name the file and example $ex: $(cat "$T/err")"
    done
done
[ -e "$T/w.keras" ] && fail "a model was saved from data holding NaN"
"$K" train --allow-nonfinite-input "$T/tiny.json" --epochs 1 --data "npy:$T/nan.npy,$T/y.npy" --threads 1 --quiet \
    >"$T/out" 2>&1 || fail "--allow-nonfinite-input: $(cat "$T/out")"
echo "NaN and Inf in float32 inputs: refused naming file and example; --allow-nonfinite-input accepts them"
exit 0
