#!/bin/bash
# images.sh — folders of images through the `kerac` command (--data images:DIR): training
# from the committed mixed folder (tests/fixtures/images/mixed: JPEG, PNG, BMP, GIF) with
# Keras's validation split, the class names and image options saved in the .keras file's
# metadata (Keras's keys untouched), `kerac predict` on a photo and on a folder (top-k by
# name, --json), `kerac evaluate` reading the folder as the model was trained, the memory
# plan's host line naming the image cache, the same training for --loader-threads 1 and 4
# with each cache (memory, file, none), and each bad input with its message and exit code.
# Needs /usr/bin/python3 (standard library only) to look into the zip (else skipped, 77).
set -u
K=${1:?usage: images.sh PATH/TO/kerac}
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: $PY is needed"; exit 77; }
SRC=${KERAC_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
F=$SRC/tests/fixtures/images/mixed
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
. "$SRC/tests/cli/lib/run.sh"
TRAIN=(train --data "images:$F" --image-size 16,16 --epochs 2 --batch-size 4 --seed 123 --threads 1)

# train with Keras's split (0.25 of 12 files: 3 for validation) and save
run "${TRAIN[@]}" --validation-split 0.25 --save "$T/m.keras"
grep -q "9 examples, validation split 0.25" "$T/out" || fail "train did not split 9 + 3: $(cat "$T/out")"
grep -q "val_accuracy" "$T/out" || fail "no validation metrics: $(cat "$T/out")"
"$PY" - "$T/m.keras" <<'PY' || fail "metadata.json does not hold the image options"
import json, sys, zipfile
meta = json.loads(zipfile.ZipFile(sys.argv[1]).read("metadata.json"))
assert meta["keras_version"] and meta["date_saved"], meta
img = meta["kerac_images"]
assert img["class_names"] == ["ants", "bees", "cats"], img
assert img["image_size"] == [16, 16] and img["color_mode"] == "rgb" and img["interpolation"] == "bilinear", img
PY

# predict: one photo (three classes by name, probabilities summing to about 1), a folder, JSON
run predict "$T/m.keras" --input "$F/ants/a1.jpg"
grep -Eq "a1.jpg: (ants|bees|cats) [01]\.[0-9]{4}, (ants|bees|cats) [01]\.[0-9]{4}, (ants|bees|cats) [01]\.[0-9]{4}$" "$T/out" \
    || fail "predict on a photo: $(cat "$T/out")"
run predict "$T/m.keras" --input "$F/bees" --top-k 2 --json
[ "$(wc -l < "$T/out")" -eq 4 ] || fail "predict on a folder of 4 images: $(cat "$T/out")"
"$PY" - "$T/out" <<'PY' || fail "predict --json is not one object per image"
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    assert len(o["top"]) == 2 and o["top"][0]["probability"] >= o["top"][1]["probability"], o
    assert {t["class"] for t in o["top"]} <= {"ants", "bees", "cats"}, o
PY
run evaluate "$T/m.keras" --data "images:$F"
grep -q "(12 examples" "$T/out" || fail "evaluate on the folder: $(cat "$T/out")"

# summary: the memory plan's host lines say what the image cache holds (12 x 64 x 64 x 3 floats)
run summary --data "images:$F" --image-size 64,64 --batch-size 4
grep -Eq "host: decoded images cached in memory +576.00 KiB" "$T/out" || fail "summary --data images: $(cat "$T/out")"
[ "$(grep -c "host: decoded images cached in memory" "$T/out")" -eq 2 ] || fail "plan and data lines: $(cat "$T/out")"
run summary --data "images:$F" --image-size 64,64 --cache "$T/c.cache"
grep -Eq "host: decoded images cached in a file \(mapped\) +576.00 KiB  $T/c.cache" "$T/out" || fail "--cache FILE: $(cat "$T/out")"
grep -Eq "memory-mapped \(read on demand\) +576.00 KiB" "$T/out" || fail "--cache FILE mapped: $(cat "$T/out")"
run summary --data "images:$F" --image-size 64,64 --no-cache
grep -Eq "host: no image cache \(decoded per batch\) +0 B" "$T/out" || fail "--no-cache: $(cat "$T/out")"
expect 1 "looks like a model file" train --data "images:$F" --cache "$T/m.keras"

# the same training, to the printed digit, with 1 and 4 decode threads and each cache
epochs() { grep '"epoch"' "$T/out" | sed 's/"seconds".*//; s/"images_per_second": [0-9.e+-]*,//' > "$T/$1"; }
run "${TRAIN[@]}" --loader-threads 1 --json
epochs one
[ -s "$T/one" ] || fail "no epochs printed: $(cat "$T/out")"
for c in "--loader-threads 4" "--loader-threads 4 --no-cache" "--loader-threads 1 --no-cache" \
         "--cache $T/t.cache --loader-threads 4" "--cache=$T/t.cache --loader-threads 1" "--cache"; do
    # shellcheck disable=SC2086
    run "${TRAIN[@]}" $c --json
    epochs other
    cmp -s "$T/one" "$T/other" || fail "$c differs from --loader-threads 1: $(cat "$T/one") / $(cat "$T/other")"
done

# bad input
mkdir -p "$T/bad/x" "$T/bad/y"
cp "$F/ants/a1.jpg" "$T/bad/x/good.jpg"
cp "$F/ants/A3.PNG" "$T/bad/y/good.png"
head -c 1400 "$F/ants/a1.jpg" > "$T/bad/y/cut.jpg"
expect 2 "bad/y/cut.jpg': corrupt JPEG: Premature end of JPEG file; nothing was trained on" \
    train --data "images:$T/bad" --image-size 12,12 --epochs 1
expect 0 "1 bad image skipped" train --data "images:$T/bad" --image-size 12,12 --epochs 1 --on-bad-image skip \
    --validation-split 0
grep -q "skipping a bad image: .*cut.jpg" "$T/err" || fail "no warning naming the skipped file: $(cat "$T/err")"
rm "$T/bad/y/cut.jpg"
expect 2 "is 52 x 40 = 2080 pixels, over the limit of 1000" train --data "images:$T/bad" --max-pixels 1000 --epochs 1
mkdir -p "$T/empty"
expect 2 "has no subfolders" train --data "images:$T/empty"
mkdir -p "$T/empty/a"
expect 2 "no images in '.*empty'" train --data "images:$T/empty"
mkdir -p "$T/bad/z"
expect 0 "class folder '.*bad/z' has no images" train --data "images:$T/bad" --image-size 12,12 --epochs 1 \
    --validation-split 0
expect 2 "takes images of 3 channels but 'images:.*' was read as 1 \(--color-mode grayscale\); use --color-mode rgb" \
    train "$T/m.keras" --data "images:$F" --image-size 16,16 --color-mode grayscale --epochs 1
ln -s .. "$T/bad/x/up"
expect 2 "symlink loop" train --data "images:$T/bad" --follow-links --epochs 1
expect 1 "--color-mode 'grey' is not one of grayscale, rgb, rgba" train --data "images:$F" --color-mode grey
expect 1 "cannot both be given" train --data "images:$F" --crop-to-aspect-ratio --pad-to-aspect-ratio
expect 2 "label mode 'binary' needs exactly 2 classes" train --data "images:$F" --label-mode binary
echo "images.sh: all passed"
