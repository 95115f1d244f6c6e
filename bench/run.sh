#!/usr/bin/env bash
# bench/run.sh — CPU benchmark: kerac against PyTorch, same machine, same threads.
#
#   bench/run.sh [--record] [--no-build] [-h]
#
#   WORKLOAD=A|B      A: the default CNN on Fashion-MNIST (default); B: the VGG-style CNN
#                     with BatchNorm on synthetic 32x32x3 images, batch 64 (bench/workloads.h)
#   ROUNDS=N          rounds of alternating runs (default 3): kerac, pytorch, kerac, pytorch, ...
#   THREADS=N         threads for both programs (default 2)
#   CPU_ISA=auto|avx2|avx512   restrict both sides to one instruction set (bench/isa_env.sh;
#                     avx2: kerac's AVX2 kernels, PyTorch's oneDNN and ATen at AVX2, OpenBLAS
#                     Haswell for both: the closest an AVX-512 machine gets to an AVX2-only one)
#   BENCH_CLOCK=cpu   both programs time their process's CPU time, not the wall clock (with
#                     THREADS=1: the work itself, on a loaded machine)
#   BENCH_SECONDS, BENCH_INFER_SECONDS   the window each program measures over, in wall-clock
#                     seconds (defaults 3 and 2): both sides repeat training steps (inference
#                     batches of 1000) until it is full, so a faster program does not measure
#                     over a shorter stretch of time; 0: fixed counts (BENCH_STEPS, BENCH_INFER_REPS)
#   BENCH_WARMUP, BENCH_STEPS, BENCH_INFER_REPS   passed through (defaults 5, 100, 5); setting
#                     BENCH_STEPS (BENCH_INFER_REPS) without BENCH_SECONDS (BENCH_INFER_SECONDS)
#                     measures that many steps (passes), as before the windows
#   TORCH_LAYOUTS     PyTorch layouts to run each round (default "nchw channels_last";
#                     "nchw" alone is the plain PyTorch model)
#   BUILD_DIR         where to build bench_train (default <repo>/build-bench)
#   BENCH_BIN         a bench_train binary to use as-is (skips the build)
#   PROBE_SECONDS     after each round, bench/vcpu_probe measures each CPU's FMA rate for that
#                     long (default 1; 0: not): what the machine gave that moment (bench/RESULTS.md,
#                     "Why kerac's rounds spread"); it is built beside bench_train
#   --record          append a dated row (git rev-parse --short HEAD) to bench/RESULTS.md
#   --no-build        use $BUILD_DIR/bench/bench_train without rebuilding
#
# Raw JSON lines go to bench/out/run-<time>.jsonl (git-ignored). See bench/README.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
. "$HERE/common.sh"
bench_args 2,29 "$@"
bench_settings
WORKLOAD="${WORKLOAD:-A}"
case "$WORKLOAD" in A|B) ;; *) echo "run.sh: WORKLOAD must be A or B, got '$WORKLOAD'" >&2; exit 2 ;; esac
export BENCH_WORKLOAD="$WORKLOAD"
TORCH_LAYOUTS="${TORCH_LAYOUTS:-nchw channels_last}"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-bench}"
export BENCH_CLOCK="${BENCH_CLOCK:-wall}"
[ -n "${BENCH_STEPS:-}" ] && BENCH_SECONDS="${BENCH_SECONDS:-0}"
[ -n "${BENCH_INFER_REPS:-}" ] && BENCH_INFER_SECONDS="${BENCH_INFER_SECONDS:-0}"
export BENCH_SECONDS="${BENCH_SECONDS:-3}" BENCH_INFER_SECONDS="${BENCH_INFER_SECONDS:-2}"
export BENCH_WARMUP="${BENCH_WARMUP:-5}" BENCH_STEPS="${BENCH_STEPS:-100}" BENCH_INFER_REPS="${BENCH_INFER_REPS:-5}"
for layout in $TORCH_LAYOUTS; do
    case "$layout" in nchw|channels_last) ;; *) echo "run.sh: TORCH_LAYOUTS: '$layout' is not nchw or channels_last" >&2; exit 2 ;; esac
done

# ---- prerequisites: Debian's PyTorch and NumPy, the Fashion-MNIST package
DATA_DIR=/usr/share/datasets/fashion-mnist
missing=()
[ "$WORKLOAD" = B ] || [ -f "$DATA_DIR/train-images-idx3-ubyte.gz" ] || missing+=(dataset-fashion-mnist)
bench_need_pymods torch=python3-torch numpy=python3-numpy
bench_need_packages "${missing[@]}"

