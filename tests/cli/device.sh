#!/bin/bash
# device.sh — `kerac --device` end to end, on a machine with or without a GPU:
#   - a device name that is not cpu, cuda, cuda:N or auto is a usage error (exit 1);
#   - without a usable GPU: `train --device cuda` stops with exit 3 and says why (the reason
#     names the missing piece: no module, a library, no driver, no device), and `--device
#     auto` trains on the CPU (exit 0) with a warning "no GPU: <the same reason>; training
#     on the CPU"; KERAC_DEVICE=cuda behaves like --device cuda; evaluate and predict
#     follow the same rules;
#   - with a GPU: both train on it ("on cuda:N (...)") and auto prints no warning;
#   - --log-device-placement names each layer's kernel (the CPU's here, cuDNN's on a GPU).
# One epoch on 64 generated 12x12 images. The data is written by python3 (any python3: no
# numpy needed); without one the test is skipped (exit 77).
set -u
K=${1:?usage: device.sh PATH/TO/kerac}
PY=""
for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: python3 is needed to make the data"; exit 77; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# run EXPECTED_RC kerac-args...: stdout -> $T/out, stderr -> $T/err
run() {
    local want=$1
    shift
    timeout 300 "$K" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" = "$want" ] || fail "kerac $* exited $rc, expected $want
stdout: $(cat "$T/out")
stderr: $(cat "$T/err")"
}
has() { grep -qF -- "$2" "$1" || fail "expected '$2' in $(basename "$1"): $(cat "$1")"; }
lacks() { ! grep -qF -- "$2" "$1" || fail "did not expect '$2' in $(basename "$1"): $(cat "$1")"; }

