#!/usr/bin/env bash
# check_exports.sh LIBKERAC_SO — the shared library exports the public API and nothing else:
# every defined dynamic symbol is a function declared KC_API in include/kerac.h or
# include/kerac_backend.h (none of the internal kc__ ones, no helper of a dependency), and
# every such declaration is exported (a public function left hidden would not link).
set -euo pipefail
lib=${1:?usage: check_exports.sh path/to/libkerac.so}
src=${KERAC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v nm >/dev/null || { echo "SKIP: nm (binutils) is not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

nm -D --defined-only "$lib" | awk 'NF >= 3 {print $3}' | sed 's/@.*//' | sort -u > "$tmp/exported"
# the declared names: "KC_API <type> [*]name(" at the start of a line
sed -n 's/^KC_API .*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' "$src/include/kerac.h" "$src/include/kerac_backend.h" |
  sort -u > "$tmp/declared"

status=0
echo "$(wc -l < "$tmp/exported") symbols exported by $lib, $(wc -l < "$tmp/declared") functions declared KC_API"
internal=$(grep '^kc__' "$tmp/exported" || true)
if [ -n "$internal" ]; then
  echo "FAIL: internal kc__ symbols are exported (build libkerac with hidden visibility):"
  echo "$internal" | head -20 | sed 's/^/  /'
  status=1
fi
other=$(comm -23 "$tmp/exported" "$tmp/declared" | grep -v '^kc__' || true)
if [ -n "$other" ]; then
  echo "FAIL: exported but not declared KC_API in include/ (hide them, or declare them public):"
  echo "$other" | head -20 | sed 's/^/  /'
  status=1
fi
missing=$(comm -13 "$tmp/exported" "$tmp/declared" || true)
if [ -n "$missing" ]; then
  echo "FAIL: declared KC_API but not exported (not defined, or defined without the declaration in scope):"
  echo "$missing" | head -20 | sed 's/^/  /'
  status=1
fi
[ "$status" = 0 ] && echo "exports: only the public kc_ API"
exit "$status"
