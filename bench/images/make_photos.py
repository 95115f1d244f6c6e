"""Writes N synthetic JPEG "photos" (default 600, 500x375 and 375x500, quality 90, 4:2:0 as
cameras save them) in DIR/<class>/: smooth colour fields with edges and fine noise, so that
the entropy decoder has about the work of a real photo (~60-90 KB each).
    /usr/bin/python3 make_photos.py DIR [N]"""
import os
import sys

import numpy as np
from PIL import Image


def photo(rng, h, w):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((h, w, 3), np.float32)
    for c in range(3):
        fx, fy, ph = rng.uniform(0.002, 0.03, 2).tolist() + [rng.uniform(0, 6.28)]
        img[..., c] = 128 + 90 * np.sin(x * fx + y * fy + ph)
    for _ in range(6):  # a few flat shapes with hard edges
        cy, cx, r = rng.integers(0, h), rng.integers(0, w), rng.integers(20, 120)
        mask = (y - cy) ** 2 + (x - cx) ** 2 < r * r
        img[mask] = rng.integers(0, 255, 3)
    img += rng.normal(0, 12, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def main():
    out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 600
    rng = np.random.default_rng(0)
    for i in range(n):
        cls = os.path.join(out, "class_%d" % (i % 4))
        os.makedirs(cls, exist_ok=True)
        h, w = (375, 500) if i % 3 else (500, 375)
        Image.fromarray(photo(rng, h, w)).save(os.path.join(cls, "%05d.jpg" % i), quality=90)


if __name__ == "__main__":
    main()
