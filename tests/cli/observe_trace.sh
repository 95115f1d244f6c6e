#!/bin/bash
# observe_trace.sh — `kerac train --profile trace.json --profile-steps A:B` on tiny generated
# data: the file is valid JSON in Chrome's trace-event format; the traced steps are exactly
# A..B; on every thread's track the spans nest (a span inside another ends inside it); every
# layer's forward and backward, the loss, the optimizer, the data wait and the upload are in
# each step; the spans inside the steps cover at least 95% of their wall time together, and of
# each step at least 85% (a step of about a millisecond loses 5% to one preemption by the OS
# while ctest runs another test beside it: 94.2% once in CI); the training loop and the loader
# have named tracks. Needs /usr/bin/python3 with numpy (else 77).
set -u
. "$(dirname "$0")/lib/observe_common.bash"
"$PY" - "$T" <<'PY' || fail "could not make the data"
import sys, os
import numpy as np
rng = np.random.default_rng(1)
np.save(os.path.join(sys.argv[1], "x.npy"), rng.integers(0, 255, (320, 16, 16)).astype(np.uint8))
np.save(os.path.join(sys.argv[1], "y.npy"), rng.integers(0, 3, 320).astype(np.int64))
PY
timeout 120 "$K" train --data "npy:$T/x.npy,$T/y.npy" --epochs 2 --batch-size 32 --profile "$T/trace.json" \
    --profile-steps 3:12 >"$T/out" 2>"$T/err" || fail "kerac train --profile exited $?: $(cat "$T/err")"
grep -q "wrote the trace of [0-9]* spans to '$T/trace.json'" "$T/out" || fail "no trace line: $(cat "$T/out")"
"$PY" - "$T/trace.json" <<'PY' || fail "the trace is not right"
import sys, json, collections
d = json.load(open(sys.argv[1]))
ev = [e for e in d["traceEvents"] if e["ph"] == "X"]
names = {e["args"]["name"] for e in d["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
assert {"training loop", "loader"} <= names, names
by = collections.defaultdict(list)
for e in ev:
    by[e["tid"]].append(e)
for tid, es in by.items():  # nesting: a span starting inside another ends inside it
    es.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in es:
        while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
            stack.pop()
        if stack:
            assert e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"], ("overlap", e, stack[-1])
        stack.append(e)
steps = sorted((e for e in ev if e["cat"] == "step"), key=lambda e: e["ts"])
# the default CNN holds out 0.1: 288 training examples, 9 steps an epoch; 3..12 crosses epochs
assert [s["args"]["step"] for s in steps] == list(range(3, 13)), [s["args"]["step"] for s in steps]
layers = {"conv2d", "max_pooling2d", "conv2d_1", "max_pooling2d_1", "dense"}
worst, total_cov, total_dur = 1.0, 0.0, 0.0
for s in steps:
    a, b = s["ts"], s["ts"] + s["dur"]
    inside = [e for e in by[s["tid"]] if e is not s and a <= e["ts"] and e["ts"] + e["dur"] <= b]
    cats = collections.Counter(e["cat"] for e in inside)
    fwd = {e["name"] for e in inside if e["cat"] == "forward"}
    bwd = {e["name"] for e in inside if e["cat"] == "backward"}
    assert layers <= fwd and layers <= bwd, (s["args"]["step"], fwd, bwd)
    for c in ("loss", "optimizer", "data", "sync", "callbacks"):
        assert cats[c] >= 1, (s["args"]["step"], c, cats)
    covered, end = 0.0, a
    for x, y in sorted((e["ts"], e["ts"] + e["dur"]) for e in inside):
        x = max(x, end)
        if y > x:
            covered += y - x
            end = y
    worst = min(worst, covered / s["dur"])
    total_cov += covered
    total_dur += s["dur"]
assert total_cov >= 0.95 * total_dur, ("spans cover only", total_cov / total_dur)
assert worst >= 0.85, ("a step's spans cover only", worst)
assert any(e["cat"] == "copy" for e in ev)
print("trace: %d steps, %d spans, coverage %.2f%%, worst step %.2f%%" % (len(steps), len(ev), 100 * total_cov / total_dur,
                                                                       100 * worst))
PY
# usage errors
for bad in 0:3 5:2 x 3: ; do
    "$K" train --profile "$T/t.json" --profile-steps "$bad" >/dev/null 2>"$T/err"
    [ $? = 1 ] || fail "--profile-steps $bad must be a usage error"
done
"$K" train --profile-steps 2:3 >/dev/null 2>"$T/err"; [ $? = 1 ] || fail "--profile-steps without --profile"
echo "PASS"
