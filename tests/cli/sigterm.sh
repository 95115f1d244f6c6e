#!/bin/bash
# sigterm.sh — SIGTERM (how Slurm and Kubernetes stop a job) during `kerac train` is handled
# like the first Ctrl-C: the step finishes, a checkpoint is written where training stopped
# (with --checkpoint-every N steps too, not only in the every-epoch mode), --save still
# saves, and the exit code is 143. --resume then goes on from that checkpoint. (kerac used
# to die at once: exit 143 with no final checkpoint and no saved model.)
set -u
K=${1:?usage: sigterm.sh PATH/TO/kerac}
. "$(dirname "$0")/lib/tiny.sh"
tiny_setup 2000
TRAIN+=(--batch-size 16 --seed 3)

# term DIR EXTRA...: train (practically forever) into DIR, SIGTERM once a checkpoint is there
term() {
    local dir=$1; shift
    "$K" "${TRAIN[@]}" --epochs 100000 --checkpoint "$dir" "$@" --save "$T/saved.keras" >"$T/out" 2>&1 &
    BG=$!
    for _ in $(seq 1 6000); do
        ls "$dir" 2>/dev/null | grep -q '^ckpt-.*\.keras$' && break
        kill -0 "$BG" 2>/dev/null || break
        sleep 0.01
    done
    sleep 0.3
    kill -TERM "$BG"
    wait "$BG"
    rc=$?
    BG=
}

for mode in steps epoch; do
    rm -rf "$T/c" "$T/saved.keras"
    if [ $mode = steps ]; then term "$T/c" --checkpoint-every 7 --keep 2; else term "$T/c" --keep 2; fi
    [ "$rc" = 143 ] || fail "$mode: SIGTERM gave exit $rc, expected 143: $(tail -3 "$T/out")"
    grep -q 'training interrupted (SIGTERM) after' "$T/out" || fail "$mode: no interruption notice: $(tail -3 "$T/out")"
    "$K" summary "$T/saved.keras" >/dev/null 2>&1 || fail "$mode: --save did not save a readable model"
    epochs=$(sed -n 's/.*interrupted (SIGTERM) after \([0-9]*\) epoch.*/\1/p' "$T/out")
    newest=$(ls "$T/c" | grep '^ckpt-.*\.keras$' | sort | tail -1)
    # the newest checkpoint is where training stopped: in the last epoch of the history (the
    # one cut short: 0-based epochs - 1), or at the start of the next (the signal came at an
    # epoch's end)
    e=$(echo "$newest" | sed -n 's/^ckpt-[0-9]*-e\([0-9]*\)-s.*/\1/p' | sed 's/^0*\([0-9]\)/\1/')
    step=$(echo "$newest" | sed -n 's/^ckpt-[0-9]*-e[0-9]*-s\([0-9]*\)\.keras$/\1/p' | sed 's/^0*\([0-9]\)/\1/')
    [ "$e" = $((epochs - 1)) ] || { [ "$e" = "$epochs" ] && [ "$step" = 0 ]; } ||
        fail "$mode: newest checkpoint $newest is not where training stopped (after $epochs epochs)"
    # it holds the weights that --save saved: the same predictions, byte for byte
    "$K" predict "$T/saved.keras" --input "$T/in.npy" --output "$T/p_saved.npy" >/dev/null 2>&1 &&
        "$K" predict "$T/c/$newest" --input "$T/in.npy" --output "$T/p_ckpt.npy" >/dev/null 2>&1 ||
        fail "$mode: predict failed"
    cmp -s "$T/p_saved.npy" "$T/p_ckpt.npy" || fail "$mode: the newest checkpoint is not where training stopped"
    "$K" train "${DATA[@]}" --resume "$T/c" --epochs $((epochs + 1)) --quiet >"$T/res" 2>&1 ||
        fail "$mode: resuming after SIGTERM: $(cat "$T/res")"
    echo "$mode mode: SIGTERM -> exit 143, model saved, final checkpoint $newest, resumed"
done
exit 0
