#!/bin/bash
# cpu_wait.sh — the kerac command's wait policy for CPU threads (KC_CPU_SPIN_DEFAULT):
#   - with neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY set, kerac starts itself again with
#     GOMP_SPINCOUNT=3000 (libgomp reads it only when it loads), and `kerac doctor` says so;
#   - the user's GOMP_SPINCOUNT or OMP_WAIT_POLICY wins and is reported as set;
#   - run through the dynamic loader (/proc/self/exe is ld.so then), kerac does not start
#     itself again and reports libgomp's default.
set -u
K=${1:?usage: cpu_wait.sh PATH/TO/kerac}
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cpu_line() { # env-args... -> the doctor's cpu line (its exit code depends on the GPU)
    env "$@" timeout 120 "$K" doctor --no-start >"$T/out" 2>"$T/err"
    grep -E '^(ok|warning|problem) +cpu ' "$T/out" || fail "no cpu line in kerac doctor's report: $(cat "$T/out" "$T/err")"
}
line=$(cpu_line -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY)
case "$line" in *"waiting threads spin 3000 times, then sleep (GOMP_SPINCOUNT, kerac's default)"*) ;;
    *) fail "default wait policy not applied: $line" ;; esac
line=$(cpu_line -u OMP_WAIT_POLICY GOMP_SPINCOUNT=50)
case "$line" in *"waiting threads spin 50 times, then sleep (GOMP_SPINCOUNT)"*) ;; *) fail "GOMP_SPINCOUNT=50 not kept: $line" ;; esac
line=$(cpu_line -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active)
case "$line" in *"OMP_WAIT_POLICY=active"*) ;; *) fail "OMP_WAIT_POLICY=active not kept: $line" ;; esac
LDSO=$(ls /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1 2>/dev/null | head -1)
if [ -n "$LDSO" ]; then
    env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY "$LDSO" "$K" doctor --no-start >"$T/out" 2>"$T/err"
    grep -q "libgomp's default: waiting threads spin for milliseconds" "$T/out" \
        || fail "through ld.so kerac should keep libgomp's default: $(grep ' cpu ' "$T/out")"
fi
echo "cpu_wait: ok"
