#!/usr/bin/env bash
# fuzz/run.sh [SECONDS] [TARGET...] — builds the libFuzzer targets (fuzz/build.sh) and runs
# each for SECONDS (default $FUZZ_SECONDS or 20) from its committed seed corpus
# fuzz/corpus/<target>/. New inputs it finds go to build-fuzz/corpus/<target>/ (kept
# between runs, never committed). Fails on the first crash, leak, sanitizer report,
# out-of-memory or timeout; the input is written to build-fuzz/artifacts/<target>/ (emptied
# first). Targets: json (kc_model_from_json), keras (.keras and .h5 files), idx, npy, image
# (kc_dataset_open).
# FUZZ_SEED=N FUZZ_RUNS=M: a reproducible run instead (M inputs from random seed N, no time
# limit): what `make test` uses, so that CI never fails on a libhdf5 bug a lucky run hits
# (fuzz/README.md lists those), while a longer `make fuzz` still explores.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${FUZZ_BUILD:-build-fuzz}
SECS=${1:-${FUZZ_SECONDS:-20}}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(json keras idx npy image)

fuzz/build.sh
# an allocation over 1 GiB fails (returns NULL) as it would on a small machine: the readers'
# out-of-memory paths run instead of libFuzzer stopping at the first big malloc (libhdf5
# believes the sizes in a damaged object header); libFuzzer's own limits sit above that
ASAN_BASE=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:max_allocation_size_mb=1024:suppressions=$PWD/fuzz/asan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/fuzz/lsan.supp:print_suppressions=0}

for t in "${TARGETS[@]}"; do
  [ -x "$OUT/fuzz_$t" ] || { echo "fuzz/run.sh: no target '$t' (fuzz/fuzz_$t.c)" >&2; exit 1; }
  [ -d "fuzz/corpus/$t" ] || { echo "fuzz/run.sh: no seed corpus fuzz/corpus/$t" >&2; exit 1; }
  mkdir -p "$OUT/corpus/$t"
  art="$OUT/artifacts/$t"
  rm -rf "$art"
  mkdir -p "$art"
  log="$OUT/fuzz_$t.log"
  asan=$ASAN_BASE
  dict=fuzz/data.dict
  case $t in
    json) dict=fuzz/keras.dict ;;
    keras)
      dict=fuzz/keras.dict
      # libhdf5 has no frame pointers: the slow unwinder lets fuzz/asan.supp and fuzz/lsan.supp
      # name the functions inside it
      asan="$asan:fast_unwind_on_malloc=0:malloc_context_size=30"
      ;;
  esac
  echo "fuzz/run.sh: $t for ${SECS}s (log: $log)"
  # -timeout: one input may take FUZZ_TIMEOUT s (default 5; they take milliseconds, but a
  # machine shared by many jobs can be 20 times slower); models are also capped by
  # KERAC_MEMORY_LIMIT (fuzz_common.h)
  limit=(-max_total_time="$SECS")
  [ -n "${FUZZ_RUNS:-}" ] && limit=(-runs="$FUZZ_RUNS" -seed="${FUZZ_SEED:-1}")
  if ! ASAN_OPTIONS=$asan "$OUT/fuzz_$t" "${limit[@]}" -timeout="${FUZZ_TIMEOUT:-5}" -rss_limit_mb=3072 \
        -malloc_limit_mb=4096 -max_len=65536 -dict="$dict" -print_final_stats=1 -artifact_prefix="$art/" \
        "$OUT/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz/run.sh: FAILED: target '$t' found a problem; the input is in $art/" \
         "(replay: $OUT/fuzz_$t FILE; KC_FUZZ_VERBOSE=1 prints kerac's message)" >&2
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" | tr -s ' \n' ' ' | sed 's/^/  /'
  echo
done
echo "fuzz/run.sh: ${#TARGETS[@]} targets, ${FUZZ_RUNS:+$FUZZ_RUNS runs (seed ${FUZZ_SEED:-1}), }${FUZZ_RUNS:-${SECS}s} each: no crash, leak, timeout or sanitizer report"
