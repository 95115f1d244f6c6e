# bench/common.sh — sourced by bench/run.sh and bench/finetune/run.sh: what both benchmark
# drivers do the same way. After `. bench/common.sh`:
#
#   bench_args HELP_LINES "$@"   --record (RECORD=1), --no-build (BUILD=0), -h (prints the
#                                calling script's header lines HELP_LINES, e.g. 2,20)
#   bench_settings               checks ROUNDS and THREADS (defaults 3 and 2); CPU_ISA and
#                                ISA_ENV (bench/isa_env.sh); KERAC_WAIT and WAIT_DESC, the
#                                spin-count policy kerac's side runs with; KERAC_ENV and
#                                TORCH_ENV, each side's settings for `env`
#   bench_need_pymods MOD=PKG... installs the Debian packages of missing Python modules (root)
#   bench_build TARGET           configures and builds TARGET in $BUILD_DIR (Release)
#   bench_run_one LABEL CMD...   runs CMD, keeps its last JSON line in $RAW, echoes it
#   bench_load                   the 1-minute load average
#   bench_window_desc            "training 3 s window, inference 2 s window" (or the counts)
#   bench_commit [PATH...]       HEAD's short hash, "+dirty" when PATHs (all) have changes other
#                                than the rows recorded in bench/RESULTS.md
#   BENCH_CPU                    the processor model and its vector instruction sets (exported)
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BENCH_ROOT="$(cd "$BENCH_DIR/.." && pwd)"
PY=/usr/bin/python3

bench_args() { # help_lines, args...
    local help="$1"; shift
    RECORD=0
    BUILD=1
    for arg in "$@"; do
        case "$arg" in
            --record) RECORD=1 ;;
            --no-build) BUILD=0 ;;
            -h|--help) sed -n "${help}p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
            *) echo "run.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
        esac
    done
}

bench_settings() {
    ROUNDS="${ROUNDS:-3}"
    THREADS="${THREADS:-2}"
    case "$ROUNDS" in ''|*[!0-9]*|0) echo "run.sh: ROUNDS must be a positive integer, got '$ROUNDS'" >&2; exit 2 ;; esac
    case "$THREADS" in ''|*[!0-9]*|0) echo "run.sh: THREADS must be a positive integer, got '$THREADS'" >&2; exit 2 ;; esac
    . "$BENCH_DIR/isa_env.sh"
    # kerac's side waits as the kerac command does: it sets GOMP_SPINCOUNT to
    # KC_CPU_SPIN_DEFAULT (include/kerac.h, read from there) unless the user set it or
    # OMP_WAIT_POLICY; PyTorch keeps its own defaults. A GOMP_SPINCOUNT or OMP_WAIT_POLICY in
    # the environment applies to both.
    local spin
    spin="$(sed -n 's/^#define KC_CPU_SPIN_DEFAULT "\([0-9]*\)".*/\1/p' "$BENCH_ROOT/include/kerac.h")"
    [ -n "$spin" ] || { echo "run.sh: no KC_CPU_SPIN_DEFAULT in $BENCH_ROOT/include/kerac.h" >&2; exit 1; }
    KERAC_WAIT=""
    [ -n "${GOMP_SPINCOUNT:-}" ] || [ -n "${OMP_WAIT_POLICY:-}" ] || KERAC_WAIT="GOMP_SPINCOUNT=$spin"
    WAIT_DESC="${KERAC_WAIT:-GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-unset} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}}"
    KERAC_ENV=("${ISA_ENV[@]}" BENCH_THREADS="$THREADS" KERAC_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS")
    [ -z "$KERAC_WAIT" ] || KERAC_ENV+=("$KERAC_WAIT")
    # PyTorch's best settings on these machines (bench/README.md): one OpenBLAS thread and
    # glibc malloc tuning against page faults from freshly mmapped buffers
    TORCH_ENV=("${ISA_ENV[@]}" BENCH_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS=1
               MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 MALLOC_TOP_PAD_=134217728)
}

bench_need_pymods() { # module=debian-package ...
    local missing=() m
    for m in "$@"; do "$PY" -c "import ${m%%=*}" 2>/dev/null || missing+=("${m#*=}"); done
    [ "${#missing[@]}" -gt 0 ] || return 0
    bench_need_packages "${missing[@]}"
}

bench_need_packages() { # debian-package ...
    [ "$#" -gt 0 ] || return 0
    if [ "$(id -u)" = 0 ]; then
        echo "run.sh: installing $*" >&2
        apt-get install -y --no-install-recommends "$@" >&2
    else
        echo "run.sh: missing $*; install them with:" >&2
        echo "  sudo apt-get install -y --no-install-recommends $*" >&2
        exit 1
    fi
}

bench_build() { # target
    if ! grep -q '^[[:space:]]*add_subdirectory(bench)' "$BENCH_ROOT/CMakeLists.txt"; then
        echo "run.sh: $BENCH_ROOT/CMakeLists.txt has no 'add_subdirectory(bench)'; add that line" >&2
        exit 1
    fi
    cmake -S "$BENCH_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD_DIR" -j2 --target "$1" >/dev/null
}

bench_run_one() { # label, command...
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

bench_load() { cut -d' ' -f1 /proc/loadavg; }

bench_window_desc() { # what each round measures over: windows of wall-clock seconds, or fixed counts
    local t="$BENCH_STEPS steps" i="$BENCH_INFER_REPS passes"
    [ "${BENCH_SECONDS:-0}" = 0 ] || t="${BENCH_SECONDS} s window"
    [ "${BENCH_INFER_SECONDS:-0}" = 0 ] || i="${BENCH_INFER_SECONDS} s window"
    echo "training $t, inference $i"
}

bench_commit() { # pathspec... (none: the whole tree); bench/RESULTS.md, where the rows go, does not count
    local c
    c="$(git -C "$BENCH_ROOT" rev-parse --short HEAD 2>/dev/null || echo none)"
    if [ "$c" != none ] && [ -n "$(git -C "$BENCH_ROOT" status --porcelain -- "${@:-.}" ':!bench/RESULTS.md' 2>/dev/null)" ]; then
        c="$c+dirty"
    fi
    echo "$c"
}

bench_cpu() { # "model, avx2 fma avx512f ..." (the vector instruction sets kerac and oneDNN choose from)
    local model flags isa="" f
    model="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
    flags=" $(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1) "
    for f in avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16 amx_tile; do
        case "$flags" in *" $f "*) isa="$isa $f" ;; esac
    done
    isa="${isa# }"
    echo "${model:-unknown}, ${isa:-no AVX2}"
}
BENCH_CPU="$(bench_cpu)"
export BENCH_CPU
