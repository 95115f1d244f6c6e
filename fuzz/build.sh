#!/usr/bin/env bash
# fuzz/build.sh — builds the libFuzzer targets fuzz/fuzz_*.c into build-fuzz/ (or $FUZZ_BUILD):
# the library sources are compiled with clang, coverage instrumentation, AddressSanitizer and
# UndefinedBehaviorSanitizer (no CMake involved); only what changed is recompiled.
# Needs clang and its fuzzer runtime (Debian: clang libclang-rt-14-dev), and kerac's usual
# libraries (scripts/install-deps). OpenMP is replaced by fuzz/include/omp.h (one thread).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${FUZZ_BUILD:-build-fuzz}
CC=${FUZZ_CC:-clang}
JOBS=${JOBS:-2}
mkdir -p "$OUT/obj"

if ! command -v "$CC" >/dev/null; then
  echo "fuzz/build.sh: '$CC' not found; install clang (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' > "$OUT/probe.c"
if ! "$CC" -fsanitize=fuzzer,address,undefined "$OUT/probe.c" -o "$OUT/probe" 2>"$OUT/probe.log"; then
  cat "$OUT/probe.log" >&2
  echo "fuzz/build.sh: '$CC' cannot build libFuzzer targets; install its runtime (Debian: libclang-rt-14-dev)" >&2
  exit 1
fi

BLAS_INC=/usr/include/$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)/openblas-openmp
BLAS_LIB=/usr/lib/$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)/openblas-openmp
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1)
read -r -a PKG_CFLAGS <<< "$(pkg-config --cflags jansson libzip hdf5-serial libturbojpeg libpng libprotobuf-c)"
read -r -a PKG_LIBS <<< "$(pkg-config --libs jansson libzip hdf5-serial zlib libturbojpeg libpng libprotobuf-c) -lgif"
# the TensorBoard event messages' encoder, generated from src/io/tb_event.proto
mkdir -p "$OUT/gen"
if [ ! -f "$OUT/gen/tb_event.pb-c.c" ] || [ src/io/tb_event.proto -nt "$OUT/gen/tb_event.pb-c.c" ]; then
  protoc-c --c_out="$OUT/gen" -Isrc/io src/io/tb_event.proto
fi
CFLAGS=(-std=gnu11 -Ifuzz/include -Iinclude -Isrc -I"$OUT/gen" -I"$BLAS_INC" "${PKG_CFLAGS[@]}" -Wall -Wno-unknown-pragmas
        -Wno-unused-parameter -Wno-missing-field-initializers -Wno-unused-command-line-argument
        -Wno-unused-variable -Wno-unused-but-set-variable
        -DKC_FUZZ_BUILD=1)

# library objects: src/ without the CUDA module, rebuilt when the source or a header it includes changed
mapfile -t SRCS < <( (find src -name '*.c' -not -path 'src/backend/cuda/*'; echo "$OUT/gen/tb_event.pb-c.c") | sort)
stale() { # $1 object, $2 dependency file
  [ -f "$1" ] && [ -f "$2" ] || return 0
  local deps
  deps=$(sed -e 's/^[^:]*://' -e 's/\\$//' "$2")
  for d in $deps; do [ "$d" -nt "$1" ] && return 0; done
  return 1
}
todo=()
objs=()
for s in "${SRCS[@]}"; do
  o="$OUT/obj/$(echo "${s%.c}" | tr / _).o"
  objs+=("$o")
  if stale "$o" "${o%.o}.d"; then todo+=("$s:$o"); fi
done
if [ ${#todo[@]} -gt 0 ]; then
  echo "fuzz/build.sh: compiling ${#todo[@]} library sources with $CC"
  export CC OUT
  printf '%s\n' "${todo[@]}" | xargs -P "$JOBS" -I{} bash -c '
    s=${1%%:*}; o=${1#*:}; shift
    "$CC" "$@" -fsanitize=fuzzer-no-link -MMD -MF "${o%.o}.d" -c "$s" -o "$o"' _ {} "${CFLAGS[@]}" "${SAN[@]}"
  rm -f "$OUT/libkerac_fuzz.a"
fi
[ -f "$OUT/libkerac_fuzz.a" ] || ar rcs "$OUT/libkerac_fuzz.a" "${objs[@]}"

for t in fuzz/fuzz_*.c; do
  name=$(basename "${t%.c}")
  exe="$OUT/$name"
  if [ ! -f "$exe" ] || [ "$t" -nt "$exe" ] || [ fuzz/fuzz_common.h -nt "$exe" ] || [ "$OUT/libkerac_fuzz.a" -nt "$exe" ]; then
    echo "fuzz/build.sh: linking $exe"
    "$CC" "${CFLAGS[@]}" "${SAN[@]}" -fsanitize=fuzzer "$t" "$OUT/libkerac_fuzz.a" "${PKG_LIBS[@]}" \
      -L"$BLAS_LIB" -Wl,-rpath,"$BLAS_LIB" -lopenblas -lm -lpthread -o "$exe"
  fi
done
