#!/bin/bash
# profile.sh — `kerac profile`: the per-layer table of the default CNN (28x28x1, 10 classes).
# Its FLOPs match a hand count (2 per multiply-add of the convolutions and the Dense layer;
# one comparison per pooled value; one per dropped value), backward is twice forward for
# Conv2D and Dense except the first convolution (no input gradient), the shares add up to
# the step with the loss, optimizer and other rows, the rows are sorted by cost, and one
# line names the bottleneck. Also the table form and usage errors.
set -u
K=${1:?usage: profile.sh PATH/TO/kerac}
PY=/usr/bin/python3
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

timeout 300 "$K" profile --json --batch-size 16 --steps 2 --warmup 1 >"$T/p.json" 2>"$T/err" ||
    fail "kerac profile --json exited $?: $(cat "$T/err")"
"$PY" - "$T/p.json" <<'PY' || fail "the profile is not right: $(cat "$T/p.json")"
import sys, json
p = json.load(open(sys.argv[1]))
B = 16
hand = {  # per example, counted by hand for Keras's mnist_convnet on 28x28x1
    "conv2d": 2 * (26 * 26 * 32) * (3 * 3 * 1),      # 389,376
    "max_pooling2d": (13 * 13 * 32) * (2 * 2),       # 21,632
    "conv2d_1": 2 * (11 * 11 * 64) * (3 * 3 * 32),   # 4,460,544
    "max_pooling2d_1": (5 * 5 * 64) * (2 * 2),       # 6,400
    "flatten": 0,
    "dropout": 1600,
    "dense": 2 * 1600 * 10,                          # 32,000
}
rows = {l["name"]: l for l in p["layers"]}
assert set(rows) == set(hand), sorted(rows)
for name, f in hand.items():
    assert rows[name]["forward_flops"] == f * B, (name, rows[name]["forward_flops"], f * B)
bwd = {"conv2d": 1, "conv2d_1": 2, "dense": 2, "max_pooling2d": 1, "max_pooling2d_1": 1, "dropout": 1, "flatten": 0}
for name, k in bwd.items():
    assert rows[name]["backward_flops"] == k * hand[name] * B, (name, rows[name]["backward_flops"])
cost = [l["forward_ms"] + l["backward_ms"] for l in p["layers"]]
assert cost == sorted(cost, reverse=True), cost
total = sum(cost) + p["loss_ms"] + p["optimizer_ms"] + p["other_ms"]
assert abs(total - p["step_ms"]) <= 0.02 * p["step_ms"], (total, p["step_ms"])
assert abs(sum(l["share"] for l in p["layers"]) - sum(cost) / p["step_ms"]) < 1e-3
assert p["gemm_gflops"] > 0 and p["images_per_second"] > 0
top = p["layers"][0]
assert 0 < top["gemm_fraction"] and top["gflops"] > 0
assert top["memory_bytes"] > 0
assert p["bottleneck"], p
print("profile: step %.1f ms, top %s %.0f%%, GEMM %.1f GFLOP/s" % (p["step_ms"], top["name"], 100 * top["share"],
                                                                 p["gemm_gflops"]))
PY
timeout 300 "$K" profile --batch-size 8 --steps 1 --warmup 0 >"$T/out" 2>"$T/err" || fail "kerac profile: $(cat "$T/err")"
grep -q "^conv2d_1 (Conv2D)" "$T/out" || fail "no conv2d_1 row: $(cat "$T/out")"
grep -q "^bottleneck: " "$T/out" || fail "no bottleneck line: $(cat "$T/out")"
grep -q "^step: [0-9.]* ms, [0-9]* images/s" "$T/out" || fail "no step line: $(cat "$T/out")"
"$K" profile --steps 0 >/dev/null 2>&1; [ $? = 1 ] || fail "--steps 0 is a usage error"
"$K" profile --bogus >/dev/null 2>&1; [ $? = 1 ] || fail "an unknown option is a usage error"
"$K" profile /nonexistent.keras >/dev/null 2>&1; [ $? = 2 ] || fail "a missing model file exits 2"
echo "PASS"
