#!/bin/bash
# checkpoint.sh — `kerac train --checkpoint DIR` killed with SIGKILL in the middle of a
# run, then `kerac train --resume DIR`, must end with the same weights as a run that was
# never interrupted: `kerac predict` outputs of both models on a fixed input compared byte
# for byte. The default CNN (with Dropout) on tiny generated 12x12 images, a validation
# split, checkpoints every 5 steps (not aligned with the 27-step epochs). Also: every
# checkpoint left after the kill is a model file `kerac summary` reads; --keep; the
# errors (a damaged checkpoint, an empty folder, options that do not go with --resume).
# Needs /usr/bin/python3 with numpy to make the data (else skipped, exit 77).
set -u
K=${1:?usage: checkpoint.sh PATH/TO/kerac}
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PY with numpy is needed to make the data"; exit 77; }
T=$(mktemp -d) || exit 1
BG=
trap '[ -n "$BG" ] && kill -9 "$BG" 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# x.npy (240, 12, 12) uint8, y.npy (240,) int64; probe.npy (16, 12, 12) float32
"$PY" - "$T" <<'PY' || fail "could not make the data"
import sys, os
import numpy as np
t = sys.argv[1]
rng = np.random.default_rng(3)
y = rng.integers(0, 4, 240)
x = rng.integers(0, 60, (240, 12, 12)).astype(np.uint8)
for i, k in enumerate(y):
    r, c = divmod(int(k), 2)
    x[i, r * 6:(r + 1) * 6, c * 6:(c + 1) * 6] += 150
np.save(os.path.join(t, "x.npy"), x)
np.save(os.path.join(t, "y.npy"), y.astype(np.int64))
np.save(os.path.join(t, "probe.npy"), rng.random((16, 12, 12), dtype=np.float32))
PY
DATA="npy:$T/x.npy,$T/y.npy"
COMMON=(--data "$DATA" --epochs 5 --batch-size 8 --seed 11 --threads 1)

# 1. the reference: never interrupted, no checkpoints
timeout 300 "$K" train "${COMMON[@]}" --quiet --save "$T/full.keras" >"$T/full.out" 2>&1 ||
    fail "uninterrupted run: $(cat "$T/full.out")"

# 2. the same run with checkpoints, killed with SIGKILL once it is well into its run: from
#    epoch 2's step 15 on, any checkpoint before the last epoch (one epoch of these tiny
#    images can pass between two polls on a quiet machine)
C="$T/ckpt"
"$K" train "${COMMON[@]}" --quiet --checkpoint "$C" --checkpoint-every 5 --keep 3 --save "$T/never.keras" \
    >"$T/killed.out" 2>&1 &
BG=$!
killed=no
{ # (bash's "Killed" notice is not wanted)
for _ in $(seq 1 3000); do
    if ls "$C" 2>/dev/null | grep -qE '^ckpt-[0-9]+-(e0001-s0000(1[5-9]|2[0-9])|e000[23]-s[0-9]+)\.keras$'; then
        kill -9 "$BG" 2>/dev/null && killed=yes
        break
    fi
    kill -0 "$BG" 2>/dev/null || break
    sleep 0.01
done
wait "$BG"
rc=$?
} 2>/dev/null
BG=
[ "$killed" = yes ] && [ "$rc" = 137 ] ||
    fail "could not kill the run in the middle (killed=$killed, exit $rc): $(ls "$C" 2>&1) $(cat "$T/killed.out")"
[ -e "$T/never.keras" ] && fail "the killed run saved its final model"
n=$(ls "$C" | grep -cE '^ckpt-.*\.keras$')
[ "$n" -ge 1 ] && [ "$n" -le 4 ] || fail "expected 1 to 3 (+1) checkpoints with --keep 3, found $n: $(ls "$C")"
for f in "$C"/ckpt-*.keras; do
    timeout 60 "$K" summary "$f" >/dev/null 2>"$T/err" || fail "checkpoint $f left by the kill does not load: $(cat "$T/err")"
done

# 3. resumed: the batch size, seed and split come from the checkpoint
timeout 300 "$K" train --data "$DATA" --threads 1 --resume "$C" --save "$T/resumed.keras" >"$T/resumed.out" 2>&1 ||
    fail "resumed run: $(cat "$T/resumed.out")"
grep -qE "resuming from '$C/ckpt-[0-9]+-e000[1-4]-s[0-9]+\.keras': [1-4] of 5 epochs done" "$T/resumed.out" ||
    fail "no 'resuming from' line for the middle of the run: $(cat "$T/resumed.out")"
grep -q "5 epochs" "$T/resumed.out" || fail "the resumed run does not aim at the run's 5 epochs: $(cat "$T/resumed.out")"
ls "$C" | grep -q '\.tmp$' && fail "stray temporaries left after a clean run: $(ls "$C")"
newest=$(ls "$C" | grep -E '^ckpt-.*\.keras$' | sort | tail -1)
case "$newest" in *-e0004-s000027.keras) ;; *) fail "newest checkpoint is $newest, expected the last step checkpoint (epoch 4, step 27 of 27)" ;; esac

# 4. the same weights: predictions byte for byte
for m in full resumed; do
    timeout 60 "$K" predict "$T/$m.keras" --input "$T/probe.npy" --output "$T/$m.npy" --quiet >"$T/p.out" 2>&1 ||
        fail "predict $m: $(cat "$T/p.out")"
done
cmp -s "$T/full.npy" "$T/resumed.npy" || fail "resumed predictions differ from the uninterrupted run's"

# 5. errors: a damaged checkpoint, a folder with none, options that do not go together
mkdir "$T/bad" "$T/empty"
head -c 3000 "$C/$newest" >"$T/bad/ckpt-000001-e0001-s000000.keras"
"$K" train --data "$DATA" --resume "$T/bad" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 2 ] || fail "a damaged checkpoint: exit $rc, expected 2: $(cat "$T/err")"
grep -q "$T/bad/ckpt-000001-e0001-s000000.keras" "$T/err" || fail "the message does not name the damaged file: $(cat "$T/err")"
[ -e "$T/bad/ckpt-000001-e0001-s000000.keras" ] || fail "the damaged checkpoint was removed"
"$K" train --data "$DATA" --resume "$T/empty" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 2 ] && grep -q "no checkpoint" "$T/err" || fail "an empty folder: exit $rc: $(cat "$T/err")"
"$K" train --data "$DATA" --resume "$C" --optimizer sgd >"$T/out" 2>"$T/err"
[ $? = 1 ] && grep -q -- "--resume" "$T/err" || fail "--resume with --optimizer must be a usage error: $(cat "$T/err")"
"$K" train --data "$DATA" --resume "$C" --batch-size 16 >"$T/out" 2>"$T/err"
[ $? = 1 ] && grep -q "batch size 8" "$T/err" || fail "--resume with another --batch-size: $(cat "$T/err")"
"$K" train --data "$DATA" --keep 2 >"$T/out" 2>"$T/err"
[ $? = 1 ] && grep -q -- "--checkpoint DIR" "$T/err" || fail "--keep without --checkpoint: $(cat "$T/err")"
"$K" train --data "$DATA" --checkpoint "$C" --checkpoint-every soon >"$T/out" 2>"$T/err"
[ $? = 1 ] || fail "--checkpoint-every soon must be a usage error: $(cat "$T/err")"
"$K" train --data "$DATA" --checkpoint "$T/x.npy/sub" --epochs 1 >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 2 ] && grep -q "x.npy/sub" "$T/err" || fail "an unwritable checkpoint folder: exit $rc: $(cat "$T/err")"

echo "checkpoint.sh: all checks passed"
