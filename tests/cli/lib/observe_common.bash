# observe_common.bash — sourced by the tests of `kerac train`'s observing options
# (observe_*.sh): the kerac path from $1, /usr/bin/python3 with numpy (else skip, 77), a
# temporary folder $T removed at exit, and fail().
K=${1:?usage: $0 PATH/TO/kerac}
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PY with numpy is needed to make the data"; exit 77; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