# x.npy (64, 12, 12) uint8, y.npy (64,) int64: class k lights up quadrant k
"$PY" - "$T" <<'PY' || fail "could not make the data"
import os, random, struct, sys
t = sys.argv[1]
rnd = random.Random(0)
def npy(path, descr, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % s for s in shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
n = 64
ys = [rnd.randrange(4) for _ in range(n)]
px = bytearray()
for k in ys:
    r, c = divmod(k, 2)
    for i in range(12):
        for j in range(12):
            v = rnd.randrange(60)
            if r * 6 <= i < r * 6 + 6 and c * 6 <= j < c * 6 + 6:
                v += 180
            px.append(v)
npy(os.path.join(t, "x.npy"), "|u1", (n, 12, 12), bytes(px))
npy(os.path.join(t, "y.npy"), "<i8", (n,), struct.pack("<%dq" % n, *ys))
PY
DATA="npy:$T/x.npy,$T/y.npy"
COMMON=(--data "$DATA" --epochs 1 --batch-size 16 --validation-split 0)

# usage errors
run 1 train "${COMMON[@]}" --device bogus
has "$T/err" "must be cpu, cuda, cuda:N or auto"
run 1 train "${COMMON[@]}" --device cuda:x
run 1 train "${COMMON[@]}" --gpu-memory lots
has "$T/err" "--gpu-memory"

# a model file for evaluate / predict, trained on the CPU
run 0 train "${COMMON[@]}" --device cpu --quiet --save "$T/m.json"

# --log-device-placement: one line per layer with the kernel the backend says it runs
run 0 train "${COMMON[@]}" --device cpu --quiet --log-device-placement
has "$T/err" "placement: conv2d (Conv2D) on cpu: cpu direct conv (patch 3x3x1, 32 filters)"
has "$T/err" "placement: dense (Dense) on cpu: cpu gemm (OpenBLAS)"
# conv2d_1 (32 -> 64): the register-blocked direct kernel where the processor has AVX2 or
# AVX-512, im2col otherwise; KERAC_CPU_CONV_BLOCKED=0 keeps im2col everywhere
grep -qE "placement: conv2d_1 \(Conv2D\) on cpu: cpu (register-blocked direct conv \(patch 3x3x32, 64 filters\)|im2col\+gemm \(OpenBLAS, patch 3x3x32)" "$T/err" ||
    fail "no conv2d_1 placement line with the blocked or the im2col kernel: $(cat "$T/err")"
KERAC_CPU_CONV_BLOCKED=0 run 0 train "${COMMON[@]}" --device cpu --quiet --log-device-placement
has "$T/err" "placement: conv2d_1 (Conv2D) on cpu: cpu im2col+gemm (OpenBLAS, patch 3x3x32"

# cpu-speed: --cpu-isa picks the CPU kernels' instruction set, named in the placement lines;
# an unknown set is a usage error, and so is KERAC_CPU_ISA's (named)
run 0 train "${COMMON[@]}" --device cpu --quiet --log-device-placement --cpu-isa baseline
has "$T/err" "placement: conv2d_1 (Conv2D) on cpu: cpu im2col+gemm (OpenBLAS, patch 3x3x32"
has "$T/err" ", baseline)"
run 1 train "${COMMON[@]}" --device cpu --quiet --cpu-isa sse9
has "$T/err" "option '--cpu-isa' must be auto, baseline, avx2 or avx512, got 'sse9'"
KERAC_CPU_ISA=sse9 timeout 300 "$K" train "${COMMON[@]}" --device cpu --quiet >"$T/out" 2>"$T/err" &&
    fail "KERAC_CPU_ISA=sse9 was accepted"
has "$T/err" "KERAC_CPU_ISA: 'sse9' is not one of auto, baseline, avx2, avx512"

# the device options reach the GPU module from the command line, over the environment's:
# a stand-in module (tests/stubs/echo_module.c) fails its start with what it was given
ECHO="${KERAC_BINARY_DIR:-}/tests/stubs/echo"
if [ -e "$ECHO/libkerac_cuda.so" ]; then
    KERAC_MODULE_PATH=$ECHO KERAC_GPU_MEMORY=grow KERAC_TF32=1 KERAC_CUDNN_BENCHMARK=0 \
        run 3 train "${COMMON[@]}" --device cuda:1 --gpu-memory limit=1G --deterministic --cudnn-benchmark \
        --memory-limit 64M
    has "$T/err" "device=cuda:1 gpu_memory=limit=1G memory_limit=67108864 workspace=0 benchmark=1 deterministic=1 tf32=1"
    KERAC_MODULE_PATH=$ECHO KERAC_DEVICE=cuda:2 KERAC_GPU_MEMORY=preallocate=0.3 run 3 train "${COMMON[@]}"
    has "$T/err" "device=cuda:2 gpu_memory=preallocate=0.3 "
    KERAC_MODULE_PATH=$ECHO run 3 evaluate "$T/m.json" --data "$DATA" --device cuda --gpu-memory preallocate=0.5
    has "$T/err" "device=cuda gpu_memory=preallocate=0.5 "
    KERAC_MODULE_PATH=$ECHO run 3 predict "$T/m.json" --input "$T/x.npy" --output "$T/p.npy" --device cuda:0 \
        --deterministic
    has "$T/err" "device=cuda:0 gpu_memory=(null) memory_limit=0 workspace=0 benchmark=0 deterministic=1"
    KERAC_MODULE_PATH=$ECHO run 3 summary "$T/m.json" --device cuda --cudnn-benchmark
    has "$T/err" "benchmark=1"
    KERAC_MODULE_PATH=$ECHO run 3 summary --device cuda --gpu-memory limit=5G
    has "$T/err" "gpu_memory=limit=5G"
    run 0 train "${COMMON[@]}" --device cpu --quiet --checkpoint "$T/ck"
    KERAC_MODULE_PATH=$ECHO run 3 train --data "$DATA" --resume "$T/ck" --device cuda --gpu-memory limit=3G
    has "$T/err" "gpu_memory=limit=3G"
    echo "ok: the device options reach the module (stand-in)"
fi

timeout 300 "$K" train "${COMMON[@]}" --device cuda >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" = 0 ]; then
    echo "a GPU is present: $(grep -o 'on cuda:[^)]*)' "$T/out" | head -n 1)"
    has "$T/out" "on cuda:"
    run 0 train "${COMMON[@]}" --device auto
    has "$T/out" "on cuda:"
    lacks "$T/err" "no GPU"
    run 0 evaluate "$T/m.json" --data "$DATA" --device cuda
    run 0 predict "$T/m.json" --input "$T/x.npy" --output "$T/p.npy" --device cuda:0 --gpu-memory limit=2G
    run 0 train "${COMMON[@]}" --device cuda --cudnn-benchmark --deterministic --gpu-memory preallocate=0.2 --quiet
    run 0 train "${COMMON[@]}" --device cuda --quiet --log-device-placement
    has "$T/err" "placement: conv2d (Conv2D) on cuda:"
    has "$T/err" "cuDNN forward "
    has "$T/err" "placement: dense (Dense) on cuda:"
    KERAC_DEVICE=cuda run 0 train "${COMMON[@]}"
    has "$T/out" "on cuda:"
    run 3 train "${COMMON[@]}" --device cuda:63
    has "$T/err" "cuda:63 does not exist"
    echo "ok: --device cuda and auto train on the GPU"
    exit 0
fi
[ "$rc" = 3 ] || fail "train --device cuda exited $rc; expected 0 (GPU) or 3 (no GPU): $(cat "$T/err")"
has "$T/err" "kerac: "
has "$T/err" "cuda"
# the reason, without the "kerac: model 'x': " prefix
reason=$(sed -n 's/^kerac: model '"'"'[^'"'"']*'"'"': //p' "$T/err" | head -n 1)
[ -n "$reason" ] || reason=$(sed -n 's/^kerac: //p' "$T/err" | head -n 1)
[ -n "$reason" ] || fail "no reason in: $(cat "$T/err")"
echo "no GPU here: $reason"
if [ ! -e "$(dirname "$K")/libkerac_cuda.so" ] && [ -z "${KERAC_MODULE_PATH:-}" ]; then
    has "$T/err" "not installed"
elif ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    has "$T/err" "libcuda.so.1" # the module is there, the driver is not
fi

# auto's one-line reason is the doctor's diagnosis (kerac doctor --json: verdict.reason)
auto_reason=$("$K" doctor --no-tensorflow --no-start --json | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["verdict"]["reason"])')
[ -n "$auto_reason" ] || fail "kerac doctor --json gave no verdict reason"
run 0 train "${COMMON[@]}" --device auto
has "$T/err" "no GPU: ${auto_reason:0:60}"
has "$T/err" "training on the CPU"
has "$T/out" "on cpu"

KERAC_DEVICE=cuda run 3 train "${COMMON[@]}" --quiet
has "$T/err" "${reason:0:60}"
KERAC_DEVICE=auto run 0 train "${COMMON[@]}" --quiet
has "$T/err" "no GPU: "

run 3 evaluate "$T/m.json" --data "$DATA" --device cuda
has "$T/err" "${reason:0:60}"
run 0 evaluate "$T/m.json" --data "$DATA" --device auto
has "$T/err" "no GPU: "
run 3 predict "$T/m.json" --input "$T/x.npy" --output "$T/p.npy" --device cuda
run 0 predict "$T/m.json" --input "$T/x.npy" --output "$T/p.npy" --device auto
has "$T/err" "no GPU: "
[ -s "$T/p.npy" ] || fail "predict --device auto wrote no output"
echo "ok: --device cuda stops with the reason, --device auto trains on the CPU and says why"
