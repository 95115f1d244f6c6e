#!/bin/bash
# blas_kernels.sh — OpenBLAS's kernels below kerac's own (src/backend/cpu/cpu_blas.c):
#   - OPENBLAS_CORETYPE set one instruction set below the best kerac runs here (Haswell on
#     an AVX-512 processor, Sandybridge on an AVX2 one): `kerac doctor` has a blas warning
#     naming the variable, with "unset OPENBLAS_CORETYPE" as its fix, and a command that
#     trains (`kerac profile`) says it once on stderr;
#   - the same with KERAC_CPU_ISA restricted to OpenBLAS's level: an ok line, no warning;
#   - OpenBLAS's own choice: a blas line that names its core type.
# Skips (77) on a processor without AVX2 (nothing below kerac's baseline to force).
set -u
K=${1:?usage: blas_kernels.sh PATH/TO/kerac}
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
doctor() { # env-args... -> $T/out, $T/err (its exit code depends on the GPU)
    env "$@" timeout 120 "$K" doctor --no-start --no-tensorflow >"$T/out" 2>"$T/err"
    grep -Eq '^(ok|warning) +blas ' "$T/out" || fail "no blas line in kerac doctor's report: $(cat "$T/out" "$T/err")"
}
doctor -u OPENBLAS_CORETYPE -u KERAC_CPU_ISA
grep -E '^(ok|warning) +cpu ' "$T/out" >"$T/cpu" || fail "no cpu line: $(cat "$T/out")"
if grep -q 'its avx512 kernels' "$T/cpu"; then low=Haswell set=AVX2 isa=avx2
elif grep -q 'its avx2 kernels' "$T/cpu"; then low=Sandybridge set=SSE/AVX isa=baseline
else echo "blas_kernels: skipped: kerac runs its baseline kernels here"; exit 77; fi
grep -Eq '^(ok|warning) +blas +OpenBLAS runs its [A-Za-z0-9_]+ kernels' "$T/out" \
    || fail "OpenBLAS's own choice not named: $(grep ' blas ' "$T/out")"

doctor -u KERAC_CPU_ISA OPENBLAS_CORETYPE=$low
grep -q "^warning  blas             OpenBLAS runs its $low kernels ($set), as OPENBLAS_CORETYPE=$low asks, below kerac's own" "$T/out" \
    || fail "no blas warning with OPENBLAS_CORETYPE=$low: $(grep -A1 ' blas ' "$T/out")"
grep -A1 '^warning  blas ' "$T/out" | grep -q "fix: unset OPENBLAS_CORETYPE" || fail "no fix: $(grep -A1 ' blas ' "$T/out")"

doctor KERAC_CPU_ISA=$isa OPENBLAS_CORETYPE=$low
grep -q "^ok       blas             OpenBLAS runs its $low kernels (OPENBLAS_CORETYPE=$low)" "$T/out" \
    || fail "KERAC_CPU_ISA=$isa with OPENBLAS_CORETYPE=$low should be ok: $(grep ' blas ' "$T/out")"

env -u KERAC_CPU_ISA OPENBLAS_CORETYPE=$low timeout 300 "$K" profile --batch-size 8 --steps 1 --warmup 0 \
    >"$T/out" 2>"$T/err" || fail "kerac profile exited $?: $(cat "$T/err")"
[ "$(grep -c "kerac warning: cpu backend: OpenBLAS runs its $low kernels" "$T/err")" = 1 ] \
    || fail "kerac profile should warn once: $(cat "$T/err")"
env KERAC_CPU_ISA=$isa OPENBLAS_CORETYPE=$low timeout 300 "$K" profile --batch-size 8 --steps 1 --warmup 0 \
    >"$T/out" 2>"$T/err" || fail "kerac profile exited $?: $(cat "$T/err")"
grep -q "OpenBLAS" "$T/err" && fail "KERAC_CPU_ISA=$isa: no warning expected: $(cat "$T/err")"
echo "blas_kernels: ok (OPENBLAS_CORETYPE=$low against kerac's $(sed 's/.*its \([a-z0-9]*\) kernels.*/\1/' "$T/cpu"))"
