#!/usr/bin/python3
"""PyTorch side of the CPU benchmarks (see bench/README.md).

Workload A (BENCH_WORKLOAD=A, the default): the default CNN (Keras's mnist_convnet) on
Fashion-MNIST, written in PyTorch: Conv2D 32 3x3 relu, MaxPool 2, Conv2D 64 3x3 relu,
MaxPool 2, Flatten, Dropout 0.5, Dense 10 (logits; CrossEntropyLoss = softmax + sparse
categorical crossentropy), Adam lr 1e-3 (eps 1e-7, Keras's default), batch 128, shuffled
every epoch.
Workload B (BENCH_WORKLOAD=B): the VGG-style CNN with BatchNorm, make_model("B") of
bench/gpu/torch_gpu.py (the one PyTorch definition), on synthetic 32x32x3 images (uniform
[0, 1) pixels, labels 0..9, fixed seed, (WARMUP + STEPS) x 64 of them, at least 5,000), SGD
lr 0.01 momentum 0.9, batch 64 (BENCH_BATCH); inference over the first 5,000.

Measures
  training:  images/s over STEPS steps after WARMUP warm-up steps (batch 128); with
             BENCH_SECONDS > 0, over as many steps as fill that many wall-clock seconds
  inference: images/s of model(x) at batch 1000 over the 10,000 test images,
             eval mode under torch.no_grad(); one warm-up pass, median of REPS passes;
             with BENCH_INFER_SECONDS > 0, over as many batches of 1000 as fill that many
             wall-clock seconds (the rate over all of them)
  spread:    train_step_rate and infer_batch_rate, p10 / median / p90 of the rate of each
             timed step and inference batch (images/s), as bench_train.c reports them;
             BENCH_STEP_LOG=FILE appends the timed steps' seconds ("pytorch-LAYOUT S1 S2 ...")
and prints one JSON line:
  {"impl":"pytorch","train_images_per_second":..,"infer_images_per_second":..,"threads":2,...}

Environment (read here, set by bench/run.sh): BENCH_THREADS (default 2), BENCH_WARMUP (5),
BENCH_STEPS (100), BENCH_SECONDS (0: STEPS steps), BENCH_INFER_SECONDS (0: REPS passes),
BENCH_INFER_REPS (5), BENCH_CLOCK (wall, or cpu: the process's CPU time,
time.process_time), BENCH_WORKLOAD (A), BENCH_BATCH (A: 128, B: 64), BENCH_TORCH_LAYOUT (nchw, PyTorch's default
contiguous layout, or channels_last: NHWC in memory, the layout kerac uses), FASHION_MNIST_DIR
(default /usr/share/datasets/fashion-mnist). The glibc malloc variables
(MALLOC_MMAP_THRESHOLD_, ...) must be set before the process starts: run.sh does that.
"""
import gzip
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn

from isa_probe import isa_fields  # bench/isa_probe.py, beside this file

INFER_BATCH = 1000
B_INFER = 5000


