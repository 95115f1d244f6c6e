#!/bin/bash
# damaged_files.sh — damaged model files are refused with exit 2 and one line naming what is
# damaged, never a crash or a silent success:
#   - a .keras file with one flipped byte in its weights: the zip entry's CRC does not match
#     (summary, predict and convert used to exit 0 with different weights);
#   - fuzz/corpus/keras/crash-h5hg-read.h5, a Keras 2 .h5 whose variable-length string
#     names a global heap object that does not exist (libhdf5 1.10 segfaulted, exit 139).
set -u
K=${1:?usage: damaged_files.sh PATH/TO/kerac}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/lib/tiny.sh"
tiny_setup 200
expect2() { # PATTERN ARGS...: exit 2, one "kerac: " line matching PATTERN
    local pat=$1; shift
    timeout 60 "$K" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ $rc = 2 ] || fail "kerac $* exited $rc, expected 2; stderr: $(cat "$T/err")"
    [ "$(grep -c '^kerac: ' "$T/err")" = 1 ] || fail "kerac $*: not one error line: $(cat "$T/err")"
    grep -Eq -- "$pat" "$T/err" || fail "kerac $*: stderr does not match '$pat': $(cat "$T/err")"
}

"$K" "${TRAIN[@]}" --epochs 1 --quiet --save "$T/m.keras" >"$T/out" 2>&1 ||
    fail "training: $(cat "$T/out")"
# flip one byte in the middle of model.weights.h5 (stored, not compressed: it starts with the
# HDF5 signature inside the archive)
at=$(LC_ALL=C grep -obUaP '\x89HDF\r' "$T/m.keras" | head -1 | cut -d: -f1)
[ -n "$at" ] || fail "no HDF5 entry found in the archive"
cp "$T/m.keras" "$T/flip.keras"
pos=$((at + 40000))
byte=$(od -An -tu1 -j $pos -N1 "$T/flip.keras" | tr -d ' ')
printf "\\x$(printf %02x $(((byte + 1) & 255)))" | dd of="$T/flip.keras" bs=1 seek=$pos conv=notrunc status=none
cmp -s "$T/m.keras" "$T/flip.keras" && fail "the byte was not changed"
crc="entry 'model.weights.h5' fails its CRC check"
expect2 "$crc" summary "$T/flip.keras"
expect2 "$crc" predict "$T/flip.keras" --input "$T/in.npy" --output "$T/out.npy"
expect2 "$crc" convert "$T/flip.keras" "$T/out.h5"
[ -e "$T/out.h5" ] && fail "convert wrote a file from a damaged archive"
"$K" summary "$T/m.keras" >/dev/null 2>&1 || fail "the undamaged archive does not read"
echo "a flipped byte in a .keras: refused by summary, predict and convert, naming the entry"

expect2 "global heap" summary "$SRC/fuzz/corpus/keras/crash-h5hg-read.h5"
echo "a Keras 2 .h5 naming a missing global heap object: refused"
exit 0
