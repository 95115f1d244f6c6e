#!/usr/bin/env python3
"""PyTorch side of the GPU benchmark (see bench/gpu/README.md): the same two workloads as
bench_gpu.c, in eager PyTorch on the same GPU.

  A: Keras mnist_convnet on 28x28x1: Conv 32 3x3 relu, MaxPool 2, Conv 64 3x3 relu,
     MaxPool 2, Flatten, Dropout 0.5, Linear 10 (logits; CrossEntropyLoss = softmax +
     sparse categorical crossentropy), Adam lr 1e-3 eps 1e-7, batch 128
  B: VGG-style on 32x32x3: [Conv 3x3 32 (padding 1) + BatchNorm + ReLU] x2, MaxPool 2,
     [... 64] x2, MaxPool 2, [... 128] x2, global average pooling, Linear 10; BatchNorm with
     Keras's defaults (eps 1e-3, momentum 0.99 = PyTorch momentum 0.01); SGD lr 0.01
     momentum 0.9, batch 256

fp32 with TF32 off (torch.backends.cuda.matmul.allow_tf32 = False,
torch.backends.cudnn.allow_tf32 = False), cudnn.benchmark left at its default (False), like
kerac's default heuristics. Synthetic data (uniform [0, 1) pixels, labels 0..9) lives on the
GPU (PyTorch's best case; kerac uploads every batch from host memory); each step takes a
shuffled batch with index_select. No host synchronisation inside the timed loop: the clock
is read after torch.cuda.synchronize().

  training:  images/s over STEPS steps after WARMUP steps
  inference: images/s of model(x) + softmax at batch INFER_BATCH over INFER_N images, eval
             mode, torch.no_grad(); one warm-up pass, median of REPS passes
  memory:    torch.cuda.max_memory_allocated() over the run, less the resident dataset
             (kerac keeps its data on the host); "peak_memory_raw_bytes" keeps it in

Prints one JSON line per (workload, layout). Environment: BENCH_WORKLOADS ("A B"),
BENCH_TORCH_LAYOUTS ("nchw channels_last"), BENCH_WARMUP (10), BENCH_STEPS (A: 200,
B: 100), BENCH_INFER_N (10000), BENCH_INFER_BATCH (1000), BENCH_INFER_REPS (5).
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn


def make_model(workload):
    if workload == "A":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Dropout(0.5), nn.Linear(64 * 5 * 5, 10))
    layers, cin = [], 3
    for b, f in enumerate((32, 64, 128)):
        for _ in range(2):
            layers += [nn.Conv2d(cin, f, 3, padding=1), nn.BatchNorm2d(f, eps=1e-3, momentum=0.01), nn.ReLU()]
            cin = f
        if b < 2:
            layers.append(nn.MaxPool2d(2))
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)]
    return nn.Sequential(*layers)


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v else default


def run(workload, layout, dev):
    batch = 256 if workload == "B" else 128
    h = w = 32 if workload == "B" else 28
    c = 3 if workload == "B" else 1
    warmup = env_int("BENCH_WARMUP", 10)
    steps = env_int("BENCH_STEPS", 100 if workload == "B" else 200)
    infer_n = env_int("BENCH_INFER_N", 10000)
    infer_batch = env_int("BENCH_INFER_BATCH", 1000)
    reps = env_int("BENCH_INFER_REPS", 5)
    n = (warmup + steps) * batch

    torch.manual_seed(1337)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(dev)
    gen = torch.Generator(device=dev).manual_seed(1337)
    x = torch.rand(n, c, h, w, device=dev, generator=gen)
    y = torch.randint(0, 10, (n,), device=dev, generator=gen)
    model = make_model(workload).to(dev)
    if layout == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    data_bytes = x.element_size() * x.nelement() + y.element_size() * y.nelement()
    if workload == "A":
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    model.train()
    perm = torch.randperm(n, device=dev, generator=gen)
    loss_sum = torch.zeros((), device=dev)
    t0 = None
    for step in range(warmup + steps):
        if step == warmup:
            torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
        idx = perm[step * batch:(step + 1) * batch]
        xb = x.index_select(0, idx)
        yb = y.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        loss_sum += loss.detach()
    torch.cuda.synchronize(dev)
    train_ips = steps * batch / (time.perf_counter() - t0)
    mean_loss = float(loss_sum) / (warmup + steps)

    model.eval()
    xi = x[:infer_n]
    times = []
    with torch.no_grad():
        for rep in range(reps + 1):
            torch.cuda.synchronize(dev)
            t = time.perf_counter()
            for s in range(0, infer_n, infer_batch):
                probs = torch.softmax(model(xi[s:s + infer_batch]), dim=1)
            torch.cuda.synchronize(dev)
            if rep > 0:
                times.append(time.perf_counter() - t)
    row = float(probs[0].sum())
    if abs(row - 1.0) > 0.01:
        raise RuntimeError(f"softmax row sums to {row}")
    infer_ips = infer_n / statistics.median(times)
    peak_raw = torch.cuda.max_memory_allocated(dev)
    return {
        "impl": "pytorch", "workload": workload, "layout": layout,
        "device": torch.cuda.get_device_name(dev),
        "train_images_per_second": round(train_ips, 1),
        "infer_images_per_second": round(infer_ips, 1),
        "peak_memory_bytes": int(peak_raw - data_bytes), "peak_memory_raw_bytes": int(peak_raw),
        "batch_size": batch, "warmup_steps": warmup, "steps": steps,
        "infer_images": infer_n, "infer_batch_size": infer_batch,
        "mean_loss": round(mean_loss, 4), "tf32": False,
        "version": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }


def main():
    if not torch.cuda.is_available():
        print("torch_gpu.py: torch.cuda.is_available() is False: no GPU for PyTorch", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda:0")
    workloads = os.environ.get("BENCH_WORKLOADS", "A B").split()
    layouts = os.environ.get("BENCH_TORCH_LAYOUTS", "nchw channels_last").split()
    for wl in workloads:
        if wl not in ("A", "B"):
            print(f"torch_gpu.py: workload {wl!r} is not A or B", file=sys.stderr)
            return 2
        for layout in layouts:
            if layout not in ("nchw", "channels_last"):
                print(f"torch_gpu.py: layout {layout!r} is not nchw or channels_last", file=sys.stderr)
                return 2
            print(json.dumps(run(wl, layout, dev)))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
