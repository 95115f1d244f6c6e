#!/usr/bin/env bash
# bench/finetune/run.sh — fine-tuning MobileNetV2 and ResNet50 at 96x96, batch 32, on the CPU:
# kerac (Keras 3's models) against PyTorch (torchvision's models of the same shapes).
#
#   bench/finetune/run.sh [--record] [--no-build] [-h]
#
#   ROUNDS=N          rounds (default 3); each round runs, per model: kerac, PyTorch NCHW,
#                     PyTorch channels_last (alternating, so a slow patch hits all)
#   THREADS=N         threads for both (default 2)
#   CPU_ISA=auto|avx2|avx512   restrict both sides to one instruction set (bench/isa_env.sh,
#                     as in bench/run.sh)
#   MODELS            default "mobilenetv2 resnet50"
#   BENCH_WARMUP, BENCH_STEPS   per run (defaults 3, 10: 320 timed images)
#   KERAS_PYTHON      Python with Keras 3 to write the models (default /tmp/kvenv/bin/python)
#   MODEL_DIR         where the .keras files go (default bench/out/finetune-models; kept)
#   BUILD_DIR         where to build bench_finetune (default <repo>/build-bench)
#   --record          append a dated row per model to bench/RESULTS.md ("Fine-tuning" table)
#   --no-build        use $BUILD_DIR/bench/bench_finetune as it is
#
# Raw JSON lines: bench/out/finetune-<time>.jsonl. See bench/README.md, "bench/finetune".
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY=/usr/bin/python3
RECORD=0
BUILD=1
for arg in "$@"; do
    case "$arg" in
        --record) RECORD=1 ;;
        --no-build) BUILD=0 ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
    esac
done
ROUNDS="${ROUNDS:-3}"
THREADS="${THREADS:-2}"
# kerac's side waits as the kerac command does (KC_CPU_SPIN_DEFAULT in include/kerac.h: the
# command sets GOMP_SPINCOUNT=3000 unless the user set it or OMP_WAIT_POLICY); PyTorch keeps
# its own defaults. A GOMP_SPINCOUNT or OMP_WAIT_POLICY in the environment applies to both.
KERAC_WAIT=""
[ -n "${GOMP_SPINCOUNT:-}" ] || [ -n "${OMP_WAIT_POLICY:-}" ] || KERAC_WAIT="GOMP_SPINCOUNT=3000"
MODELS="${MODELS:-mobilenetv2 resnet50}"
KERAS_PYTHON="${KERAS_PYTHON:-/tmp/kvenv/bin/python}"
MODEL_DIR="${MODEL_DIR:-$ROOT/bench/out/finetune-models}"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-bench}"
export BENCH_WARMUP="${BENCH_WARMUP:-3}" BENCH_STEPS="${BENCH_STEPS:-10}" BENCH_BATCH=32 BENCH_SIZE=96
case "$ROUNDS" in ''|*[!0-9]*|0) echo "run.sh: ROUNDS must be a positive integer, got '$ROUNDS'" >&2; exit 2 ;; esac
case "$THREADS" in ''|*[!0-9]*|0) echo "run.sh: THREADS must be a positive integer, got '$THREADS'" >&2; exit 2 ;; esac
. "$HERE/../isa_env.sh"
for m in $MODELS; do
    case "$m" in mobilenetv2|resnet50) ;; *) echo "run.sh: MODELS: '$m' is not mobilenetv2 or resnet50" >&2; exit 2 ;; esac
done

# ---- prerequisites: Debian's PyTorch and torchvision; Keras 3 to write the models
missing=()
"$PY" -c 'import torch' 2>/dev/null || missing+=(python3-torch)
"$PY" -c 'import torchvision' 2>/dev/null || missing+=(python3-torchvision)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "run.sh: installing ${missing[*]}" >&2
        apt-get install -y --no-install-recommends "${missing[@]}" >&2
    else
        echo "run.sh: missing ${missing[*]}; install them with:" >&2
        echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
