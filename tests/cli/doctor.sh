#!/bin/bash
# doctor.sh — `kerac doctor`, `kerac monitor` and the global --log-level end to end:
#   - on this machine: a readable report (one line per check, a fix after each problem, the
#     verdict) and the exit code of the verdict: 1 ("cpu") where there is no NVIDIA driver
#     (libcuda.so.1 absent), else 0 or 2; --json is one JSON document with the same verdict,
#     and every warning or problem in it has a fix;
#   - through the stand-in NVIDIA libraries of the test build (tests/stubs, loaded by
#     running kerac through the dynamic loader with --inhibit-cache --library-path): a
#     healthy stand-in machine gives "gpu" and exit 0, one without cuDNN exit 2 naming
#     libcudnn.so.9, and `kerac monitor` prints its GPUs' readings;
#   - --tensorflow on the fixture of the real tensorflow-cpu 2.16.1 wheel: a CPU-only build;
#   - usage errors: exit 64 for doctor, 1 for monitor and for a bad --log-level.
set -u
K=${1:?usage: doctor.sh PATH/TO/kerac}
SRC=${KERAC_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
PY=""
for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1; then PY=$p; break; fi
done
# run EXPECTED_RC kerac-args...: stdout -> $T/out, stderr -> $T/err
run() {
    local want=$1
    shift
    timeout 120 "$K" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" = "$want" ] || fail "kerac $* exited $rc, expected $want
stdout: $(cat "$T/out")
stderr: $(cat "$T/err")"
}
has() { grep -qF -- "$2" "$1" || fail "expected '$2' in $(basename "$1"): $(cat "$1")"; }
json_check() { # FILE EXIT: the JSON parses, its verdict is EXIT, every warning/problem has a fix
    [ -n "$PY" ] || return 0
    "$PY" - "$1" "$2" <<'PY' || fail "the JSON of kerac doctor is not what it should be: $(cat "$1")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verdict"]["exit_code"] == int(sys.argv[2]), d["verdict"]
assert d["verdict"]["verdict"] == ["gpu", "cpu", "broken"][int(sys.argv[2])]
assert d["checks"], "no checks"
for c in d["checks"]:
    assert c["status"] in ("ok", "skipped", "warning", "problem"), c
    assert c["message"], c
    if c["status"] in ("warning", "problem"):
        assert c["fix"], c
assert "driver" in d and "module" in d and "gpus" in d
PY
}

# ---- this machine
run_any() { timeout 120 "$K" "$@" >"$T/out" 2>"$T/err"; echo $?; }
rc=$(run_any doctor --no-tensorflow)
[ "$rc" = 0 ] || [ "$rc" = 1 ] || [ "$rc" = 2 ] || fail "kerac doctor exited $rc: $(cat "$T/out" "$T/err")"
has "$T/out" "kerac doctor: kerac "
has "$T/out" "verdict: "
has "$T/out" "\`--device auto\` trains on "
grep -Eq '^(ok|skipped|warning|problem) +driver ' "$T/out" || fail "no driver line: $(cat "$T/out")"
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    [ "$rc" = 1 ] || fail "no NVIDIA driver here, but kerac doctor exited $rc: $(cat "$T/out")"
    has "$T/out" "problem  driver           no NVIDIA driver: libcuda.so.1 not found"
    has "$T/out" "fix: install the NVIDIA driver"
    has "$T/out" "verdict: cpu (exit 1: only the CPU is usable here)"
    has "$T/out" "\`--device auto\` trains on the CPU: "
    echo "this machine: $(grep -A1 '^verdict' "$T/out" | tail -n 1)"
else
    echo "this machine has a driver: $(grep '^verdict' "$T/out")"
fi
run "$rc" doctor --no-tensorflow --json
json_check "$T/out" "$rc"

# ---- TensorFlow: the fixture of the real tensorflow-cpu wheel
run "$rc" doctor --no-start --tensorflow "$SRC/tests/fixtures/tensorflow/tensorflow-cpu-2.16.1"
has "$T/out" "warning  tensorflow       TensorFlow 2.16.1 (tensorflow-cpu, "
has "$T/out" "is a CPU-only build: it never uses a GPU"
run "$rc" doctor --no-start --tensorflow "$T/nowhere"
has "$T/out" "problem  tensorflow       no TensorFlow at $T/nowhere"

# ---- usage
run 0 doctor --help
has "$T/out" "usage: kerac doctor"
run 64 doctor --bogus
has "$T/err" "unknown option '--bogus'"
run 0 monitor --help
run 1 monitor --interval 0
run 1 summary --log-level loud
has "$T/err" "option '--log-level' must be debug, info, warning or error"
run "$rc" doctor --no-tensorflow --log-level debug

# ---- the stand-in machine
STUBS=${KERAC_BINARY_DIR:-}/tests/stubs
if [ -z "${KERAC_BINARY_DIR:-}" ] || [ ! -e "$STUBS/lib/libcuda.so.1" ]; then
    echo "stand-in libraries not built (KERAC_BINARY_DIR unset): stand-in checks not run"
    exit 0
fi
LDSO=$(readelf -l "$K" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
[ -n "$LDSO" ] || LDSO=/lib64/ld-linux-x86-64.so.2
mkdir "$T/all" "$T/nodnn"
for f in libcuda.so.1 libnvidia-ml.so.1 libcudnn.so.9 libcublas.so.13; do ln -s "$STUBS/lib/$f" "$T/all/"; done
for f in libcuda.so.1 libnvidia-ml.so.1 libcublas.so.13; do ln -s "$STUBS/lib/$f" "$T/nodnn/"; done
stub() { # EXPECTED_RC LIBDIR kerac-args...
    local want=$1 dir=$2
    shift 2
    env -u LD_LIBRARY_PATH KERAC_MODULE_PATH="$STUBS/module" KC_STUB_GPUS="NVIDIA H200,9.0,143771,140000,87,45,64,250,700" \
        timeout 120 "$LDSO" --inhibit-cache --library-path "$dir" "$K" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" = "$want" ] || fail "(stand-ins in $dir) kerac $* exited $rc, expected $want
stdout: $(cat "$T/out")
stderr: $(cat "$T/err")"
}
stub 0 "$T/all" doctor --no-tensorflow
has "$T/out" "ok       gpu:0            cuda:0 NVIDIA H200, compute capability 9.0"
has "$T/out" "verdict: gpu (exit 0: the GPU path is healthy)"
stub 0 "$T/all" doctor --no-tensorflow --json
json_check "$T/out" 0
stub 2 "$T/nodnn" doctor --no-tensorflow
has "$T/out" "problem  cudnn            cuDNN 9 not found: libcudnn.so.9"
has "$T/out" "verdict: broken (exit 2"
stub 0 "$T/all" monitor --count 2 --interval 0.05
has "$T/out" "# gpu cuda  name"
[ "$(grep -c 'NVIDIA H200' "$T/out")" = 2 ] || fail "expected 2 rows for the H200: $(cat "$T/out")"
grep -Eq '^ +0 +0  NVIDIA H200 +87 +45 +3771/143771 +64 +250/700$' "$T/out" || fail "unexpected row: $(cat "$T/out")"
mkdir "$T/nonvml"
ln -s "$STUBS/lib/libcuda.so.1" "$T/nonvml/"
stub 3 "$T/nonvml" monitor --count 1
has "$T/err" "cannot read the GPUs: NVML (libnvidia-ml.so.1, part of the NVIDIA driver) cannot be loaded"
echo "ok: kerac doctor and kerac monitor"
