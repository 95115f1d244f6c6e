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
#   BENCH_SECONDS     > 0: each program trains timed steps for that many wall-clock seconds
#                     instead of BENCH_STEPS (as bench/run.sh; default 0: the fixed steps)
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
. "$HERE/../common.sh"
bench_args 2,22 "$@"
bench_settings
MODELS="${MODELS:-mobilenetv2 resnet50}"
KERAS_PYTHON="${KERAS_PYTHON:-/tmp/kvenv/bin/python}"
MODEL_DIR="${MODEL_DIR:-$ROOT/bench/out/finetune-models}"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-bench}"
export BENCH_WARMUP="${BENCH_WARMUP:-3}" BENCH_STEPS="${BENCH_STEPS:-10}" BENCH_BATCH=32 BENCH_SIZE=96
for m in $MODELS; do
    case "$m" in mobilenetv2|resnet50) ;; *) echo "run.sh: MODELS: '$m' is not mobilenetv2 or resnet50" >&2; exit 2 ;; esac
done

# ---- prerequisites: Debian's PyTorch and torchvision; Keras 3 to write the models
bench_need_pymods torch=python3-torch torchvision=python3-torchvision
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
[ "$BUILD" = 0 ] || bench_build bench_finetune
[ -x "$KERAC_BIN" ] || { echo "run.sh: $KERAC_BIN is not an executable (build it, or drop --no-build)" >&2; exit 1; }

# ---- run
mkdir -p "$ROOT/bench/out"
RAW="$ROOT/bench/out/finetune-$(date -u +%Y%m%dT%H%M%SZ).jsonl"
: > "$RAW"
LOAD_BEFORE="$(bench_load)"
echo "run.sh: $ROUNDS round(s), $THREADS threads, models $MODELS, CPU_ISA=$CPU_ISA, warm-up $BENCH_WARMUP + $BENCH_STEPS steps of 32, kerac ${KERAC_WAIT:-waiting as the environment says}, load $LOAD_BEFORE" >&2
for ((r = 1; r <= ROUNDS; r++)); do
    echo "round $r/$ROUNDS" >&2
    for m in $MODELS; do
        bench_run_one "kerac-$m" env "${KERAC_ENV[@]}" "$KERAC_BIN" "$MODEL_DIR/$m.keras"
        for layout in nchw channels_last; do
            bench_run_one "pytorch-$layout-$m" env "${TORCH_ENV[@]}" BENCH_TORCH_LAYOUT="$layout" \
                "$PY" "$HERE/torch_finetune.py" "$m"
        done
    done
done
LOAD_AFTER="$(bench_load)"
COMMIT="$(bench_commit src include CMakeLists.txt bench)"

CPU_ISA="$CPU_ISA" RAW="$RAW" RECORD="$RECORD" COMMIT="$COMMIT" ROUNDS="$ROUNDS" THREADS="$THREADS" LOAD_BEFORE="$LOAD_BEFORE" \
LOAD_AFTER="$LOAD_AFTER" RESULTS="$ROOT/bench/RESULTS.md" "$PY" "$HERE/summary.py"