fi
need_models=0
for m in $MODELS; do [ -f "$MODEL_DIR/$m.keras" ] || need_models=1; done
if [ "$need_models" = 1 ]; then
    if ! KERAS_BACKEND=jax "$KERAS_PYTHON" -c 'import keras' 2>/dev/null; then
        echo "run.sh: $KERAS_PYTHON has no Keras 3; make one with:" >&2
        echo "  python3 -m venv /tmp/kvenv && /tmp/kvenv/bin/pip install keras 'jax[cpu]' h5py" >&2
        exit 1
    fi
    KERAS_BACKEND=jax "$KERAS_PYTHON" "$HERE/make_models.py" "$MODEL_DIR" 96 >&2
fi

# ---- build bench_finetune
KERAC_BIN="$BUILD_DIR/bench/bench_finetune"
if [ "$BUILD" = 1 ]; then
    cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD_DIR" -j2 --target bench_finetune >/dev/null
fi
[ -x "$KERAC_BIN" ] || { echo "run.sh: $KERAC_BIN is not an executable (build it, or drop --no-build)" >&2; exit 1; }

# ---- run
mkdir -p "$ROOT/bench/out"
RAW="$ROOT/bench/out/finetune-$(date -u +%Y%m%dT%H%M%SZ).jsonl"
: > "$RAW"
LOAD_BEFORE="$(cut -d' ' -f1 /proc/loadavg)"
run_one() { # label, command...
    local label="$1"; shift
    local err line
    err="$(mktemp)"
    if ! line="$("$@" 2>"$err")"; then
        echo "run.sh: $label failed:" >&2; cat "$err" >&2; rm -f "$err"; exit 1
    fi
    rm -f "$err"
    line="$(printf '%s\n' "$line" | { grep '^{' || true; } | tail -n 1)"
    [ -n "$line" ] || { echo "run.sh: $label printed no JSON line" >&2; exit 1; }
    printf '%s\n' "$line" >> "$RAW"
    echo "  $label: $line" >&2
}
echo "run.sh: $ROUNDS round(s), $THREADS threads, models $MODELS, CPU_ISA=$CPU_ISA, warm-up $BENCH_WARMUP + $BENCH_STEPS steps of 32, kerac ${KERAC_WAIT:-waiting as the environment says}, load $LOAD_BEFORE" >&2
for ((r = 1; r <= ROUNDS; r++)); do
    echo "round $r/$ROUNDS" >&2
    for m in $MODELS; do
        run_one "kerac-$m" env "${ISA_ENV[@]}" BENCH_THREADS="$THREADS" KERAC_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" $KERAC_WAIT \
            "$KERAC_BIN" "$MODEL_DIR/$m.keras"
        for layout in nchw channels_last; do
            run_one "pytorch-$layout-$m" env "${ISA_ENV[@]}" BENCH_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" \
                OPENBLAS_NUM_THREADS=1 BENCH_TORCH_LAYOUT="$layout" \
                MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 MALLOC_TOP_PAD_=134217728 \
                "$PY" "$HERE/torch_finetune.py" "$m"
        done
    done
done
LOAD_AFTER="$(cut -d' ' -f1 /proc/loadavg)"
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none)"
if [ "$COMMIT" != none ] && [ -n "$(git -C "$ROOT" status --porcelain -- src include CMakeLists.txt bench 2>/dev/null)" ]; then
    COMMIT="$COMMIT+dirty"
fi

CPU_ISA="$CPU_ISA" RAW="$RAW" RECORD="$RECORD" COMMIT="$COMMIT" ROUNDS="$ROUNDS" THREADS="$THREADS" LOAD_BEFORE="$LOAD_BEFORE" \
LOAD_AFTER="$LOAD_AFTER" RESULTS="$ROOT/bench/RESULTS.md" "$PY" "$HERE/summary.py"
