# tests/cli/lib/tiny.sh — sourced by CLI tests that need a small, fast training run:
# tiny_data DIR N writes DIR/x.npy (N, 12, 12) uint8, DIR/y.npy (N,) int64 with 4 classes
# and DIR/tiny.json (Flatten, Dense 256, Dense 4: 38k weights, a 150 KB .keras file;
# an epoch of 2000 examples takes well under a second); needs
# /usr/bin/python3 with numpy (the caller skips, exit 77, when tiny_ok fails).
PY=/usr/bin/python3
tiny_ok() { "$PY" -c 'import numpy' 2>/dev/null; }
tiny_data() {
    "$PY" - "$1" "$2" <<'PY'
import sys, os
import numpy as np
t, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(5)
y = rng.integers(0, 4, n)
x = rng.integers(0, 60, (n, 12, 12)).astype(np.uint8)
for i, k in enumerate(y):
    r, c = divmod(int(k), 2)
    x[i, r * 6:(r + 1) * 6, c * 6:(c + 1) * 6] += 150
np.save(os.path.join(t, "x.npy"), x)
np.save(os.path.join(t, "y.npy"), y.astype(np.int64))
open(os.path.join(t, "tiny.json"), "w").write(
    '{"class_name": "Sequential", "config": {"name": "tiny", "layers": ['
    '{"class_name": "InputLayer", "config": {"batch_shape": [null, 12, 12, 1], "dtype": "float32", "name": "input"}}, '
    '{"class_name": "Flatten", "config": {"name": "flatten"}}, '
    '{"class_name": "Dense", "config": {"name": "hidden", "units": 256, "activation": "relu"}}, '
    '{"class_name": "Dense", "config": {"name": "dense", "units": 4, "activation": "softmax"}}]}}')
PY
}