# ---- build bench_train
if [ -n "${BENCH_BIN:-}" ]; then
    KERAC_BIN="$BENCH_BIN"
else
    KERAC_BIN="$BUILD_DIR/bench/bench_train"
    [ "$BUILD" = 0 ] || { bench_build bench_train; bench_build vcpu_probe; }
fi
PROBE_SECONDS="${PROBE_SECONDS:-1}"
PROBE_BIN="$(dirname "$KERAC_BIN")/vcpu_probe"
if [ "$PROBE_SECONDS" != 0 ] && [ ! -x "$PROBE_BIN" ]; then
    echo "run.sh: no $PROBE_BIN (cmake --build <build> --target vcpu_probe); rounds run without the CPU probe" >&2
    PROBE_SECONDS=0
fi
[ -x "$KERAC_BIN" ] || { echo "run.sh: $KERAC_BIN is not an executable (build it, or set BENCH_BIN)" >&2; exit 1; }

# ---- run: kerac, pytorch [, pytorch channels_last], repeated ROUNDS times
mkdir -p "$HERE/out"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
RAW="$HERE/out/run-$STAMP.jsonl"
: > "$RAW"
LOAD_BEFORE="$(bench_load)"
CORETYPE="${OPENBLAS_CORETYPE-unset}"
[ "$CPU_ISA" != avx2 ] || CORETYPE="${OPENBLAS_CORETYPE:-Haswell}"
L2SIZE="${OPENBLAS_L2_SIZE-unset}"

WINDOW_DESC="$(bench_window_desc)"
echo "run.sh: workload $WORKLOAD, $ROUNDS round(s), $THREADS threads, $BENCH_CLOCK clock, warm-up $BENCH_WARMUP steps, $WINDOW_DESC, " \
     "CPU_ISA=$CPU_ISA OPENBLAS_CORETYPE=$CORETYPE OPENBLAS_L2_SIZE=$L2SIZE, kerac ${KERAC_WAIT:-waiting as the environment says}, load $LOAD_BEFORE" >&2
for ((r = 1; r <= ROUNDS; r++)); do
    echo "round $r/$ROUNDS" >&2
    bench_run_one kerac env "${KERAC_ENV[@]}" "$KERAC_BIN"
    for layout in $TORCH_LAYOUTS; do
        bench_run_one "pytorch-$layout" env "${TORCH_ENV[@]}" BENCH_TORCH_LAYOUT="$layout" "$PY" "$HERE/torch_cnn.py"
    done
    if [ "$PROBE_SECONDS" != 0 ]; then
        line="$("$PROBE_BIN" "$PROBE_SECONDS" "$THREADS")" || { echo "run.sh: $PROBE_BIN failed" >&2; exit 1; }
        printf '%s\n' "$line" >> "$RAW.probe"
        echo "  vcpu_probe: $line" >&2
    fi
done
LOAD_AFTER="$(bench_load)"

COMMIT="$(bench_commit)"

# ---- medians, ratios, table, JSON summary, optional RESULTS.md row
WORKLOAD="$WORKLOAD" RECORD="$RECORD" RAW="$RAW" COMMIT="$COMMIT" ROUNDS="$ROUNDS" THREADS="$THREADS" \
CPU_ISA="$CPU_ISA" CORETYPE="$CORETYPE" L2SIZE="$L2SIZE" WAIT_DESC="$WAIT_DESC" WINDOW_DESC="$WINDOW_DESC" LOAD_BEFORE="$LOAD_BEFORE" LOAD_AFTER="$LOAD_AFTER" \
RESULTS="$HERE/RESULTS.md" "$PY" - <<'EOF'
import json, os, statistics, time

rows = [json.loads(l) for l in open(os.environ["RAW"]) if l.strip()]
# bench/vcpu_probe after each round: the CPUs' summed FMA rate and the share of it an even
# split between the threads gets (the slowest CPU's rate x threads), window by window
probes = [json.loads(l) for l in open(os.environ["RAW"] + ".probe") if l.strip()] \
    if os.path.exists(os.environ["RAW"] + ".probe") else []
def key(r):
    return "kerac" if r["impl"] == "kerac" else "pytorch-" + r.get("layout", "nchw")
groups = {}
for r in rows:
    groups.setdefault(key(r), []).append(r)
med = {k: {m: statistics.median(r[m] for r in v)
           for m in ("train_images_per_second", "infer_images_per_second")}
       for k, v in groups.items()}
torch_keys = [k for k in med if k.startswith("pytorch-")]

