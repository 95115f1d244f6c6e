#!/bin/bash
# disk_full.sh — no room left while saving or checkpointing is a runtime failure: exit 3 and
# one line ("no space left on device writing 'CKPT'; the previous checkpoint 'CKPT0' is
# intact"), never libhdf5's multi-line text; the file being replaced and the previous
# checkpoint stay intact and no temporary is left. (It used to be exit 2 with libhdf5's
# error stack.)
# The full disk is a small tmpfs, mounted where this runs as root (or in a user namespace
# with `unshare -rm`); failing both, a file size limit (ulimit -f: EFBIG) stands in.
set -u
K=${1:?usage: disk_full.sh PATH/TO/kerac}
K=$(cd "$(dirname "$K")" && pwd)/$(basename "$K")
. "$(dirname "$0")/lib/tiny.sh"
tiny_setup 500
TRAIN+=(--batch-size 50 --quiet)

# size of one checkpoint of this model (with its optimizer state), in KiB
"$K" "${TRAIN[@]}" --epochs 1 --checkpoint "$T/probe" --save "$T/m.keras" >"$T/out" 2>&1 || fail "$(cat "$T/out")"
ck=$(( ($(stat -c %s "$T"/probe/ckpt-*.keras) + 1023) / 1024 ))
mk=$(( ($(stat -c %s "$T/m.keras") + 1023) / 1024 ))

# run_full SIZE_KIB SCRIPT: run SCRIPT (bash, in $T) with a file system of SIZE_KIB at $T/full
cat >"$T/mnt.sh" <<'SH'
mount -t tmpfs -o size="$1"k tmpfs "$2" 2>/dev/null || exit 99
shift 2
exec bash "$@"
SH
mkdir -p "$T/full"
how=${DISK_FULL_BY:-}
if [ -n "$how" ]; then :
elif bash "$T/mnt.sh" 64 "$T/full" -c "umount '$T/full'" 2>/dev/null; then how=tmpfs
elif unshare -rm bash "$T/mnt.sh" 64 "$T/full" -c 'exit 0' 2>/dev/null; then how=unshare
else how=ulimit; fi
run_full() {
    case $how in
    tmpfs) bash "$T/mnt.sh" "$1" "$T/full" -c "cd '$T'; $2; r=\$?; cd /; umount '$T/full'; exit \$r" ;;
    unshare) unshare -rm bash "$T/mnt.sh" "$1" "$T/full" -c "cd '$T'; $2" ;;
    ulimit) bash -c "trap '' XFSZ; ulimit -f $(( $1 ))"'; cd "'"$T"'"; '"$2" ;;
    esac
}
echo "a full disk by: $how (checkpoint ${ck} KiB, model ${mk} KiB)"
expect3() { # FILE PATTERN: exit 3 and one kerac line matching PATTERN, no HDF5 text
    [ "$(cat "$T/rc")" = 3 ] || fail "exit $(cat "$T/rc"), expected 3: $(cat "$1")"
    [ "$(grep -c '^kerac: ' "$1")" = 1 ] || fail "not one error line: $(cat "$1")"
    grep -q 'HDF5' "$1" && fail "libhdf5's text reached the user: $(cat "$1")"
    grep -Eq -- "$2" "$1" || fail "the message does not match '$2': $(cat "$1")"
}
nospace='(no space left on device|file too large[^;]*) writing'

if [ $how = ulimit ]; then # a limit per file: the first checkpoint and the model do not fit
    run_full $((ck / 2)) "'$K' ${TRAIN[*]} --epochs 2 --checkpoint c --keep 1 >err 2>&1; echo \$? >rc; ls -a c >ls"
    expect3 "$T/err" "file too large[^;]* writing 'c/ckpt-000001-e0001-s000000.keras'; there is no earlier checkpoint"
    grep -q '\.tmp$' "$T/ls" && fail "a temporary was left: $(cat "$T/ls")"
    run_full $((mk / 2)) "'$K' convert m.keras w2.keras >err 2>&1; echo \$? >rc"
    expect3 "$T/err" "file too large[^;]* writing 'w2.keras'; 'w2.keras' was left as it was"
    echo "checkpoint and convert over the file size limit: exit 3, one line"
    exit 0
fi

# 1. checkpoints: room for one and a half; the second does not fit
run_full $((ck * 3 / 2 + 8)) "'$K' ${TRAIN[*]} --epochs 4 --checkpoint full/c --keep 1 >err 2>&1; echo \$? >rc
    ls -a full/c >ls; cp full/c/ckpt-000001-*.keras kept.keras 2>/dev/null; true"
expect3 "$T/err" "$nospace 'full/c/ckpt-000002-e0002-s000000.keras'; the previous checkpoint 'full/c/ckpt-000001-e0001-s000000.keras' is intact"
grep -q '\.tmp$' "$T/ls" && fail "a temporary was left: $(cat "$T/ls")"
"$K" summary "$T/kept.keras" >/dev/null 2>&1 || fail "the previous checkpoint does not read"
echo "checkpoint on a full disk: exit 3, one line, the previous checkpoint intact"

# 2. --save and convert over an existing model on a disk without room for the new one
run_full $((mk + mk / 2 + 8)) "cp m.keras full/w.keras; '$K' convert m.keras full/w2.keras >err 2>&1; echo \$? >rc;
    cmp -s m.keras full/w.keras && echo same >same; ls -a full >ls; true"
expect3 "$T/err" "$nospace 'full/w2.keras'; 'full/w2.keras' was left as it was"
[ -s "$T/same" ] || fail "the other file on the disk changed"
grep -q '\.tmp$' "$T/ls" && fail "a temporary was left: $(cat "$T/ls")"
rm -f "$T/same"
run_full $((mk + mk / 2 + 8)) "cp m.keras full/w.keras; '$K' train m.keras ${DATA[*]} --epochs 1 --quiet --save full/w.keras >err 2>&1
    echo \$? >rc; cmp -s m.keras full/w.keras && echo same >same; true"
expect3 "$T/err" "$nospace 'full/w.keras'"
[ -s "$T/same" ] || fail "the model being replaced changed"
echo "--save and convert on a full disk: exit 3, one line, the old file intact"
exit 0
