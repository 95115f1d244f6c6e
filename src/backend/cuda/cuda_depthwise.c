/* cuda_depthwise.c — the depthwise convolution entries of the CUDA backend's table
 * (DepthwiseConv2D): arguments checked as cpu_depthwise.c checks them, then cuDNN's grouped
 * convolution with C groups (cuda_conv.c) in the planned workspace where it runs the shape,
 * else the module's own kernels (kernels_dw.cu, no workspace), one launch each. */
#include "cuda_internal.h"

static kc_status dw_args(kc_backend *be, const kc_conv2d_desc *d, const char *what, const void *a, const void *b,
                         const void *c) {
    if (!d) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: the descriptor is NULL", what);
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->f <= 0 || d->kh <= 0 || d->kw <= 0 || d->sh <= 0 ||
        d->sw <= 0 || d->dh <= 0 || d->dw <= 0 || d->oh <= 0 || d->ow <= 0 || d->pad_top < 0 || d->pad_left < 0 ||
        d->f % d->c != 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda %s: bad depthwise descriptor (input %dx%dx%dx%d, %d output channels, kernel %dx%d, "
                           "output %dx%d): every size must be positive, padding >= 0 and the output channels a "
                           "multiple of the input channels",
                           what, d->n, d->h, d->w, d->c, d->f, d->kh, d->kw, d->oh, d->ow);
    if (!a || !b || !c) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: NULL tensor pointer", what);
    return kc__cu_enter(be);
}

/* cuDNN's grouped convolution's workspace, C groups (0 bytes for a bad descriptor: the calls say why) */
size_t kc__cu_depthwise_workspace(kc_backend *be, const kc_conv2d_desc *d) {
    return d ? kc__cu_dnn_grouped_workspace(be, d, d->c) : 0;
}

kc_status kc__cu_depthwise_forward(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *w,
                                   const float *b, float *y, void *ws, size_t ws_bytes) {
    KC_TRY(dw_args(be, d, "depthwise_forward", x, w, y));
    kc_status s = kc__cu_dnn_grouped_forward(be, d, d->c, x, w, b, y, ws, ws_bytes);
    if (s != KC_STATUS_UNSUPPORTED) return s;
    return kc__cu_launched(be, "depthwise forward", kc__k_dw_forward(&kc__cu(be)->L, d, x, w, b, y));
}

kc_status kc__cu_depthwise_backward_data(kc_backend *be, const kc_conv2d_desc *d, const float *dy, const float *w,
                                         float *dx, void *ws, size_t ws_bytes) {
    KC_TRY(dw_args(be, d, "depthwise_backward_data", dy, w, dx));
    kc_status s = kc__cu_dnn_grouped_backward_data(be, d, d->c, dy, w, dx, ws, ws_bytes);
    if (s != KC_STATUS_UNSUPPORTED) return s;
    return kc__cu_launched(be, "depthwise backward data", kc__k_dw_backward_data(&kc__cu(be)->L, d, dy, w, dx));
}

kc_status kc__cu_depthwise_backward_filter(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *dy,
                                           float *dw, float *db, void *ws, size_t ws_bytes) {
    KC_TRY(dw_args(be, d, "depthwise_backward_filter", x, dy, dw));
    kc_status s = kc__cu_dnn_grouped_backward_filter(be, d, d->c, x, dy, dw, db, ws, ws_bytes);
    if (s != KC_STATUS_UNSUPPORTED) return s;
    return kc__cu_launched(be, "depthwise backward filter",
                           kc__k_dw_backward_filter(&kc__cu(be)->L, d, x, dy, dw, db));
}
