# tests/cli/lib/tiny.sh — sourced by CLI tests that need a small, fast training run.
# tiny_setup N: skips (exit 77) without /usr/bin/python3 + numpy; makes $T (removed at exit,
# with the background job $BG killed), fail(), and in $T: x.npy (N, 12, 12) uint8, y.npy (N,)
# int64 with 4 classes, tiny.json (Flatten, Dense 256, Dense 4: 38k weights, a 150 KB
# .keras file; an epoch of 2000 examples takes well under a second); DATA and TRAIN, the
# arguments of `kerac train` on them.
PY=/usr/bin/python3
fail() { echo "FAIL: $*" >&2; exit 1; }
tiny_setup() {
    "$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PY with numpy is needed to make the data"; exit 77; }
    T=$(mktemp -d) || exit 1
    BG=
    trap '[ -n "$BG" ] && kill -9 "$BG" 2>/dev/null; rm -rf "$T"' EXIT
    "$PY" - "$T" "$1" <<'PY' || fail "could not make the data"
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
np.save(os.path.join(t, "in.npy"), rng.random((8, 12, 12, 1), dtype=np.float32))
open(os.path.join(t, "tiny.json"), "w").write(
    '{"class_name": "Sequential", "config": {"name": "tiny", "layers": ['
    '{"class_name": "InputLayer", "config": {"batch_shape": [null, 12, 12, 1], "dtype": "float32", "name": "input"}}, '
    '{"class_name": "Flatten", "config": {"name": "flatten"}}, '
    '{"class_name": "Dense", "config": {"name": "hidden", "units": 256, "activation": "relu"}}, '
    '{"class_name": "Dense", "config": {"name": "dense", "units": 4, "activation": "softmax"}}]}}')
PY
    DATA=(--data "npy:$T/x.npy,$T/y.npy" --threads 1)
    TRAIN=(train "$T/tiny.json" "${DATA[@]}")
}

# This host's tag in kerac's temporary names "<path>.<host>-<pid>-<n>.tmp": FNV-1a of the
# host name, low 24 bits, bit 24 set (src/io/atomic_file.c).
host_tag() {
    "$PY" -c '
import socket
h = 2166136261
for c in socket.gethostname().encode(): h = ((h ^ c) * 16777619) & 0xffffffff
print("%07x" % ((h & 0xffffff) | 0x1000000))'
}

# A process id that was just used and is free now.
dead_pid() {
    true &
    local p=$!
    wait $p
    echo $p
}

# Run the Python program on stdin with numpy imported as np and t = $T (the test's folder).
tiny_py() {
    { echo 'import sys, numpy as np'; echo 't = sys.argv[1]'; cat; } | "$PY" - "$T" || fail "could not make the data"
}
