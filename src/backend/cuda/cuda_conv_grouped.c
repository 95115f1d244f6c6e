/* cuda_conv_grouped.c — the grouped convolution entries of the CUDA backend's table
 * (Conv2D with 1 < groups < C): arguments checked as cpu_conv_grouped.c checks them, then
 * cuDNN's grouped convolution (cuda_conv.c) in the planned workspace where it runs the
 * shape, else the module's own kernels (kernels_grouped.cu, no workspace), one launch each. */
#include "cuda_internal.h"

static kc_status gc_args(kc_backend *be, const kc_conv2d_desc *d, int groups, const char *what, const void *a,
                         const void *b, const void *c) {
    if (!d) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: the descriptor is NULL", what);
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->f <= 0 || d->kh <= 0 || d->kw <= 0 || d->sh <= 0 ||
        d->sw <= 0 || d->dh <= 0 || d->dw <= 0 || d->oh <= 0 || d->ow <= 0 || d->pad_top < 0 || d->pad_left < 0 ||
        groups <= 0 || d->c % groups || d->f % groups)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda %s: bad grouped convolution (input %dx%dx%dx%d, %d filters, %d groups, kernel "
                           "%dx%d, output %dx%d): every size must be positive, padding >= 0 and channels and "
                           "filters multiples of the groups",
                           what, d->n, d->h, d->w, d->c, d->f, groups, d->kh, d->kw, d->oh, d->ow);
    if (!a || !b || !c) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: NULL tensor pointer", what);
    return kc__cu_enter(be);
}

kc_status kc__cu_grouped_conv_forward(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                      const float *w, const float *b, float *y, void *ws, size_t ws_bytes) {
    KC_TRY(gc_args(be, d, groups, "grouped_conv_forward", x, w, y));
    kc_status s = kc__cu_dnn_grouped_forward(be, d, groups, x, w, b, y, ws, ws_bytes);
    if (s != KC_STATUS_UNSUPPORTED) return s;
    return kc__cu_launched(be, "grouped conv forward", kc__k_gc_forward(&kc__cu(be)->L, d, groups, x, w, b, y));
}

kc_status kc__cu_grouped_conv_backward_data(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *dy,
                                            const float *w, float *dx, void *ws, size_t ws_bytes) {
    KC_TRY(gc_args(be, d, groups, "grouped_conv_backward_data", dy, w, dx));
    kc_status s = kc__cu_dnn_grouped_backward_data(be, d, groups, dy, w, dx, ws, ws_bytes);
    if (s != KC_STATUS_UNSUPPORTED) return s;
    return kc__cu_launched(be, "grouped conv backward data",
                           kc__k_gc_backward_data(&kc__cu(be)->L, d, groups, dy, w, dx));
}

kc_status kc__cu_grouped_conv_backward_filter(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                              const float *dy, float *dw, float *db, void *ws, size_t ws_bytes) {
    KC_TRY(gc_args(be, d, groups, "grouped_conv_backward_filter", x, dy, dw));
    kc_status s = kc__cu_dnn_grouped_backward_filter(be, d, groups, x, dy, dw, db, ws, ws_bytes);
    if (s != KC_STATUS_UNSUPPORTED) return s;
    return kc__cu_launched(be, "grouped conv backward filter",
                           kc__k_gc_backward_filter(&kc__cu(be)->L, d, groups, x, dy, dw, db));
}
