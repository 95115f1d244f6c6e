#!/bin/bash
# observe_logs.sh — `kerac train --csv` and `--tensorboard` on tiny generated data:
#  - the CSV is Keras's CSVLogger format (header "epoch,accuracy,loss,val_accuracy,val_loss",
#    0-based epochs) and matches the --json history; --csv-append adds rows under one header;
#  - the TensorBoard event files are read back by the real `tensorboard` package (installed
#    from PyPI into a virtual environment kept in the build folder): every scalar of
#    DIR/train and DIR/validation with its step and value (float32 of the CSV's value),
#    batch scalars every --tensorboard-update-freq steps, a histogram per weight and epoch;
#    a flipped byte in a record is refused (the CRC is checked).
# Skips (77) without numpy to make the data, or when PyPI cannot be reached.
set -u
. "$(dirname "$0")/lib/observe_common.bash"

"$PY" - "$T" <<'PY' || fail "could not make the data"
import sys, os
import numpy as np
t = sys.argv[1]
rng = np.random.default_rng(0)
y = rng.integers(0, 4, 300)
x = rng.integers(0, 60, (300, 12, 12)).astype(np.uint8)
for i, k in enumerate(y):
    r, c = divmod(int(k), 2)
    x[i, r * 6:(r + 1) * 6, c * 6:(c + 1) * 6] += 180
np.save(os.path.join(t, "x.npy"), x)
np.save(os.path.join(t, "y.npy"), y.astype(np.int64))
PY

# 240 training examples at batch 32: 8 steps an epoch, 24 in 3 epochs
timeout 120 "$K" train --data "npy:$T/x.npy,$T/y.npy" --epochs 3 --batch-size 32 --validation-split 0.2 \
    --seed 3 --json --csv "$T/h.csv" --tensorboard "$T/tb" --tensorboard-update-freq 5 --histogram-freq 1 \
    >"$T/out.json" 2>"$T/err" || fail "kerac train exited $?: $(cat "$T/err")"

"$PY" - "$T" <<'PY' || fail "the CSV does not match the history"
import sys, json, csv
t = sys.argv[1]
hist = [json.loads(l) for l in open(t + "/out.json") if '"epoch"' in l]
raw = open(t + "/h.csv", newline="").read()
assert raw.startswith("epoch,accuracy,loss,val_accuracy,val_loss\r\n"), raw[:60]
rows = list(csv.DictReader(open(t + "/h.csv", newline="")))
assert len(rows) == len(hist) == 3, (len(rows), len(hist))
for r, h in zip(rows, hist):
    assert int(r["epoch"]) == h["epoch"] - 1, (r, h)
    for k in ("loss", "accuracy", "val_loss", "val_accuracy"):
        a, b = float(r[k]), h[k]
        assert abs(a - b) <= 1e-5 * max(1.0, abs(b)), (k, a, b)
PY

# --csv-append: one header, the new rows after the old
timeout 120 "$K" train --data "npy:$T/x.npy,$T/y.npy" --epochs 1 --batch-size 32 --validation-split 0.2 \
    --quiet --csv "$T/h.csv" --csv-append >/dev/null 2>"$T/err" || fail "kerac train --csv-append: $(cat "$T/err")"
[ "$(grep -c '^epoch,' "$T/h.csv")" = 1 ] || fail "--csv-append wrote a second header: $(cat "$T/h.csv")"
[ "$(wc -l <"$T/h.csv")" = 5 ] || fail "--csv-append: expected 1 header + 4 rows: $(cat "$T/h.csv")"
# usage errors
"$K" train --csv-append >/dev/null 2>"$T/err"; [ $? = 1 ] || fail "--csv-append without --csv is a usage error"
"$K" train --csv /nonexistent/dir/h.csv --data "npy:$T/x.npy,$T/y.npy" >/dev/null 2>"$T/err"
[ $? != 0 ] && grep -q "nonexistent" "$T/err" || fail "an unwritable --csv path must fail before training"

