#!/usr/bin/env python3
"""fuzz/make_corpus.py — writes the committed seed corpora fuzz/corpus/<target>/: a few
small valid inputs per target (the fuzzers mutate from there). Standard library only, plus
the kerac command for the .keras seeds (KERAC=path, default build-fixtures/kerac or
build/kerac). Run by hand when the input formats change:

    python3 fuzz/make_corpus.py

Two-file inputs (idx, npy) and the .keras entries form are parts joined by b"KCSPLIT!"
(fuzz/fuzz_common.h)."""
import gzip
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "corpus")
SEP = b"KCSPLIT!"


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- IDX

def idx(dims, payload, dtype=0x08):
    return struct.pack(">BBBB", 0, 0, dtype, len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + bytes(payload)


def make_idx():
    images = idx([3, 4, 4], [(i * 37) % 256 for i in range(48)])
    labels = idx([3], [0, 2, 1])
    write("idx", "raw", images + SEP + labels)
    write("idx", "gzip", gzip.compress(images, mtime=0) + SEP + gzip.compress(labels, mtime=0))
    write("idx", "gzip_images", gzip.compress(idx([2, 3, 2], range(12)), mtime=0) + SEP + idx([2], [9, 0]))
    write("idx", "one_image", idx([1, 1, 1], [255]) + SEP + idx([1], [0]))


# ---------------------------------------------------------------- .npy

def npy(descr, shape, payload, version=1):
    shp = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shp)
    pre = 10 if version == 1 else 12
    pad = 64 - (pre + len(header) + 1) % 64
    header = (header + " " * pad + "\n").encode("latin1")
    if version == 1:
        head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header))
    else:
        head = b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(header))
    return head + header + payload


def make_npy():
    write("npy", "u8_images",
          npy("|u1", (3, 4, 4), bytes((i * 29) % 256 for i in range(48))) + SEP + npy("<i8", (3,), struct.pack("<3q", 1, 0, 2)))
    write("npy", "f32_vectors",
          npy("<f4", (2, 5), struct.pack("<10f", *[0.1 * i for i in range(10)])) + SEP + npy("|u1", (2, 1), bytes([1, 0])))
    write("npy", "v2_rgb",
          npy("|u1", (2, 3, 3, 2), bytes(range(36)), version=2) + SEP + npy("<i4", (2,), struct.pack("<2i", 3, 1), version=2))
    write("npy", "big_endian",
          npy(">f4", (2, 2, 2), struct.pack(">8f", *[0.5] * 8)) + SEP + npy(">i2", (2,), struct.pack(">2h", 0, 1)))


# ---------------------------------------------------------------- images

def make_image():
    # the committed Keras fixture's mixed folder: one file of each format, each behind a
    # selector byte (channels, interpolation, crop / pad, DCT scaling)
    src = os.path.join(REPO, "tests", "fixtures", "images", "mixed")
    sel = 0
    for root, _, files in sorted(os.walk(src)):
        for f in sorted(files):
            if f.endswith(".txt"):
                continue
            with open(os.path.join(root, f), "rb") as fh:
                write("image", f.replace(".", "_"), bytes([sel]) + fh.read())
            sel = (sel * 37 + 53) % 256


# ---------------------------------------------------------------- JSON configs

def make_json():
    src = os.path.join(REPO, "tests", "fixtures", "json")
    for f in sorted(os.listdir(src)):
        shutil.copy(os.path.join(src, f), os.path.join(CORPUS, "json", f))
    keras_dir = os.path.join(REPO, "tests", "fixtures", "keras")
    for stem in ("bn_strides", "resnet", "dense"):
        path = os.path.join(keras_dir, stem + ".keras")
        if os.path.exists(path):
            with zipfile.ZipFile(path) as z:
                write("json", f"keras315_{stem}.json", z.read("config.json"))


# ---------------------------------------------------------------- .keras

