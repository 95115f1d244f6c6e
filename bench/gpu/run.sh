#!/bin/bash
# bench/gpu/run.sh — the GPU benchmark: kerac (bench_gpu) and PyTorch (torch_gpu.py) on the
# same GPU, workloads A (default CNN, batch 128) and B (VGG-style, batch 256). See
# bench/gpu/README.md. scripts/gpu-check runs it after building.
#
#   BUILD_DIR         where bench_gpu and libkerac_cuda.so were built (default <repo>/build-gpu)
#   PY                the Python with PyTorch (default python3)
#   BENCH_WORKLOADS   "A B" (default)
#   ROUNDS            alternating rounds (default 1): kerac A, kerac B, PyTorch ...; medians
#   OUT_JSONL         raw JSON lines (default bench/out/gpu-<time>.jsonl)
#   OUT_MD            also write the results as Markdown table rows for bench/RESULTS.md
#   OUT_TABLE         also write the plain table there
#   BENCH_WARMUP, BENCH_STEPS, BENCH_INFER_N, BENCH_INFER_BATCH, BENCH_INFER_REPS: passed on
# Exit status: 0 when every run printed its JSON line.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
PY="${PY:-python3}"
WORKLOADS="${BENCH_WORKLOADS:-A B}"
ROUNDS="${ROUNDS:-1}"
mkdir -p "$ROOT/bench/out"
RAW="${OUT_JSONL:-$ROOT/bench/out/gpu-$(date -u +%Y%m%dT%H%M%SZ).jsonl}"
: >"$RAW"
BIN="$BUILD/bench_gpu"
rc=0

run_json() { # label, command...: append the command's JSON lines to RAW
    local label=$1
    shift
    local out err
    err="$(mktemp)"
    if ! out="$("$@" 2>"$err")"; then
        echo "run.sh: $label failed:" >&2
        tail -n 20 "$err" >&2
        rc=1
    fi
    rm -f "$err"
    local lines
    lines="$(printf '%s\n' "$out" | grep '^{' || true)"
    if [ -z "$lines" ]; then
        echo "run.sh: $label printed no JSON line" >&2
        rc=1
        return
    fi
    printf '%s\n' "$lines" >>"$RAW"
    printf '%s\n' "$lines" | sed "s/^/  $label: /" >&2
}

[ -x "$BIN" ] || { echo "run.sh: $BIN is missing: build the bench_gpu target (cmake -DKERAC_CUDA=ON)" >&2; exit 1; }
for ((r = 1; r <= ROUNDS; r++)); do
    for wl in $WORKLOADS; do
        run_json "kerac $wl" env KERAC_MODULE_PATH="$BUILD" BENCH_WORKLOAD="$wl" BENCH_DEVICE=cuda "$BIN"
    done
    if "$PY" -c 'import torch' 2>/dev/null; then
        run_json "pytorch" env BENCH_WORKLOADS="$WORKLOADS" "$PY" "$HERE/torch_gpu.py"
    else
        echo "run.sh: $PY has no torch: the PyTorch side is left out" >&2
        rc=1
    fi
done

RAW="$RAW" OUT_MD="${OUT_MD:-}" OUT_TABLE="${OUT_TABLE:-}" DRIVER="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)" \
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none)" "$PY" - <<'EOF' || rc=1
import json, os, statistics, time
rows = [json.loads(l) for l in open(os.environ["RAW"]) if l.strip()]
groups = {}
for r in rows:
    key = (r["workload"], "kerac" if r["impl"] == "kerac" else "pytorch " + r.get("layout", "nchw"))
    groups.setdefault(key, []).append(r)
med = {k: {m: statistics.median(x[m] for x in v)
           for m in ("train_images_per_second", "infer_images_per_second", "peak_memory_bytes")}
       for k, v in groups.items()}
device = next((r["device"] for r in rows if r["impl"] == "kerac"), "?")
torch_v = next((r["version"] for r in rows if r["impl"] == "pytorch"), "-")
lines = [f"GPU benchmark on {device}, driver {os.environ.get('DRIVER') or '?'}; fp32, TF32 off; PyTorch {torch_v}",
         f"{'workload':<9}{'impl':<22}{'train img/s':>12}{'infer img/s':>12}{'peak MiB':>10}"]
md = []
for wl in sorted({k[0] for k in med}):
    impls = sorted((k[1] for k in med if k[0] == wl), key=lambda s: (s != "kerac", s))
    for impl in impls:
        m = med[(wl, impl)]
        lines.append(f"{wl:<9}{impl:<22}{m['train_images_per_second']:>12.0f}{m['infer_images_per_second']:>12.0f}"
                     f"{m['peak_memory_bytes'] / 1048576:>10.0f}")
    tk = [i for i in impls if i != "kerac"]
    if (wl, "kerac") in med and tk:
        k = med[(wl, "kerac")]
        bt = max(tk, key=lambda i: med[(wl, i)]["train_images_per_second"])
        bi = max(tk, key=lambda i: med[(wl, i)]["infer_images_per_second"])
        bm = min(tk, key=lambda i: med[(wl, i)]["peak_memory_bytes"])
        rt = k["train_images_per_second"] / med[(wl, bt)]["train_images_per_second"]
        ri = k["infer_images_per_second"] / med[(wl, bi)]["infer_images_per_second"]
        rm = k["peak_memory_bytes"] / max(1, med[(wl, bm)]["peak_memory_bytes"])
        lines.append(f"{wl:<9}{'kerac / best pytorch':<22}{rt:>12.2f}{ri:>12.2f}{rm:>10.2f}")
        md.append(f"| {time.strftime('%Y-%m-%d')} | {os.environ.get('COMMIT')} | {device} | {os.environ.get('DRIVER') or '?'} "
                  f"| {wl} | {k['train_images_per_second']:.0f} | {med[(wl, bt)]['train_images_per_second']:.0f} ({bt[8:]}) "
                  f"| {rt:.2f} | {k['infer_images_per_second']:.0f} | {med[(wl, bi)]['infer_images_per_second']:.0f} ({bi[8:]}) "
                  f"| {ri:.2f} | {k['peak_memory_bytes'] / 1048576:.0f} | {med[(wl, bm)]['peak_memory_bytes'] / 1048576:.0f} "
                  f"| {rm:.2f} | {torch_v} |")
text = "\n".join(lines)
print(text)
if os.environ.get("OUT_TABLE"):
    open(os.environ["OUT_TABLE"], "w").write(text + "\n")
if os.environ.get("OUT_MD"):
    head = ("| date | commit | GPU | driver | workload | kerac train img/s | PyTorch train img/s | ratio | "
            "kerac infer img/s | PyTorch infer img/s | ratio | kerac peak MiB | PyTorch peak MiB | ratio | PyTorch |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    open(os.environ["OUT_MD"], "w").write(head + "\n".join(md) + "\n")
print(json.dumps({"benchmark": "gpu workloads A and B", "raw": os.environ["RAW"],
                  "median": {f"{k[0]} {k[1]}": {m.split('_')[0]: round(v, 1) for m, v in d.items()}
                             for k, d in med.items()}}))
EOF
exit $rc
