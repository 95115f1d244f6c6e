"""torchvision's ImageFolder + DataLoader over a folder of JPEG photos: decode (PIL) and
resize to 224x224 (transforms.Resize, bilinear) then ToTensor, W worker processes, batch 64.
Prints one JSON line: images, workers, seconds (wall), cpu_seconds (this process and its
workers), images_per_second, images_per_cpu_second.
    /usr/bin/python3 torch_images.py DIR WORKERS"""
import json
import resource
import sys
import time

import torch
from torchvision import datasets, transforms


def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def main():
    folder, workers = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    tf = transforms.Compose([transforms.Resize((224, 224)), transforms.ToTensor()])
    ds = datasets.ImageFolder(folder, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=workers, shuffle=False)
    c0, t0 = cpu(), time.perf_counter()
    n = 0
    for x, _ in dl:
        n += x.shape[0]
    t, c = time.perf_counter() - t0, cpu() - c0
    print(json.dumps({"images": n, "workers": workers, "seconds": t, "cpu_seconds": c,
                      "images_per_second": n / t, "images_per_cpu_second": n / c}))


if __name__ == "__main__":
    main()