def read_idx(path):
    """Read an IDX file (raw or .gz) into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    offset = 4 + 4 * ndim
    arr = np.frombuffer(data, dtype=np.uint8, offset=offset)
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"{path}: expected {dims} bytes of data, found {arr.size}")
    return arr.reshape(dims)


def load(directory, split):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"))
    # NCHW float32 in [0, 1] (kerac scales uint8 images the same way)
    x = torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1).contiguous()
    y = torch.from_numpy(y.astype(np.int64))
    return x, y


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(0.5),
        nn.Linear(64 * 5 * 5, 10),
    )


def synthetic_b(n):
    gen = torch.Generator().manual_seed(1337)
    x = torch.rand(n, 3, 32, 32, generator=gen)
    y = torch.randint(0, 10, (n,), generator=gen)
    return x, y, x[:B_INFER]


def rate_stats(seconds, images):
    """p10, median and p90 of images / s over the samples (nearest rank), as bench_train.c"""
    r = sorted(images / s for s in seconds if s > 0)
    if not r:
        return {"p10": 0.0, "median": 0.0, "p90": 0.0, "n": 0}
    at = lambda q: r[min(len(r) - 1, max(0, int(q * len(r) + 0.5) - 1))]
    return {"p10": round(at(0.1), 1), "median": round(at(0.5), 1), "p90": round(at(0.9), 1), "n": len(r)}


def main():
    workload = os.environ.get("BENCH_WORKLOAD", "A").upper()
    if workload not in ("A", "B"):
        print(f"torch_cnn.py: BENCH_WORKLOAD={workload!r} is not A or B", file=sys.stderr)
        return 2
    batch = int(os.environ.get("BENCH_BATCH", "64" if workload == "B" else "128"))
    threads = int(os.environ.get("BENCH_THREADS", "2"))
    clock = time.process_time if os.environ.get("BENCH_CLOCK", "wall") == "cpu" else time.perf_counter
    warmup = int(os.environ.get("BENCH_WARMUP", "5"))
    steps = int(os.environ.get("BENCH_STEPS", "100"))
    reps = int(os.environ.get("BENCH_INFER_REPS", "5"))
    window = float(os.environ.get("BENCH_SECONDS", "0") or 0)
    infer_window = float(os.environ.get("BENCH_INFER_SECONDS", "0") or 0)
    layout = os.environ.get("BENCH_TORCH_LAYOUT", "nchw")
    if layout not in ("nchw", "channels_last"):
        print(f"torch_cnn.py: BENCH_TORCH_LAYOUT={layout!r} is not 'nchw' or 'channels_last'",
              file=sys.stderr)
        return 2
    directory = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
    if warmup < 0 or steps < 1 or reps < 1 or window < 0 or infer_window < 0:
        print("torch_cnn.py: BENCH_WARMUP >= 0, BENCH_STEPS >= 1, BENCH_INFER_REPS >= 1, BENCH_SECONDS >= 0 "
              "and BENCH_INFER_SECONDS >= 0 are needed", file=sys.stderr)
        return 2

    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    if workload == "B":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu"))
        from torch_gpu import make_model as make_gpu_model
        xtr, ytr, xte = synthetic_b(max((warmup + steps) * batch, B_INFER))
        model = make_gpu_model("B")
    else:
        xtr, ytr = load(directory, "train")
        xte, _ = load(directory, "test")
        model = make_model()
    if layout == "channels_last":
        fmt = torch.channels_last
        model = model.to(memory_format=fmt)
        xtr = xtr.contiguous(memory_format=fmt)
        xte = xte.contiguous(memory_format=fmt)
    if workload == "B":
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()

    # training: shuffled batches of 128, like kc_fit (a new permutation each epoch)
    n = xtr.shape[0]
    per_epoch = n // batch
    gen = torch.Generator().manual_seed(1337)
    perm = torch.randperm(n, generator=gen)
    model.train()
    t0 = None
    loss_sum = 0.0
    step_s = []  # each timed step's seconds
    step = 0
    while True:
        if step == warmup:
            t0 = last = clock()
            w0 = time.perf_counter()
        if step >= warmup and (time.perf_counter() - w0 >= window if window > 0 else step == warmup + steps):
            break
        k = step % per_epoch
        if k == 0 and step > 0:
            perm = torch.randperm(n, generator=gen)
        idx = perm[k * batch:(k + 1) * batch]
        xb = xtr.index_select(0, idx)
        yb = ytr.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        loss_sum += loss.item()  # kc_fit keeps the same running mean
        if step >= warmup:
            now = clock()
            step_s.append(now - last)
            last = now
        step += 1
    train_seconds = clock() - t0
    if os.environ.get("BENCH_STEP_LOG"):
        with open(os.environ["BENCH_STEP_LOG"], "a") as f:
            f.write(" ".join([f"pytorch-{layout}"] + [f"{s:.6f}" for s in step_s]) + "\n")
    steps = len(step_s)
    train_ips = steps * batch / train_seconds

    # inference: batch 1000 over the test set
    model.eval()
    times = []
    batch_s = []  # each timed inference batch's seconds (per 1000 images)
    n_test = xte.shape[0]
    with torch.no_grad():
        for rep in range(1 if infer_window > 0 else reps + 1):  # the first pass is a warm-up
            t = clock()
            for s in range(0, n_test, INFER_BATCH):
                out = model(xte[s:s + INFER_BATCH])
                probs = torch.softmax(out, dim=1)  # the Keras model ends in softmax
            dt = clock() - t
            if rep > 0:
                times.append(dt)
                batch_s.append(dt * INFER_BATCH / n_test)
        images, w0, s = 0, time.perf_counter(), 0
        while infer_window > 0 and (not batch_s or time.perf_counter() - w0 < infer_window):
            t = clock()
            xb = xte[s:s + INFER_BATCH]
            probs = torch.softmax(model(xb), dim=1)
            dt = clock() - t
            batch_s.append(dt * INFER_BATCH / xb.shape[0])
            images += xb.shape[0]
            times.append(dt)
            s = (s + INFER_BATCH) % n_test
    del probs
    infer_ips = images / sum(times) if infer_window > 0 else n_test / statistics.median(times)

    print(json.dumps({
        "impl": "pytorch",
        "clock": "cpu" if clock is time.process_time else "wall",
        "workload": workload,
        "train_images_per_second": round(train_ips, 1),
        "infer_images_per_second": round(infer_ips, 1),
        "threads": threads,
        "layout": layout,
        "warmup_steps": warmup,
        "steps": steps,
        "batch_size": batch,
        "infer_batch_size": INFER_BATCH,
        "infer_images": int(xte.shape[0]),
        "mean_loss": round(loss_sum / (warmup + steps), 4),
        "train_seconds": round(train_seconds, 3),
        "infer_seconds": round(sum(times), 3),
        "window_s": window,
        "infer_window_s": infer_window,
        "train_step_rate": rate_stats(step_s, batch),
        "infer_batch_rate": rate_stats(batch_s, INFER_BATCH),
        "version": torch.__version__,
        **isa_fields(),
    }))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
