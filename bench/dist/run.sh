#!/bin/bash
# bench/dist/run.sh — data-parallel on one machine: 1 process x 2 threads against 2
# processes (mpirun -np 2) x 1 thread, on workload A (the mnist_convnet CNN, 2,048
# Fashion-MNIST images, batch 128) and workload B (the VGG-style CNN with BatchNorm of
# bench/gpu, 512 synthetic 32x32x3 images, batch 64), alternating the four runs for
# ROUNDS rounds (default 3). Each run trains 2 epochs; its speed is epoch 2's images/s
# (--json), and rank 0 traces steps 3..12 of epoch 1 (--profile): the step's median time,
# the median of "wait for all-reduce" (the all-reduce time not hidden behind backward) and
# of the buckets' own spans (start to finish, overlapped or not) per step; then the
# all-reduce alone (allreduce.c: MPI_Allreduce of A's and B's gradient sizes).
# Usage: bench/dist/run.sh [PATH/TO/kerac]  (prints a Markdown table and the medians)
set -u
K=${1:-build/kerac}
ROUNDS=${ROUNDS:-3}
PY=/usr/bin/python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MPI=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --bind-to none)
"$PY" - "$T" <<'PY' || exit 1
import gzip, json, sys
import numpy as np
t = sys.argv[1]
fm = "/usr/share/datasets/fashion-mnist"
with gzip.open(f"{fm}/train-images-idx3-ubyte.gz") as f:
    x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
with gzip.open(f"{fm}/train-labels-idx1-ubyte.gz") as f:
    y = np.frombuffer(f.read(), np.uint8, offset=8)
np.save(f"{t}/xa.npy", x[:2048].copy())
np.save(f"{t}/ya.npy", y[:2048].astype(np.int64))
r = np.random.default_rng(1)
np.save(f"{t}/xb.npy", r.integers(0, 256, (512, 32, 32, 3)).astype(np.uint8))
np.save(f"{t}/yb.npy", r.integers(0, 10, 512).astype(np.int64))
def L(cls, **c):
    return {"class_name": cls, "config": c}
def seq(name, shape, layers):
    return {"class_name": "Sequential", "config": {"name": name, "layers": [
        L("InputLayer", batch_shape=[None] + shape, dtype="float32", name="in")] + layers}}
a = [L("Conv2D", name="c1", filters=32, kernel_size=[3, 3], activation="relu"), L("MaxPooling2D", name="p1", pool_size=[2, 2]),
     L("Conv2D", name="c2", filters=64, kernel_size=[3, 3], activation="relu"), L("MaxPooling2D", name="p2", pool_size=[2, 2]),
     L("Flatten", name="f"), L("Dropout", name="d", rate=0.5), L("Dense", name="o", units=10, activation="softmax")]
b = []
for i, f in enumerate([32, 32, 64, 64, 128, 128]):
    b += [L("Conv2D", name=f"c{i}", filters=f, kernel_size=[3, 3], padding="same", use_bias=False),
          L("BatchNormalization", name=f"bn{i}"), L("Activation", name=f"r{i}", activation="relu")]
    if i in (1, 3):
        b.append(L("MaxPooling2D", name=f"p{i}", pool_size=[2, 2]))
b += [L("GlobalAveragePooling2D", name="g"), L("Dense", name="o", units=10, activation="softmax")]
json.dump(seq("workload_a", [28, 28, 1], a), open(f"{t}/a.json", "w"))
json.dump(seq("workload_b", [32, 32, 3], b), open(f"{t}/b.json", "w"))
PY
run() { # WORKLOAD FORM ROUND
    local w=$1 form=$2 out="$T/$1-$2-$3"
    local args=("$T/$w.json" --data "npy:$T/x$w.npy,$T/y$w.npy" --epochs 2 --json --seed 3
                --profile "$out.trace.json" --profile-steps 3:12)
    if [ "$w" = a ]; then args+=(--batch-size 128 --optimizer adam --lr 0.001)
    else args+=(--batch-size 64 --optimizer sgd --lr 0.01); fi
    if [ "$form" = 1x2 ]; then env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS "$K" train "${args[@]}" --threads 2 >"$out.json" 2>"$out.err"
    else "${MPI[@]}" -np 2 "$K" train "${args[@]}" --threads 1 >"$out.json" 2>"$out.err"; fi || {
        echo "run $w $form failed: $(tail -3 "$out.err")" >&2; return 1; }
    "$PY" - "$out" "$w" "$form" "$(cut -d' ' -f1 /proc/loadavg)" >>"$T/rows.tsv" <<'PY'
import json, statistics as st, sys
out, w, form, load = sys.argv[1:]
ep = [json.loads(l) for l in open(out + ".json") if l.startswith('{"epoch"')]
ev = [e for e in json.load(open(out + ".trace.json"))["traceEvents"] if e.get("ph") == "X"]
def per_step(name):
    d = {}
    for e in ev:
        if e["name"] == name:
            d[e["args"]["step"]] = d.get(e["args"]["step"], 0) + e["dur"] / 1000
    return d
step = per_step("step")
wait, buckets = per_step("wait for all-reduce"), per_step("all-reduce bucket")
s = sorted(step)
med = lambda d: st.median([d.get(k, 0) for k in s])
print(f"{w}\t{form}\t{ep[-1]['images_per_second']:.0f}\t{med(step):.1f}\t{med(wait):.2f}\t{med(buckets):.2f}\t{load}")
PY
}
for r in $(seq "$ROUNDS"); do
    for w in a b; do
        for form in 1x2 2x1; do run "$w" "$form" "$r" || exit 1; done
    done
done
# the all-reduce alone, for the sizes of A's and B's gradients
if mpicc -O2 "$(dirname "$0")/allreduce.c" -o "$T/allreduce" 2>"$T/mpicc.err"; then
    "${MPI[@]}" -np 2 "$T/allreduce"
else
    echo "mpicc failed: $(cat "$T/mpicc.err")"
fi
echo "| workload | form | epoch-2 img/s | step ms (median) | wait for all-reduce ms | buckets ms (overlapped) | load before |"
echo "|---|---|---|---|---|---|---|"
awk -F'\t' '{printf "| %s | %s | %s | %s | %s | %s | %s |\n", toupper($1), $2, $3, $4, $5, $6, $7}' "$T/rows.tsv"
"$PY" - "$T/rows.tsv" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
for w in "ab":
    for f in ("1x2", "2x1"):
        r = [x for x in rows if x[0] == w and x[1] == f]
        ips, step, wait = (st.median(float(x[i]) for x in r) for i in (2, 3, 4))
        print(f"median {w.upper()} {f}: {ips:.0f} img/s, step {step:.1f} ms, wait for all-reduce {wait:.2f} ms "
              f"({100 * wait / step:.1f} % of the step)")
PY
