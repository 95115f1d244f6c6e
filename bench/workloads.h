/* workloads.h — the benchmarks' models and synthetic data, one definition for bench_train.c
 * (the CPU side-by-side, bench/README.md) and bench/gpu/bench_gpu.c (the GPU one). Public
 * API only; header-only so that each program stays one file plus this.
 *
 *   workload B: a VGG-style CNN on 32x32x3 images: [Conv 3x3 32 (same) + BN + ReLU] x2,
 *               MaxPool 2, [Conv 3x3 64 + BN + ReLU] x2, MaxPool 2, [Conv 3x3 128 + BN +
 *               ReLU] x2, GlobalAveragePooling, Dense 10 softmax; SGD lr 0.01 momentum 0.9
 *               (its PyTorch twin: make_model("B") in bench/gpu/torch_gpu.py)
 * Workload A is kc_default_cnn(28, 28, 1, 10). */
#ifndef KERAC_BENCH_WORKLOADS_H
#define KERAC_BENCH_WORKLOADS_H

#include <stdint.h>

#include "kerac.h"

/* 231.8 MFLOP per training image (forward + both backward passes of the convolutions,
 * 2 FLOP per multiply-add; the rest is under 1 %): 38.6 M multiply-adds forward */
#define BENCH_B_TRAIN_FLOP 231.8e6
/* workload A: 14.65 MFLOP per training image */
#define BENCH_A_TRAIN_FLOP 14.65e6

/* Workload B's model, not compiled; NULL when out of memory. */
static inline kc_model *bench_workload_b(void) {
    kc_model *m = NULL;
    if (kc_sequential("vgg_small", &m) != KC_STATUS_OK) return NULL;
    kc_add(m, KC_INPUT(.shape = {32, 32, 3}));
    const int filters[3] = {32, 64, 128};
    for (int b = 0; b < 3; b++) {
        for (int r = 0; r < 2; r++) {
            kc_add(m, KC_CONV2D(.filters = filters[b], .kernel_size = {3, 3}, .padding = "same"));
            kc_add(m, KC_BATCHNORM());
            kc_add(m, KC_ACTIVATION(.activation = "relu"));
        }
        if (b < 2) kc_add(m, KC_MAXPOOL2D(.pool_size = {2, 2}));
    }
    kc_add(m, KC_GLOBALAVGPOOL2D());
    kc_add(m, KC_DENSE(.units = 10, .activation = "softmax"));
    return m;
}

/* Synthetic data of the right shape from a fixed seed: uniform [0, 1) pixels x (n * per_image),
 * uniform labels 0..9 y (n). */
static inline void bench_synthetic(float *x, int32_t *y, int64_t n, int64_t per_image) {
    uint64_t r = 0x9e3779b97f4a7c15ull; /* xorshift */
    for (int64_t i = 0; i < n * per_image; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        x[i] = (float)(r >> 40) * (1.0f / 16777216.0f);
    }
    for (int64_t i = 0; i < n; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        y[i] = (int32_t)(r % 10);
    }
}

#endif /* KERAC_BENCH_WORKLOADS_H */
