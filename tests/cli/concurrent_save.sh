#!/bin/bash
# concurrent_save.sh — two `kerac train ... --save SAME.keras` at once, ten times over: both
# exit 0 and the file is always one writer's complete model (`kerac summary` reads it, every
# zip entry's CRC checked), and no temporary file is left. (Every writer used to share
# "<path>.tmp": one could rename the other's half-written file into place and still exit 0.)
# Also: a temporary left by a writer that was killed is removed by the next save to the same
# path, and one of a live process is not.
set -u
K=${1:?usage: concurrent_save.sh PATH/TO/kerac}
. "$(dirname "$0")/lib/tiny.sh"
tiny_setup 2000
TRAIN+=(--epochs 1 --batch-size 50 --quiet)

for trial in $(seq 1 10); do
    rm -f "$T/w.keras"
    timeout 120 "$K" "${TRAIN[@]}" --seed 1 --save "$T/w.keras" >"$T/a.out" 2>&1 &
    a=$!
    timeout 120 "$K" "${TRAIN[@]}" --seed 2 --save "$T/w.keras" >"$T/b.out" 2>&1 &
    b=$!
    wait $a; ra=$?
    wait $b; rb=$?
    [ $ra = 0 ] && [ $rb = 0 ] || fail "trial $trial: exits $ra and $rb: $(cat "$T/a.out" "$T/b.out")"
    "$K" summary "$T/w.keras" >"$T/s.out" 2>&1 || fail "trial $trial: both said they saved, but: $(cat "$T/s.out")"
    left=$(ls "$T" | grep -c '\.tmp$')
    [ "$left" = 0 ] || fail "trial $trial: temporaries left: $(ls "$T")"
done
echo "10 trials of two concurrent saves: every file complete"

# a temporary of a process that is gone (a writer killed mid-save) goes at the next save to
# that path; one of a live process (this shell) stays. Names: "<path>.<host>-<pid>-<n>.tmp",
# host = FNV-1a of the host name, low 24 bits, with bit 24 set (atomic_file.c).
tag=$(host_tag)
dead=$(dead_pid)
kill -0 "$dead" 2>/dev/null && fail "pid $dead is still in use"
echo junk >"$T/w.keras.$tag-$dead-0.tmp"
echo junk >"$T/w.keras.$tag-$$-0.tmp"
echo junk >"$T/other.keras.$tag-$dead-0.tmp"
"$K" "${TRAIN[@]}" --save "$T/w.keras" >"$T/c.out" 2>&1 || fail "save after a stale temporary: $(cat "$T/c.out")"
[ -e "$T/w.keras.$tag-$dead-0.tmp" ] && fail "the temporary of a dead writer (pid $dead) was not removed"
[ -e "$T/w.keras.$tag-$$-0.tmp" ] || fail "the temporary of a live process ($$) was removed"
[ -e "$T/other.keras.$tag-$dead-0.tmp" ] || fail "the temporary of another file was removed"
echo "stale temporaries: a dead writer's removed; a live one's and another file's kept"
exit 0
