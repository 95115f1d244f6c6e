#!/bin/bash
# help.sh — every `kerac` subcommand's --help exits 0 and prints its usage; unknown
# commands and options, missing values and bad numbers exit 1 with a clear message.
set -u
K=${1:?usage: help.sh PATH/TO/kerac}
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE PATTERN ARGS...: run kerac, check the exit code and that stdout+stderr match PATTERN
expect() {
    local code=$1 pat=$2; shift 2
    "$K" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" -eq "$code" ] || fail "kerac $* exited $rc, expected $code; stderr: $(cat "$T/err")"
    grep -Eq -- "$pat" "$T/out" "$T/err" || fail "kerac $*: output does not match '$pat': $(cat "$T/out" "$T/err")"
}

expect 0 '^usage: kerac <command>' --help
expect 0 '^usage: kerac <command>' -h
expect 0 '^kerac [0-9]+\.[0-9]+\.[0-9]+' --version
for c in train evaluate predict summary; do
    expect 0 "^usage: kerac $c" "$c" --help
    expect 0 "^usage: kerac $c" "$c" -h
    expect 0 "^usage: kerac $c" help "$c"
    [ -s "$T/err" ] && fail "kerac $c --help wrote to stderr"
done
# help goes to stdout, nothing else is done: --help wins over other (even bad) options
expect 0 '^usage: kerac train' train --epochs 5 --help

expect 1 'usage: kerac <command>'
expect 1 "unknown command 'frobnicate'" frobnicate
expect 1 "unknown option '--bogus'" --bogus
expect 1 "unknown command 'nope'" help nope
for c in train evaluate predict summary; do
    expect 1 "kerac $c: unknown option '--bogus'" "$c" --bogus
    expect 1 "unknown option '--bogus'" "$c" --bogus=3
done
expect 1 "option '--epochs' needs a value" train --epochs
expect 1 "option '--epochs' needs a value" train --epochs --json
expect 1 "option '--epochs' needs a whole number from 1" train --epochs abc
expect 1 "option '--epochs' needs a whole number from 1" train --epochs 0
expect 1 "option '--epochs' needs a whole number from 1" train --epochs=2x
expect 1 "option '--batch-size' needs a whole number" train --batch-size -5
expect 1 "option '--batch-size' needs a whole number" train --batch-size 99999999999999999999
expect 1 "option '--lr' needs a number > 0" train --lr 0
expect 1 "option '--lr' needs a number > 0" train --lr nan
expect 1 "option '--validation-split' needs a number >= 0" train --validation-split 1.5
expect 1 "option '--seed' needs a non-negative whole number" train --seed -1
expect 1 "option '--threads' needs a whole number" train --threads many
expect 1 "unknown optimizer 'adagrad'" train --optimizer adagrad
expect 1 "option '--json' takes no value" train --json=yes
expect 1 "option '--metrics' needs 1 to 4 names" train --metrics accuracy,,mse
expect 1 "unexpected argument 'b.json'" train a.json b.json
expect 1 "missing the MODEL file" evaluate --data npy:x.npy,y.npy
expect 1 "missing '--data SPEC'" evaluate model.json
expect 1 "missing '--input X.npy'" predict model.json --output y.npy
expect 1 "missing '--output Y.npy'" predict model.json --input x.npy
expect 1 "option '--batch-size' needs a whole number" predict m.json --input x.npy --output y.npy --batch-size 0
expect 1 "option '--input-shape' needs H,W or H,W,C" summary --input-shape 28
expect 1 "apply to the default CNN only" summary m.json --classes 3
# every usage error points at the help
expect 1 "see 'kerac train --help'" train --epochs 0
echo "help.sh: all checks passed"