def ratio(k, metric):
    return med["kerac"][metric] / med[k][metric]

def spread(k, m="train_images_per_second"):
    """(max - min) / median of the rounds' rates: the steadiness target compares these"""
    v = [r[m] for r in groups[k]]
    return (max(v) - min(v)) / med[k][m] if med[k][m] else 0.0

def inside(k, f="train_step_rate"):
    """the median over rounds of (p90 - p10) / median of the per-step (per-batch) rates inside
    each round: how much a round's own steps vary"""
    v = [(r[f]["p90"] - r[f]["p10"]) / r[f]["median"] for r in groups[k] if r.get(f, {}).get("median")]
    return statistics.median(v) if v else float("nan")

print(f"{'impl':<32}{'train img/s':>12}{'infer img/s':>12}{'runs':>6}{'train spread':>14}{'infer spread':>14}"
      f"{'step p10-p90':>14}")
for k in ["kerac"] + torch_keys:
    print(f"{k:<32}{med[k]['train_images_per_second']:>12.0f}{med[k]['infer_images_per_second']:>12.0f}"
          f"{len(groups[k]):>6}{spread(k):>14.1%}{spread(k, 'infer_images_per_second'):>14.1%}{inside(k):>14.1%}")
for k in torch_keys:
    print(f"{'kerac / ' + k:<32}{ratio(k, 'train_images_per_second'):>12.2f}"
          f"{ratio(k, 'infer_images_per_second'):>12.2f}")

best = {m: max(torch_keys, key=lambda k: med[k][m])
        for m in ("train_images_per_second", "infer_images_per_second")}
B = os.environ["WORKLOAD"] == "B"
# the SGEMM rate kerac's program measured in each round (OpenBLAS, same threads), and the
# fraction of it each side's training reaches (images/s x FLOP per image / SGEMM FLOP/s)
sgemm = statistics.median([r["sgemm_gflops"] for r in groups.get("kerac", []) if r.get("sgemm_gflops")] or [0])
flop = 231.8e6 if B else 14.65e6
summary = {
    "benchmark": "workload-B vgg-style bn synthetic 32x32x3 batch 64 cpu" if B else "workload-A mnist_convnet fashion-mnist cpu",
    "clock": sorted({r.get("clock", "wall") for r in rows}),
    "sgemm_gflops": round(sgemm, 1),
    "sgemm_fraction": {k: round(med[k]["train_images_per_second"] * flop * 1e-9 / sgemm, 3) if sgemm else None
                       for k in med},
    "commit": os.environ["COMMIT"], "rounds": int(os.environ["ROUNDS"]),
    "threads": int(os.environ["THREADS"]),
    "median": {k: {m.split("_")[0]: round(v, 1) for m, v in d.items()} for k, d in med.items()},
    "ratio": {k: {"train": round(ratio(k, "train_images_per_second"), 3),
                  "infer": round(ratio(k, "infer_images_per_second"), 3)} for k in torch_keys},
    "ratio_vs_best_pytorch": {"train": round(ratio(best["train_images_per_second"], "train_images_per_second"), 3),
                              "infer": round(ratio(best["infer_images_per_second"], "infer_images_per_second"), 3)},
    "openblas_coretype": os.environ["CORETYPE"], "openblas_l2_size": os.environ["L2SIZE"],
    "loadavg_before": float(os.environ["LOAD_BEFORE"]), "loadavg_after": float(os.environ["LOAD_AFTER"]),
    "raw": os.path.relpath(os.environ["RAW"]),
    "cpu": os.environ["BENCH_CPU"],  # processor model and vector ISAs (bench/common.sh)
    # the kernels kerac ran (cpu_isa.h), OpenBLAS's threads after training (1: single-threaded
    # GEMMs), kerac's start to first step, and each side's round-to-round spread of training
    # speed, (max - min) / median (the steadiness target: kerac's no larger than PyTorch's)
    "kerac_cpu_isa": sorted({r.get("cpu_isa", "?") for r in groups.get("kerac", [])}),
    # CPU_ISA (bench/isa_env.sh) and what each side reported running: kerac's kernels, oneDNN's
    # and ATen's instruction sets, OpenBLAS's kernel set
    "cpu_isa_restriction": os.environ["CPU_ISA"],
    "ran": {k: sorted({"/".join(str(r.get(f, "?")) for f in
                                (("cpu_isa", "openblas_corename") if k == "kerac" else
                                 ("onednn_isa", "aten_capability", "openblas_corename")))
                       for r in groups[k]}) for k in groups},
    "kerac_openblas_threads": sorted({r.get("openblas_threads", -1) for r in groups.get("kerac", [])}),
    "kerac_start_to_first_step_s": round(statistics.median(r.get("start_to_first_step_s", float("nan"))
                                                           for r in groups.get("kerac", [{}])), 3),
    "window": os.environ["WINDOW_DESC"],
    "train_spread": {k: round(spread(k), 3) for k in groups},
    # inside each round: the median over rounds of (p90 - p10) / median of the per-step
    # (per inference batch) rates
    "train_step_spread": {k: round(inside(k), 3) for k in groups},
    "infer_batch_spread": {k: round(inside(k, "infer_batch_rate"), 3) for k in groups},
    "infer_spread": {k: round(spread(k, "infer_images_per_second"), 3) for k in groups},
    # per round: the CPUs' summed median rate and an even split's share of it (FMA, L2 loads)
    "vcpu_probe": {k: {"sum_median": [p[k]["sum"]["median"] for p in probes],
                       "static_share": [p[k]["static_share"] for p in probes]}
                   for k in ("fma_gflops", "l2_read_gbs", "mem_read_gbs") if k in probes[0]} if probes else None,
}
def probe_desc():
    s = summary["vcpu_probe"]
    rng = lambda v, f: f"{min(v):{f}}-{max(v):{f}}"
    return (f"CPUs' FMA {rng(s['fma_gflops']['sum_median'], '.0f')} GFLOP/s (even split "
            f"{rng(s['fma_gflops']['static_share'], '.2f')}), L2 loads {rng(s['l2_read_gbs']['sum_median'], '.0f')} "
            f"GB/s (even split {rng(s['l2_read_gbs']['static_share'], '.2f')})"
            + (f", memory loads {rng(s['mem_read_gbs']['sum_median'], '.0f')} GB/s (even split "
               f"{rng(s['mem_read_gbs']['static_share'], '.2f')})" if "mem_read_gbs" in s else "")
            + " over the rounds")
