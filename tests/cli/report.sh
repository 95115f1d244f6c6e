#!/bin/bash
# report.sh — `kerac train --report DIR/report.html` and `kerac report DIR`, checked in
# headless Chromium (Debian's chromium; skipped, 77, without it or without numpy):
#  - the page is self-contained: no script, no external src/href, no web font;
#  - it loads without console messages (and a page with a script error is caught by the
#    same check, so the check can fail);
#  - its DOM, as Chromium built it, holds the loss chart with one path per curve and one
#    point per epoch, and the per-step loss with one point per step, each of real length;
#  - the screenshot shows the curves: the training (blue) and validation (orange) colours
#    cover enough pixels inside the first chart's plot area;
#  - `kerac report DIR` rebuilds the same page from DIR/run.json; bad folders exit 2.
set -u
. "$(dirname "$0")/lib/observe_common.bash"
CHROME=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROME" ] || { echo "SKIP: chromium is needed (Debian: apt-get install chromium)"; exit 77; }

"$PY" - "$T" <<'PY' || fail "could not make the data"
import sys, os
import numpy as np
rng = np.random.default_rng(2)
y = rng.integers(0, 4, 240)
x = rng.integers(0, 60, (240, 12, 12)).astype(np.uint8)
for i, k in enumerate(y):
    r, c = divmod(int(k), 2)
    x[i, r * 6:(r + 1) * 6, c * 6:(c + 1) * 6] += 180
np.save(os.path.join(sys.argv[1], "x.npy"), x)
np.save(os.path.join(sys.argv[1], "y.npy"), y.astype(np.int64))
PY
mkdir -p "$T/run"
# 192 training examples at batch 32: 6 steps an epoch, 18 in all
timeout 300 "$K" train --data "npy:$T/x.npy,$T/y.npy" --epochs 3 --batch-size 32 --validation-split 0.2 \
    --report "$T/run/report.html" >"$T/out" 2>"$T/err" || fail "kerac train --report exited $?: $(cat "$T/err")"
grep -q "wrote the run report to '$T/run/report.html'" "$T/out" || fail "no report line: $(cat "$T/out")"
[ -s "$T/run/run.json" ] || fail "no run.json next to the report"
H="$T/run/report.html"
if grep -qiE '<script|<link|@font-face|<img|<iframe| src=| href=' "$H"; then fail "the report is not self-contained"; fi

chrome() { # chrome OUT_PREFIX ARGS... : stderr to OUT_PREFIX.log
    local p=$1; shift
    timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
        --user-data-dir="$T/profile" --enable-logging=stderr --v=0 "$@" 2>"$p.log"
}
console_errors() { grep -E 'CONSOLE|Uncaught|Failed to load' "$1" || true; }

# the console check catches a page with an error (so that it can fail below)
printf '<!DOCTYPE html><html><body><script>no_such_function();</script></body></html>' >"$T/bad.html"
chrome "$T/bad" --dump-dom "file://$T/bad.html" >/dev/null
[ -n "$(console_errors "$T/bad.log")" ] || fail "the console check does not see a script error: $(tail -3 "$T/bad.log")"

chrome "$T/dom" --dump-dom "file://$H" >"$T/dom.html" || fail "chromium could not load the report: $(tail -5 "$T/dom.log")"
errs=$(console_errors "$T/dom.log")
[ -z "$errs" ] || fail "console messages while loading the report: $errs"
chrome "$T/shot" --window-size=900,900 --screenshot="$T/shot.png" "file://$H" >/dev/null
[ -s "$T/shot.png" ] || fail "no screenshot: $(tail -5 "$T/shot.log")"

"$PY" - "$T" <<'PY' || fail "the report does not show the run"
import sys, re, zlib, struct, json, math
t = sys.argv[1]
dom = open(t + "/dom.html").read()
run = json.load(open(t + "/run/run.json"))
assert len(run["history"]) == 3 and len(run["steps"]) == 18, (len(run["history"]), len(run["steps"]))

def paths(svg_id):
    m = re.search(r'<svg id="%s".*?</svg>' % svg_id, dom, re.S)
    assert m, "no chart " + svg_id
    out = []
    for p in re.finditer(r'<path class="series" data-name="([^"]*)"[^>]* d="([^"]*)" data-points="(\d+)"', m.group(0)):
        pts = [tuple(map(float, xy.split())) for xy in re.split(r"\s*[ML]\s*", p.group(2)) if xy.strip()]
        assert len(pts) == int(p.group(3)), (svg_id, len(pts), p.group(3))
        length = sum(math.dist(a, b) for a, b in zip(pts, pts[1:]))
        out.append((p.group(1), len(pts), length))
    return out

loss = paths("epoch-loss")
assert [(n, k) for n, k, _ in loss] == [("training loss", 3), ("validation loss", 3)], loss
assert all(length > 100 for _, _, length in loss), loss  # a real curve across the plot
steps = paths("step-loss")
assert steps[0][1] == 18 and steps[0][2] > 200, steps
assert paths("throughput")[0][1] >= 17
assert "conv2d_1 (Conv2D)" in dom and "Memory plan" in dom and "doctor" in dom

# the screenshot: a PNG decoder for Chromium's 8-bit RGBA / RGB output
data = open(t + "/shot.png", "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
        bpp = 4 if ctype == 6 else 3
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw, stride = zlib.decompress(idat), w * bpp
rows, prev = [], bytearray(stride)
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    prev = line
def near(px, rgb): return all(abs(px[k] - rgb[k]) <= 40 for k in range(3))
# the first chart's plot area: find it from the DOM's order (first figure), i.e. the top
# band of charts; count the curve colours in the upper-left chart's box
svg_top = None
for y in range(h):  # the first row holding the loss chart's blue (training) colour
    line = rows[y]
    if any(near(line[x * bpp:x * bpp + 3], (31, 119, 180)) for x in range(0, min(w, 700))):
        svg_top = y
        break
assert svg_top is not None, "no blue curve pixel in the screenshot"
blue = orange = 0
for y in range(svg_top, min(h, svg_top + 260)):
    line = rows[y]
    for x in range(0, min(w, 700)):
        px = line[x * bpp:x * bpp + 3]
        blue += near(px, (31, 119, 180))
        orange += near(px, (255, 127, 14))
assert blue > 150 and orange > 150, ("too few curve pixels", blue, orange)
print("report: %d + %d curve pixels in the loss chart, %d steps drawn" % (blue, orange, steps[0][1]))
PY

# kerac report rebuilds the same page from run.json
cp "$H" "$T/first.html"
rm "$H"
"$K" report "$T/run" >"$T/out" 2>"$T/err" || fail "kerac report exited $?: $(cat "$T/err")"
cmp -s "$H" "$T/first.html" || fail "kerac report drew a different page than kerac train --report"
"$K" report "$T/run" -o "$T/other.html" >/dev/null 2>&1 && cmp -s "$T/other.html" "$T/first.html" ||
    fail "kerac report -o FILE"
"$K" report "$T/nonexistent" >/dev/null 2>&1; [ $? = 2 ] || fail "a missing folder exits 2"
mkdir "$T/empty"
"$K" report "$T/empty" >/dev/null 2>"$T/err"; [ $? = 2 ] || fail "a folder without run.json exits 2"
grep -q "run.json" "$T/err" || fail "the message should name run.json: $(cat "$T/err")"
"$K" report >/dev/null 2>&1; [ $? = 1 ] || fail "no RUN_DIR is a usage error"
echo "PASS"
