#!/bin/bash
# checkpoint_shared.sh — one checkpoint folder, two runs: the second `kerac train
# --checkpoint DIR` is refused while the first runs (exit 3, naming the first's process),
# and the first goes on unharmed; a temporary of a live writer in the folder is never
# deleted (listing used to delete every ckpt-*.tmp, --keep another run's checkpoints);
# --resume skips a newest checkpoint that is truncated or damaged, says so, and resumes from
# the next newest.
set -u
K=${1:?usage: checkpoint_shared.sh PATH/TO/kerac}
. "$(dirname "$0")/lib/tiny.sh"
tiny_setup 2000
TRAIN+=(--batch-size 16 --seed 3)
C="$T/c"

# 1. run A holds the folder; run B is refused, naming A
"$K" "${TRAIN[@]}" --epochs 100000 --checkpoint "$C" --checkpoint-every 5 --keep 3 >"$T/a.out" 2>&1 &
BG=$!
for _ in $(seq 1 6000); do
    ls "$C" 2>/dev/null | grep -q '^ckpt-.*\.keras$' && break
    kill -0 "$BG" 2>/dev/null || fail "run A ended: $(cat "$T/a.out")"
    sleep 0.01
done
timeout 60 "$K" "${TRAIN[@]}" --epochs 2 --checkpoint "$C" --keep 1 >"$T/b.out" 2>&1
rc=$?
[ $rc = 3 ] || fail "run B in A's folder exited $rc, expected 3: $(cat "$T/b.out")"
grep -q "in use by another training run (pid $BG on host" "$T/b.out" || fail "run B's message does not name A (pid $BG): $(cat "$T/b.out")"
kill -0 "$BG" 2>/dev/null || fail "run A did not survive B: $(cat "$T/a.out")"
kill -TERM "$BG"
wait "$BG"
rc=$?
a=$BG
BG=
[ $rc = 143 ] || fail "run A: exit $rc after SIGTERM"
n=$(ls "$C" | grep -c '^ckpt-.*\.keras$')
[ "$n" = 3 ] || fail "run A's folder has $n checkpoints, --keep 3 asked for 3: $(ls "$C")"
echo "a second run in a folder in use: refused (exit 3, names pid $a); the first ran on"

# 2. a live writer's temporary survives another run's save in the folder; a dead one's goes
tag=$(host_tag)
dead=$(dead_pid)
live="ckpt-009999-e0000-s000001.keras.$tag-$$-0.tmp"
gone="ckpt-009998-e0000-s000001.keras.$tag-$dead-0.tmp"
echo junk >"$C/$live"
echo junk >"$C/$gone"
# epochs: one more than the newest checkpoint's (0-based) epoch, so that each resume is short
more() { echo $(( $(ls "$C" | grep '^ckpt-.*\.keras$' | sort | tail -1 | sed -n 's/^ckpt-[0-9]*-e0*\([0-9]*\)-.*/\1/p') + 2 )); }
"$K" train "${DATA[@]}" --resume "$C" --epochs "$(more)" --quiet >"$T/r.out" 2>&1 || fail "resume: $(cat "$T/r.out")"
[ -e "$C/$live" ] || fail "a live writer's temporary was deleted"
[ -e "$C/$gone" ] && fail "a dead writer's temporary was kept"
echo "temporaries in the folder: a live writer's kept, a dead one's removed"

# 3. the newest checkpoint truncated: --resume warns and takes the next newest
rm -f "$C/$live"
ls "$C" | grep '^ckpt-.*\.keras$' | sort >"$T/list"
newest=$(tail -1 "$T/list")
second=$(tail -2 "$T/list" | head -1)
head -c 5000 "$C/$newest" >"$T/cut" && cat "$T/cut" >"$C/$newest"
"$K" train "${DATA[@]}" --resume "$C" --epochs "$(more)" --quiet >"$T/f.out" 2>&1 ||
    fail "resume with a truncated newest checkpoint: $(cat "$T/f.out")"
grep -q "resuming from '$C/$second', the newest checkpoint that reads: .*$newest" "$T/f.out" ||
    fail "no warning naming both checkpoints: $(cat "$T/f.out")"
echo "a truncated newest checkpoint: skipped with a warning, resumed from $second"
exit 0
