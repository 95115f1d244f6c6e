/* cuda_augment.c — the augmentation layers' entries of the CUDA backend's table (resampling
 * and colour, kernels_aug.cu): arguments checked as cpu_augment.c checks them, then the
 * launches. */
#include "cuda_internal.h"

static kc_status sample_args(kc_backend *be, const kc_sample2d_desc *d, const void *a, const void *b, const char *what) {
    if (!d || !a || !b) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: NULL descriptor or tensor", what);
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->oh <= 0 || d->ow <= 0 || d->ch <= 0 || d->cw <= 0 ||
        d->interp < KC_SAMPLE_ROUND || d->interp > KC_SAMPLE_FLOOR || d->fill < KC_FILL_REFLECT ||
        d->fill > KC_FILL_NEAREST)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda %s: bad resampling descriptor (input %dx%dx%dx%d, output %dx%d, canvas %dx%d)", what,
                           d->n, d->h, d->w, d->c, d->oh, d->ow, d->ch, d->cw);
    return kc__cu_enter(be);
}

static kc_status color_args(kc_backend *be, const kc_color2d_desc *d, const void *p, const void *a, const void *b,
                            const char *what) {
    if (!d || !p || !a || !b) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: NULL descriptor or tensor", what);
    if (d->n <= 0 || d->hw <= 0 || d->c <= 0 || !(d->lo <= d->hi))
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda %s: bad colour descriptor (%d images of %d pixels x %d channels, range [%g, %g])",
                           what, d->n, d->hw, d->c, (double)d->lo, (double)d->hi);
    return kc__cu_enter(be);
}

kc_status kc__cu_sample2d_forward(kc_backend *be, const kc_sample2d_desc *d, const float *mats, const float *x,
                                  float *y) {
    KC_TRY(sample_args(be, d, x, y, "sample2d_forward"));
    return kc__cu_launched(be, "resampling forward", kc__k_sample2d_forward(&kc__cu(be)->L, d, mats, x, y));
}

kc_status kc__cu_sample2d_backward(kc_backend *be, const kc_sample2d_desc *d, const float *mats, const float *dy,
                                   float *dx) {
    KC_TRY(sample_args(be, d, dy, dx, "sample2d_backward"));
    return kc__cu_launched(be, "resampling backward", kc__k_sample2d_backward(&kc__cu(be)->L, d, mats, dy, dx));
}

kc_status kc__cu_color2d_forward(kc_backend *be, const kc_color2d_desc *d, const float *params, const float *x,
                                 float *y) {
    KC_TRY(color_args(be, d, params, x, y, "color2d_forward"));
    return kc__cu_launched(be, "colour forward", kc__k_color2d_forward(&kc__cu(be)->L, d, params, x, y));
}

kc_status kc__cu_color2d_backward(kc_backend *be, const kc_color2d_desc *d, const float *params, const float *y,
                                  const float *dy, float *dx) {
    KC_TRY(color_args(be, d, params, y, dy, "color2d_backward"));
    if (!dx) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda color2d_backward: NULL dx");
    return kc__cu_launched(be, "colour backward", kc__k_color2d_backward(&kc__cu(be)->L, d, params, y, dy, dx));
}