if probes:
    print("machine (bench/vcpu_probe after each round): " + probe_desc())
print(json.dumps(summary))

if os.environ["RECORD"] == "1":
    def cell(k, m):  # the median and, over 2+ rounds, the spread of the rounds
        if k not in med:
            return "-"
        return f"{med[k][m]:.0f}" + (f" ({spread(k, m):.0%})" if len(groups[k]) > 1 else "")
    t, i = "train_images_per_second", "infer_images_per_second"
    row = ("| {date} | {commit} | {rounds} | {kt} | {pt} | {ct} | {rt:.2f} | {ki} | {pi} | {ci} | {ri:.2f} "
           "| {load} | {cpu} |\n").format(
        date=time.strftime("%Y-%m-%d"), commit=os.environ["COMMIT"], rounds=os.environ["ROUNDS"],
        kt=cell("kerac", t), pt=cell("pytorch-nchw", t), ct=cell("pytorch-channels_last", t),
        rt=summary["ratio_vs_best_pytorch"]["train"],
        ki=cell("kerac", i), pi=cell("pytorch-nchw", i), ci=cell("pytorch-channels_last", i),
        ri=summary["ratio_vs_best_pytorch"]["infer"],
        load=f"{os.environ['LOAD_BEFORE']} / {os.environ['LOAD_AFTER']}",
        cpu=f"{os.environ['WINDOW_DESC']}; CORETYPE={os.environ['CORETYPE']} L2={os.environ['L2SIZE']} {os.environ['WAIT_DESC']}; {summary['cpu']} (kerac {'/'.join(summary['kerac_cpu_isa'])} kernels; CPU_ISA={os.environ['CPU_ISA']}: ran {summary['ran']})" + ("; " + probe_desc() if probes else ""))
    # into the workload's table: after its last row (the file has other sections after it)
    text = open(os.environ["RESULTS"]).read().split("\n")
    table = "| date (B) | commit | rounds | kerac train" if B else "| date | commit | rounds | kerac train"
    head = next((n for n, l in enumerate(text) if l.startswith(table)), None)
    if B:
        row = row.rstrip("\n") + f" {summary['sgemm_gflops']} GFLOP/s, kerac {summary['sgemm_fraction']['kerac']} |\n"
    at = len(text)
    if head is not None:
        at = head + 1
        while at < len(text) and text[at].startswith("|"):
            at += 1
    text.insert(at, row.rstrip("\n"))
    with open(os.environ["RESULTS"], "w") as f:
        f.write("\n".join(text))
    print(f"run.sh: appended a row to {os.path.relpath(os.environ['RESULTS'])}")
EOF
