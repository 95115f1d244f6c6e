#!/usr/bin/env python3
"""make_models.py — write the fine-tuning benchmark's models with Keras 3 (random weights).

    KERAS_BACKEND=jax /tmp/kvenv/bin/python bench/finetune/make_models.py OUTDIR [SIZE]

keras.applications.MobileNetV2 (alpha 1.0) and ResNet50 at SIZE x SIZE x 3 (default 96),
include_top=True with 10 classes (GlobalAveragePooling2D + Dense softmax), as torchvision's
mobilenet_v2(num_classes=10) and resnet50(num_classes=10) (AdaptiveAvgPool + Linear). Writes
OUTDIR/mobilenetv2.keras and OUTDIR/resnet50.keras, and prints their parameter counts.
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out, size = sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 96
    import keras
    os.makedirs(out, exist_ok=True)
    keras.utils.set_random_seed(1)
    for name, ctor in (("mobilenetv2", keras.applications.MobileNetV2), ("resnet50", keras.applications.ResNet50)):
        m = ctor(input_shape=(size, size, 3), include_top=True, weights=None, classes=10)
        m.save(os.path.join(out, f"{name}.keras"))
        print(f"{name}: {m.count_params()} parameters, {len(m.layers)} layers")


if __name__ == "__main__":
    main()