TINY = {
    "dense": {"module": "keras", "class_name": "Sequential", "config": {"name": "tiny", "layers": [
        {"class_name": "InputLayer", "config": {"batch_shape": [None, 4], "name": "in"}},
        {"class_name": "Dense", "config": {"name": "d1", "units": 3, "activation": "relu"}},
        {"class_name": "BatchNormalization", "config": {"name": "bn"}},
        {"class_name": "Dense", "config": {"name": "d2", "units": 2, "activation": "softmax"}}]}},
    "residual": {"class_name": "Functional", "config": {"name": "res", "layers": [
        {"class_name": "InputLayer", "name": "x", "config": {"batch_shape": [None, 3, 3, 1], "name": "x"}, "inbound_nodes": []},
        {"class_name": "Conv2D", "name": "c", "config": {"name": "c", "filters": 1, "kernel_size": 1},
         "inbound_nodes": [[["x", 0, 0, {}]]]},
        {"class_name": "Add", "name": "a", "config": {"name": "a"}, "inbound_nodes": [[["x", 0, 0, {}], ["c", 0, 0, {}]]]},
        {"class_name": "Flatten", "name": "f", "config": {"name": "f"}, "inbound_nodes": [[["a", 0, 0, {}]]]}],
        "input_layers": [["x", 0, 0]], "output_layers": [["f", 0, 0]]}},
}


def kerac_path():
    for p in (os.environ.get("KERAC"), os.path.join(REPO, "build-fixtures", "kerac"), os.path.join(REPO, "build", "kerac")):
        if p and os.path.exists(p):
            return p
    sys.exit("make_corpus.py: no kerac command; build it (cmake --build build) or set KERAC=")


def make_keras():
    kerac = kerac_path()
    tmp = tempfile.mkdtemp()
    try:
        for name, cfg in TINY.items():
            js = os.path.join(tmp, name + ".json")
            with open(js, "w") as f:
                json.dump(cfg, f)
            out = os.path.join(tmp, name + ".keras")
            subprocess.run([kerac, "convert", js, out, "--quiet"], check=True, stderr=subprocess.DEVNULL)
            h5 = os.path.join(tmp, name + ".h5")
            subprocess.run([kerac, "convert", js, h5, "--quiet"], check=True, stderr=subprocess.DEVNULL)
            write("keras", f"{name}.h5", open(h5, "rb").read())
            raw = open(out, "rb").read()
            write("keras", f"{name}.keras", raw)
            with zipfile.ZipFile(io.BytesIO(raw)) as z:
                parts = [z.read("config.json"), z.read("model.weights.h5"), z.read("metadata.json")]
            write("keras", f"{name}.entries", SEP.join(parts))
    finally:
        shutil.rmtree(tmp)


KERAS2_TINY = r"""
import os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"; os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tf_keras as k
k.utils.set_random_seed(1)
m = k.Sequential([k.Input(shape=(4,)), k.layers.Dense(3, activation="relu"), k.layers.BatchNormalization(),
                  k.layers.Dense(2, activation="softmax")], name="tiny_k2")
m.save(sys.argv[1], save_format="h5", include_optimizer=False)
"""


def make_keras2():
    """A tiny file written by tf-keras itself, when KERAS2_PYTHON (default /tmp/tfvenv/bin/python) exists."""
    py = os.environ.get("KERAS2_PYTHON", "/tmp/tfvenv/bin/python")
    if not os.path.exists(py):
        print(f"make_corpus.py: no {py}: skipping the tf-keras seed")
        return
    tmp = tempfile.mkdtemp()
    try:
        out = os.path.join(tmp, "tiny_k2.h5")
        subprocess.run([py, "-c", KERAS2_TINY, out], check=True, stderr=subprocess.DEVNULL)
        write("keras", "tf_keras_tiny.h5", open(out, "rb").read())
    finally:
        shutil.rmtree(tmp)


def main():
    for t in ("json", "keras", "idx", "npy", "image"):
        shutil.rmtree(os.path.join(CORPUS, t), ignore_errors=True)
        os.makedirs(os.path.join(CORPUS, t))
    make_idx()
    make_npy()
    make_image()
    make_json()
    make_keras()
    make_keras2()
    total = 0
    for t in sorted(os.listdir(CORPUS)):
        files = sorted(os.listdir(os.path.join(CORPUS, t)))
        size = sum(os.path.getsize(os.path.join(CORPUS, t, f)) for f in files)
        total += size
        print(f"fuzz/corpus/{t}: {len(files)} files, {size:,} bytes")
    print(f"total {total:,} bytes")


if __name__ == "__main__":
    main()