# TensorBoard: the real reader, from PyPI
VENV=${KERAC_BINARY_DIR:-$T}/tb-venv
if ! "$VENV/bin/python" -c 'import tensorboard' 2>/dev/null; then
    if ! "$PY" -c 'import urllib.request; urllib.request.urlopen("https://pypi.org/simple/tensorboard/", timeout=15)' \
        2>/dev/null; then
        echo "SKIP: PyPI cannot be reached to install the tensorboard package"
        exit 77
    fi
    rm -rf "$VENV"
    "$PY" -m venv --system-site-packages "$VENV" || fail "could not make a virtual environment (python3-venv)"
    "$VENV/bin/pip" install -q tensorboard >"$T/pip.log" 2>&1 || fail "pip install tensorboard: $(tail -5 "$T/pip.log")"
fi
"$VENV/bin/python" - "$T" <<'PY' || fail "TensorBoard did not read back what the CSV holds"
import sys, csv, glob, shutil, struct
import numpy as np
from tensorboard.backend.event_processing import event_accumulator as ea
t = sys.argv[1]
rows = list(csv.DictReader(open(t + "/h.csv", newline="")))[:3]
def load(d):
    acc = ea.EventAccumulator(d, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
    acc.Reload()
    return acc
tr, va = load(t + "/tb/train"), load(t + "/tb/validation")
f32 = lambda v: float(np.float32(v))
def expect(acc, tag, steps, values=None):
    ev = acc.Scalars(tag)
    got = [e.step for e in ev]
    assert got == steps, (tag, got, steps)
    if values is not None:
        for e, v in zip(ev, values):
            assert e.value == f32(v), (tag, e.step, e.value, v)
    return ev
expect(tr, "epoch_loss", [0, 1, 2], [r["loss"] for r in rows])
expect(tr, "epoch_accuracy", [0, 1, 2], [r["accuracy"] for r in rows])
expect(va, "epoch_loss", [0, 1, 2], [r["val_loss"] for r in rows])
expect(va, "epoch_accuracy", [0, 1, 2], [r["val_accuracy"] for r in rows])
expect(tr, "epoch_learning_rate", [0, 1, 2], [0.001] * 3)
for e in expect(tr, "epoch_images_per_second", [0, 1, 2]): assert e.value > 0
expect(tr, "epoch_seconds", [0, 1, 2])
# update_freq 5 over 24 steps: steps 5, 10, 15, 20; the running mean of the epoch so far
bl = expect(tr, "batch_loss", [5, 10, 15, 20])
assert all(0 < e.value < 10 for e in bl)
expect(tr, "batch_accuracy", [5, 10, 15, 20])
hs = tr.Tags()["histograms"]
assert "conv2d/kernel/histogram" in hs and "dense/bias/histogram" in hs, hs
h = tr.Histograms("conv2d/kernel/histogram")
assert [e.step for e in h] == [0, 1, 2], [e.step for e in h]
assert h[0].histogram_value.num == 3 * 3 * 1 * 32, h[0].histogram_value.num
assert abs(sum(h[0].histogram_value.bucket) - 288) < 1e-9
# a flipped byte in the last record's payload: the reader refuses that record
f = glob.glob(t + "/tb/validation/events.out.tfevents.*")[0]
shutil.copytree(t + "/tb/validation", t + "/bad")
g = glob.glob(t + "/bad/events.out.tfevents.*")[0]
data = bytearray(open(g, "rb").read())
data[-8] ^= 0x40
open(g, "wb").write(bytes(data))
bad = load(t + "/bad")
n = len(bad.Scalars("epoch_loss")) if "epoch_loss" in bad.Tags()["scalars"] else 0
assert n == 2, ("a corrupted record was read", n)
print("tensorboard read back", sum(len(tr.Scalars(x)) for x in tr.Tags()["scalars"]) +
      sum(len(va.Scalars(x)) for x in va.Tags()["scalars"]), "scalars")
PY
echo "PASS"
