#!/usr/bin/env bash
# bench/images/run.sh [BUILD] — decode + resize to 224x224 of 600 synthetic JPEG photos
# (make_photos.py, kept in build/bench-photos), kerac (bench_images: decoded once into
# memory, the same with DCT scaling, and streamed batch by batch without a cache) against
# torchvision's ImageFolder + DataLoader (Debian python3-torchvision, python3-pil), 1 and 2
# workers, alternating, ROUNDS rounds (default 3). One JSON line per run.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
PY=/usr/bin/python3
cmake --build "$B" --target bench_images >/dev/null
D=$B/bench-photos
[ -d "$D" ] || "$PY" bench/images/make_photos.py "$D" 600
for round in $(seq "${ROUNDS:-3}"); do
  for w in 1 2; do
    "$B/bench/bench_images" "$D" "$w"
    "$B/bench/bench_images" "$D" "$w" dct
    "$B/bench/bench_images" "$D" "$w" stream
    "$PY" bench/images/torch_images.py "$D" "$w"
  done
done
