# tests/cli/lib/run.sh — helpers for the shell tests of the kerac command, sourced after
# setting K (the kerac binary) and T (a scratch folder). Not a test itself (tests/cli/*.sh are).
fail() { echo "FAIL: $*" >&2; exit 1; }
# run ARGS...: kerac must succeed within the time limit; stdout -> $T/out, stderr -> $T/err
run() {
    timeout "${KERAC_TEST_TIMEOUT:-300}" "$K" "$@" >"$T/out" 2>"$T/err" || fail "kerac $* exited $?: $(cat "$T/err")"
}
# expect CODE PATTERN ARGS...: kerac exits CODE and stderr matches PATTERN (extended regex)
expect() {
    local code=$1 pat=$2; shift 2
    timeout "${KERAC_TEST_TIMEOUT:-300}" "$K" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" -eq "$code" ] || fail "kerac $* exited $rc, expected $code; stderr: $(cat "$T/err")"
    grep -Eq -- "$pat" "$T/err" || fail "kerac $*: stderr does not match '$pat': $(cat "$T/err")"
    return 0
}
