# tests/cli/lib/dist.sh — sourced by the data-parallel CLI tests (distributed*.sh).
# dist_setup: skips (77) without mpirun, /usr/bin/python3 + numpy or Fashion-MNIST; makes
# $T (removed at exit, with the background job $BG killed), fail(), and in $T: x.npy (256
# Fashion-MNIST training images, uint8), y.npy, probe.npy (8 other images, float32);
# DATA, COMMON (seed 7, 1 thread, SGD lr 0.05, quiet) and MPI (mpirun on this machine).
# model FILE UNITS [LAYERS]: Flatten -> Dense(UNITS, relu) [-> LAYERS (JSON, each
# followed by a comma)] -> Dense(10, softmax).
# mpi_or_skip OUT ARGS...: mpirun ARGS (300 s at most), skipping (77) when kerac was
# built without MPI, failing with OUT's text otherwise.
# predict NAME...: $T/NAME.keras's outputs on the probe into $T/NAME.npy.
PY=/usr/bin/python3
FM=/usr/share/datasets/fashion-mnist
fail() { echo "FAIL: $*" >&2; exit 1; }
dist_setup() {
    command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
    "$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PY with numpy is needed to make the data"; exit 77; }
    [ -f "$FM/train-images-idx3-ubyte.gz" ] || { echo "SKIP: $FM not installed"; exit 77; }
    T=$(mktemp -d) || exit 1
    BG=
    trap '[ -n "$BG" ] && kill -9 "$BG" 2>/dev/null; rm -rf "$T"' EXIT
    export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
    MPI=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader)
    "$PY" - "$T" "$FM" <<'PY' || fail "could not make the data"
import gzip, os, sys
import numpy as np
t, fm = sys.argv[1], sys.argv[2]
with gzip.open(os.path.join(fm, "train-images-idx3-ubyte.gz")) as f:
    x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
with gzip.open(os.path.join(fm, "train-labels-idx1-ubyte.gz")) as f:
    y = np.frombuffer(f.read(), np.uint8, offset=8)
np.save(os.path.join(t, "x.npy"), x[:256].copy())
np.save(os.path.join(t, "y.npy"), y[:256].astype(np.int64))
np.save(os.path.join(t, "probe.npy"), (x[1000:1008] / 255.0).astype(np.float32))
PY
    DATA="npy:$T/x.npy,$T/y.npy"
    COMMON=(--data "$DATA" --seed 7 --threads 1 --optimizer sgd --lr 0.05 --quiet)
}
model() {
    cat >"$1" <<JSON
{"class_name": "Sequential", "config": {"name": "dp", "layers": [
  {"class_name": "InputLayer", "config": {"batch_shape": [null, 28, 28, 1], "dtype": "float32", "name": "in"}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "hidden", "units": $2, "activation": "relu"}},${3:-}
  {"class_name": "Dense", "config": {"name": "out", "units": 10, "activation": "softmax"}}]}}
JSON
}
mpi_or_skip() {
    local out=$1
    shift
    if ! timeout 300 "${MPI[@]}" "$@" >"$out" 2>&1; then
        grep -q "built without MPI" "$out" && { echo "SKIP: kerac was built without MPI"; exit 77; }
        fail "mpirun $*: $(cat "$out")"
    fi
}
predict() {
    for r in "$@"; do
        "$K" predict "$T/$r.keras" --input "$T/probe.npy" --output "$T/$r.npy" --quiet || fail "predict $r"
    done
}
