#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds examples/train_fashion.c against
# it twice: with pkg-config and with CMake's find_package(kerac). Links and starts it.
set -euo pipefail
: "${KERAC_BINARY_DIR:?}" "${KERAC_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$KERAC_BINARY_DIR" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/kerac.h" && test -f "$tmp/prefix/include/kerac_backend.h"
test -f "$tmp/prefix/lib/libkerac.a" && test -e "$tmp/prefix/lib/libkerac.so"
test -f "$tmp/prefix/lib/pkgconfig/kerac.pc" && test -f "$tmp/prefix/lib/cmake/kerac/keracConfig.cmake"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cc -O2 "$KERAC_SOURCE_DIR/examples/train_fashion.c" $(pkg-config --cflags --libs kerac) -o "$tmp/ex_pc"
cmake -S "$KERAC_SOURCE_DIR/examples" -B "$tmp/ex_cmake" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/ex_cmake" >/dev/null
# both binaries resolve the installed library and start; with no dataset they fail cleanly
for exe in "$tmp/ex_pc" "$tmp/ex_cmake/train_fashion"; do
  lib=$(ldd "$exe" | awk '/libkerac\.so/ {print $3}')
  [ -n "$lib" ] && [ "$(readlink -f "$lib")" = "$(readlink -f "$tmp/prefix/lib/libkerac.so.0")" ] ||
    { echo "FAIL: $exe uses '$lib', not the installed libkerac"; exit 1; }
  out=$(cd "$tmp" && KERAC_FASHION_MNIST_DIR="$tmp/none" "$exe" 1 2>&1) && { echo "FAIL: expected a missing-dataset error"; exit 1; }
  echo "$out" | grep -q "fashion-mnist" || { echo "FAIL: unexpected output: $out"; exit 1; }
done
echo "install: pkg-config and CMake builds of the example link the installed library"
