/* aug_taps.h — where one output pixel of a kc_sample2d_desc resampling reads its input: the
 * taps (input pixel, weight) of output pixel (oy, ox). Shared by the CPU kernels
 * (cpu/cpu_augment.c) and the CUDA ones (cuda/kernels_aug.cu), so both backends take the
 * same taps; plain C that nvcc also compiles for the device. */
#ifndef KC_AUG_TAPS_H
#define KC_AUG_TAPS_H

#include <math.h>
#include <stdint.h>

#include "kerac_backend.h"

#ifdef __CUDACC__
#define KC_AUG_FN static __host__ __device__ inline
#else
#define KC_AUG_FN static inline
#endif

/* A canvas index after the fill mode: inside [0, size), or -1 where the canvas's fill
 * value is read (constant mode outside the canvas). Reflect is scipy's (and Keras's jax
 * backend's) half-sample symmetric extension. */
KC_AUG_FN int kc__aug_fix(int i, int size, int fill) {
    if (i >= 0 && i < size) return i;
    if (fill == KC_FILL_NEAREST) return i < 0 ? 0 : size - 1;
    if (fill == KC_FILL_WRAP) {
        int r = i % size;
        return r < 0 ? r + size : r;
    }
    if (fill == KC_FILL_REFLECT) {
        int s = 2 * size, j = 2 * i + 1 + s, r = j % (2 * s);
        if (r < 0) r += 2 * s;
        r -= s;
        if (r < 0) r = -r;
        return (r - 1) / 2;
    }
    return -1;
}

/* The input pixel (r * w + s) of canvas pixel (cy, cx), or -1 for the fill value. */
KC_AUG_FN int64_t kc__aug_pixel(const kc_sample2d_desc *d, int cy, int cx) {
    cy = kc__aug_fix(cy, d->ch, d->fill);
    cx = kc__aug_fix(cx, d->cw, d->fill);
    if (cy < 0 || cx < 0) return -1;
    int r = cy - d->top, s = cx - d->left;
    if (r < 0 || r >= d->h || s < 0 || s >= d->w) return -1;
    return (int64_t)r * d->w + s;
}

/* A coordinate kept where int arithmetic is safe (NaN goes to the low end). */
KC_AUG_FN float kc__aug_clampf(float v) { return v > -1.0e7f ? (v < 1.0e7f ? v : 1.0e7f) : -1.0e7f; }

/* The taps of output pixel (oy, ox) under transform m (6 numbers): their input pixels
 * (-1: the fill value) and weights; returns how many (1 or 4). */
KC_AUG_FN int kc__aug_taps(const kc_sample2d_desc *d, const float *m, int oy, int ox, int64_t pix[4], float wt[4]) {
    float x = kc__aug_clampf(m[0] * (float)ox + m[1] * (float)oy + m[2]);
    float y = kc__aug_clampf(m[3] * (float)ox + m[4] * (float)oy + m[5]);
    if (d->interp == KC_SAMPLE_BILINEAR) {
        float x0 = floorf(x), y0 = floorf(y), fx = x - x0, fy = y - y0;
        int ix = (int)x0, iy = (int)y0;
        pix[0] = kc__aug_pixel(d, iy, ix), wt[0] = (1.0f - fy) * (1.0f - fx);
        pix[1] = kc__aug_pixel(d, iy, ix + 1), wt[1] = (1.0f - fy) * fx;
        pix[2] = kc__aug_pixel(d, iy + 1, ix), wt[2] = fy * (1.0f - fx);
        pix[3] = kc__aug_pixel(d, iy + 1, ix + 1), wt[3] = fy * fx;
        return 4;
    }
    if (d->interp == KC_SAMPLE_FLOOR) x = floorf(x + 0.5f), y = floorf(y + 0.5f);
    else x = rintf(x), y = rintf(y); /* round half to even, as map_coordinates' order 0 */
    pix[0] = kc__aug_pixel(d, (int)y, (int)x), wt[0] = 1.0f;
    return 1;
}

#endif /* KC_AUG_TAPS_H */
