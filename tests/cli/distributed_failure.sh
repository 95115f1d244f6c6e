#!/bin/bash
# distributed_failure.sh — a rank that dies or stops answering under mpirun -np 2:
#  1. kill -9 of one rank mid-epoch (a run checkpointing every 4 steps, --collective-timeout
#     20): mpirun and the other rank exit non-zero within the timeout, the output names the
#     killed rank; the last checkpoint loads and `kerac train --resume DIR` in 1 process
#     continues and finishes;
#  2. kill -STOP of rank 1 (alive, never answering: mpirun cannot tell): rank 0 stops
#     within --collective-timeout 3 (+ its 1 s tick and slack: 15 s), naming rank 1 as
#     stopped, its pid, and what rank 0 was doing; the job exits non-zero.
# Skipped (77) when mpirun is absent or kerac was built without MPI; needs python3 + numpy.
set -u
K=${1:?usage: distributed_failure.sh PATH/TO/kerac}
. "$(dirname "$0")/lib/dist.sh"
dist_setup
STOPPED=
trap '[ -n "$STOPPED" ] && kill -9 "$STOPPED" 2>/dev/null; [ -n "$BG" ] && kill -9 "$BG" 2>/dev/null; rm -rf "$T"' EXIT
model "$T/m.json" 32
mpi_or_skip "$T/probe.out" -np 2 "$K" train "$T/m.json" "${COMMON[@]}" --epochs 1 --batch-size 32

# start 2 ranks in the background; wait for training (and a checkpoint if asked); $victim
start() { # OUT ARGS...
    local out=$1
    shift
    "${MPI[@]}" -np 2 "$K" train "$T/m.json" --data "$DATA" --epochs 100000 --batch-size 32 --threads 1 \
        --optimizer sgd --json "$@" >"$out" 2>&1 &
    BG=$!
    for _ in $(seq 600); do grep -q '"epoch"' "$out" 2>/dev/null && break; sleep 0.2; done
    grep -q '"epoch"' "$out" || fail "the 2-rank run did not start training: $(cat "$out")"
    victim=
    for p in $(pgrep -P "$BG" -f "kerac train"); do # rank 1: its environment says so
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=$p
    done
    [ -n "$victim" ] || fail "no rank 1 process found under mpirun $BG"
}
# seconds until mpirun ($BG) exits (fails after $1 s); its exit status in $rc
await() {
    local t0 t1
    t0=$(date +%s.%N)
    for _ in $(seq $(($1 * 10))); do kill -0 "$BG" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$BG" 2>/dev/null && fail "mpirun still runs $1 s after $2"
    rc=0
    wait "$BG" || rc=$?
    BG=
    t1=$(date +%s.%N)
    took=$(awk "BEGIN{printf \"%.1f\", $t1 - $t0}")
    [ "$rc" -ne 0 ] || fail "mpirun exited 0 after $2"
}

# ---- 1. kill -9 mid-epoch, then resume from the last checkpoint in 1 process
start "$T/kill.out" --checkpoint "$T/ck" --checkpoint-every 4 --collective-timeout 20
for _ in $(seq 300); do ls "$T"/ck/ckpt-*.keras >/dev/null 2>&1 && break; sleep 0.1; done
kill -9 "$victim"
await 20 "rank pid $victim was killed"
pgrep -f "$T/m.json" >/dev/null && fail "a rank outlived mpirun"
grep -Eq "rank 1|pid $victim" "$T/kill.out" || fail "the killed rank is not named: $(tail -5 "$T/kill.out")"
echo "after kill -9 of rank pid $victim, mpirun exited $rc in $took s: $(grep -Em1 "rank 1|pid $victim" "$T/kill.out")"
last=$(ls "$T"/ck/ckpt-*.keras | sort | tail -1)
[ -n "$last" ] || fail "no checkpoint was written before the kill"
"$K" summary "$last" >/dev/null 2>&1 || fail "the last checkpoint $last does not load"
done_epochs=$(basename "$last" | sed -E 's/.*-e0*([0-9]+)-s.*/\1/')
"$K" train --resume "$T/ck" --data "$DATA" --epochs $((done_epochs + 2)) --threads 1 --quiet \
    --save "$T/resumed.keras" >"$T/resume.out" 2>&1 || fail "--resume in 1 process: $(cat "$T/resume.out")"
[ -f "$T/resumed.keras" ] || fail "the resumed run did not finish"
echo "resumed $(basename "$last") in 1 process to epoch $((done_epochs + 2)): OK"

# ---- 2. rank 1 stopped (SIGSTOP): rank 0's watchdog names it within the timeout
start "$T/stop.out" --collective-timeout 3
kill -STOP "$victim"
STOPPED=$victim
await 15 "rank pid $victim was stopped"
kill -9 "$victim" 2>/dev/null
STOPPED=
grep -q "rank 0 of 2: no answer from the other ranks within 3 s" "$T/stop.out" || fail "no watchdog message: $(cat "$T/stop.out")"
grep -q "rank 1 (pid $victim on .*) is stopped" "$T/stop.out" || fail "rank 1 not named: $(cat "$T/stop.out")"
grep -q "rank 0 of 2: .* in MPI_[A-Za-z]* while training, epoch [0-9]* step [0-9]*: rank 1" "$T/stop.out" || fail "what rank 0 was doing is not said: $(cat "$T/stop.out")"
echo "after kill -STOP of rank 1 (pid $victim), mpirun exited $rc in $took s: $(grep -m1 "rank 0 of 2: no answer" "$T/stop.out" | cut -c1-220)"
echo "OK"
