#!/usr/bin/python3
"""PyTorch side of the fine-tuning benchmark (bench/finetune/run.sh).

    torch_finetune.py mobilenetv2|resnet50

torchvision's mobilenet_v2(num_classes=10) or resnet50(num_classes=10) (random weights),
Adam (lr 1e-4, eps 1e-7), CrossEntropyLoss on the logits (kerac: sparse categorical
crossentropy on the softmax output: the same function), train mode, random images in
[-1, 1] of BENCH_SIZE x BENCH_SIZE (96) with random labels, batch BENCH_BATCH (32),
BENCH_WARMUP (3) + BENCH_STEPS (10) steps (BENCH_SECONDS > 0: timed steps until that many
wall-clock seconds have passed, as bench_finetune does); prints one JSON line:
  {"impl": "pytorch", "model": ..., "layout": ..., "train_images_per_second": ...,
   "cpu_seconds_per_step": ...}
BENCH_TORCH_LAYOUT: nchw (default) or channels_last (model and data in NHWC memory order).
BENCH_THREADS (2): torch.set_num_threads. The malloc variables are set by run.sh.
"""
import json
import os
import sys
import time

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from isa_probe import isa_fields  # noqa: E402  bench/isa_probe.py


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("mobilenetv2", "resnet50"):
        sys.exit(__doc__)
    name = sys.argv[1]
    env = os.environ.get
    threads, warmup, steps = int(env("BENCH_THREADS", "2")), int(env("BENCH_WARMUP", "3")), int(env("BENCH_STEPS", "10"))
    batch, size, layout = int(env("BENCH_BATCH", "32")), int(env("BENCH_SIZE", "96")), env("BENCH_TORCH_LAYOUT", "nchw")
    if layout not in ("nchw", "channels_last"):
        sys.exit(f"torch_finetune.py: BENCH_TORCH_LAYOUT must be nchw or channels_last, not {layout!r}")
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    ctor = torchvision.models.mobilenet_v2 if name == "mobilenetv2" else torchvision.models.resnet50
    model = ctor(num_classes=10)
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    model = model.to(memory_format=fmt).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, eps=1e-7)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = batch * (warmup + steps)
    x = (torch.rand(n, 3, size, size) * 2 - 1).contiguous(memory_format=fmt)
    y = torch.arange(n) * 7 % 10
    t0 = c0 = None
    total = 0.0
    window = float(env("BENCH_SECONDS", "0") or 0)
    i = 0
    while window > 0 or i < warmup + steps:
        if i == warmup:
            t0, c0 = time.perf_counter(), time.process_time()
        if window > 0 and i > warmup and time.perf_counter() - t0 >= window:
            break
        k = i % (warmup + steps)  # the data's batches in turn
        xb, yb = x[k * batch:(k + 1) * batch], y[k * batch:(k + 1) * batch]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        total += float(loss)
        i += 1
    steps = i - warmup
    if t0 is None:
        t0, c0 = time.perf_counter(), time.process_time()
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"impl": "pytorch", "model": name, "layout": layout,
                      "train_images_per_second": round(steps * batch / dt, 2),
                      "cpu_seconds_per_step": round(dc / steps, 4), "threads": torch.get_num_threads(),
                      "batch_size": batch, "warmup_steps": warmup, "steps": steps,
                      "mean_loss": round(total / (warmup + steps), 4), "version": torch.__version__, **isa_fields()}))


if __name__ == "__main__":
    main()
