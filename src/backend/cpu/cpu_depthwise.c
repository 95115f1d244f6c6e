/* cpu_depthwise.c — depthwise 2-D convolution (DepthwiseConv2D), NHWC, kernel (KH, KW, C, M).
 *
 * Output channel k = c * M + m reads input channel c = k / M only, so the kernel is the
 * (KH, KW, F) array of F = C * M per-channel filters. Depthwise convolution does KH * KW
 * multiply-adds per value it reads: it is memory-bound, and im2col would multiply the
 * traffic by KH * KW. These kernels are direct instead: the innermost loop always runs over
 * the channels of one pixel, contiguous in NHWC and in the kernel, so it vectorises, and
 * each image row is read once per kernel row that covers it.
 *
 *   forward          parallel over output rows (n, oy): y row = sum over taps of x pixel * w tap
 *   backward_data    parallel over input rows (n, iy): a gather over the output pixels whose
 *                    windows cover each input pixel, so every thread owns whole rows of dx
 *   backward_filter  3x3 (the fast path's channels): parallel over groups of output rows,
 *                    each summing into a partial of its own in the workspace (10 x C
 *                    floats), added in group order in double (kc__cpu_depthwise_workspace);
 *                    otherwise, and without the workspace: parallel over blocks of channels,
 *                    each thread owning dw[., ., block] and db[block], sums per image in
 *                    float, across images in double (partials on the stack). */
#include <string.h>

#include "cpu.h"

/* Channels per block of backward_filter, and its stack tile of taps x channels. */
#define DW_BLOCK 16
#define DW_TILE 4096

static kc_status dw_check(const kc_conv2d_desc *d, const char *what) {
    if (!d) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: the descriptor is NULL", what);
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->f <= 0 || d->kh <= 0 || d->kw <= 0 || d->sh <= 0 ||
        d->sw <= 0 || d->dh <= 0 || d->dw <= 0 || d->oh <= 0 || d->ow <= 0 || d->pad_top < 0 || d->pad_left < 0 ||
        d->f % d->c != 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu %s: bad depthwise descriptor (input %dx%dx%dx%d, %d output channels, kernel %dx%d, "
                        "strides %dx%d, dilation %dx%d, pad %d,%d, output %dx%d): every size must be positive, "
                        "padding >= 0 and the output channels a multiple of the input channels",
                        what, d->n, d->h, d->w, d->c, d->f, d->kh, d->kw, d->sh, d->sw, d->dh, d->dw, d->pad_top,
                        d->pad_left, d->oh, d->ow);
    return KC_STATUS_OK;
}

/* acc[k] += xp[k / m] * wp[k] for k < f (m = 1: a plain vector multiply-add). */
static inline void tap_fma(float *restrict acc, const float *restrict xp, const float *restrict wp, int f, int m) {
    if (m == 1) {
        for (int k = 0; k < f; k++) acc[k] += xp[k] * wp[k];
        return;
    }
    for (int c = 0, k = 0; k < f; c++)
        for (int j = 0; j < m; j++, k++) acc[k] += xp[c] * wp[k];
}

/* y row (n, oy), channels [k0, f) (k0 > 0 only with multiplier 1: the fast path did the others) */
static void dw_forward_row(const kc_conv2d_desc *d, const float *x, const float *w, const float *b, float *yr,
                           int n, int oy, int k0) {
    const int f = d->f, m = d->f / d->c;
    int r0, r1;
    kc__cpu_tap_range(oy, d->sh, d->pad_top, d->dh, d->kh, d->h, &r0, &r1);
    const float *xi = x + (size_t)n * d->h * d->w * d->c;
    for (int ox = 0; ox < d->ow; ox++) {
        float *acc = yr + (size_t)ox * f + k0;
        if (b) memcpy(acc, b + k0, (size_t)(f - k0) * sizeof(float));
        else memset(acc, 0, (size_t)(f - k0) * sizeof(float));
        int s0, s1;
        kc__cpu_tap_range(ox, d->sw, d->pad_left, d->dw, d->kw, d->w, &s0, &s1);
        for (int r = r0; r < r1; r++) {
            const float *xrow = xi + (size_t)(oy * d->sh - d->pad_top + r * d->dh) * d->w * d->c;
            for (int s = s0; s < s1; s++) {
                const float *xp = xrow + (size_t)(ox * d->sw - d->pad_left + s * d->dw) * d->c;
                tap_fma(acc, xp + k0, w + ((size_t)r * d->kw + s) * f + k0, f - k0, m);
            }
        }
        if (d->relu)
            for (int k = 0; k < f - k0; k++) acc[k] = acc[k] > 0.0f ? acc[k] : 0.0f;
    }
}

kc_status kc__cpu_depthwise_forward(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *w,
                                    const float *b, float *y, void *ws, size_t ws_bytes) {
    (void)be, (void)ws, (void)ws_bytes;
    KC_TRY(dw_check(d, "depthwise_forward"));
    if (!x || !w || !y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu depthwise_forward: NULL x, kernel or y");
    const int64_t rows = (int64_t)d->n * d->oh;
    const size_t row = (size_t)d->ow * d->f;
    const int cv = kc__cpu_dw3_channels(d, 0);
    KC_CPU_PAR_FOR(kc__cpu_par(rows * (int64_t)row * d->kh * d->kw), KC_CPU_BALANCED(rows),
    for (int64_t i = 0; i < rows; i++) {
        const int n = (int)(i / d->oh), oy = (int)(i % d->oh);
        if (cv > 0) kc__cpu_dw3_forward_row(d, x, w, b, y + (size_t)i * row, n, oy, cv);
        if (cv < d->f) dw_forward_row(d, x, w, b, y + (size_t)i * row, n, oy, cv);
    });
    return KC_STATUS_OK;
}

/* The output positions o (and kernel taps t) with o * stride - pad + t * dil == i; channels [k0, c) (k0 > 0
 * only with multiplier 1). */
static void dw_backward_data_row(const kc_conv2d_desc *d, const float *dy, const float *w, float *dxr, int n,
                                 int iy, int k0) {
    const int c = d->c, f = d->f, m = d->f / d->c;
    const float *dyi = dy + (size_t)n * d->oh * d->ow * f;
    for (int ix = 0; ix < d->w; ix++) memset(dxr + (size_t)ix * c + k0, 0, (size_t)(c - k0) * sizeof(float));
    for (int r = 0; r < d->kh; r++) {
        int t = iy + d->pad_top - r * d->dh;
        if (t < 0 || t % d->sh) continue;
        int oy = t / d->sh;
        if (oy >= d->oh) continue;
        const float *dyrow = dyi + (size_t)oy * d->ow * f;
        for (int ix = 0; ix < d->w; ix++) {
            float *acc = dxr + (size_t)ix * c;
            for (int s = 0; s < d->kw; s++) {
                int u = ix + d->pad_left - s * d->dw;
                if (u < 0 || u % d->sw) continue;
                int ox = u / d->sw;
                if (ox >= d->ow) continue;
                const float *g = dyrow + (size_t)ox * f, *wp = w + ((size_t)r * d->kw + s) * f;
                if (m == 1) {
                    for (int k = k0; k < f; k++) acc[k] += g[k] * wp[k];
                } else {
                    for (int ch = 0, k = 0; ch < c; ch++) {
                        float sum = 0.0f;
                        for (int j = 0; j < m; j++, k++) sum += g[k] * wp[k];
                        acc[ch] += sum;
                    }
                }
            }
        }
    }
}

kc_status kc__cpu_depthwise_backward_data(kc_backend *be, const kc_conv2d_desc *d, const float *dy, const float *w,
                                          float *dx, void *ws, size_t ws_bytes) {
    (void)be, (void)ws, (void)ws_bytes;
    KC_TRY(dw_check(d, "depthwise_backward_data"));
    if (!dy || !w || !dx)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu depthwise_backward_data: NULL dy, kernel or dx");
    const int64_t rows = (int64_t)d->n * d->h;
    const size_t row = (size_t)d->w * d->c;
    const int cv = kc__cpu_dw3_channels(d, 1);
    KC_CPU_PAR_FOR(kc__cpu_par(rows * (int64_t)d->w * d->f * d->kh * d->kw), KC_CPU_BALANCED(rows),
    for (int64_t i = 0; i < rows; i++) {
        const int n = (int)(i / d->h), iy = (int)(i % d->h);
        if (cv > 0) kc__cpu_dw3_backward_data_row(d, dy, w, dx + (size_t)i * row, n, iy, cv);
        if (cv < d->c) dw_backward_data_row(d, dy, w, dx + (size_t)i * row, n, iy, cv);
    });
    return KC_STATUS_OK;
}

/* dw[., ., k0 .. k0 + nb) and db[k0 .. k0 + nb): one thread's block of channels. */
static void dw_filter_block(const kc_conv2d_desc *d, const float *x, const float *dy, float *dw, float *db, int k0,
                            int nb) {
    const int f = d->f, m = d->f / d->c, taps = d->kh * d->kw;
    float acc[DW_TILE], bacc[DW_BLOCK];
    double tot[DW_TILE], btot[DW_BLOCK];
    memset(tot, 0, (size_t)taps * nb * sizeof(double));
    memset(btot, 0, (size_t)nb * sizeof(double));
    for (int n = 0; n < d->n; n++) {
        const float *xi = x + (size_t)n * d->h * d->w * d->c;
        const float *dyi = dy + (size_t)n * d->oh * d->ow * f;
        memset(acc, 0, (size_t)taps * nb * sizeof(float));
        memset(bacc, 0, (size_t)nb * sizeof(float));
        for (int oy = 0; oy < d->oh; oy++) {
            int r0, r1;
            kc__cpu_tap_range(oy, d->sh, d->pad_top, d->dh, d->kh, d->h, &r0, &r1);
            for (int ox = 0; ox < d->ow; ox++) {
                const float *g = dyi + ((size_t)oy * d->ow + ox) * f + k0;
                for (int k = 0; k < nb; k++) bacc[k] += g[k];
                int s0, s1;
                kc__cpu_tap_range(ox, d->sw, d->pad_left, d->dw, d->kw, d->w, &s0, &s1);
                for (int r = r0; r < r1; r++) {
                    const float *xrow = xi + (size_t)(oy * d->sh - d->pad_top + r * d->dh) * d->w * d->c;
                    for (int s = s0; s < s1; s++) {
                        const float *xp = xrow + (size_t)(ox * d->sw - d->pad_left + s * d->dw) * d->c;
                        float *a = acc + (size_t)(r * d->kw + s) * nb;
                        if (m == 1)
                            for (int k = 0; k < nb; k++) a[k] += xp[k0 + k] * g[k];
                        else
                            for (int k = 0; k < nb; k++) a[k] += xp[(k0 + k) / m] * g[k];
                    }
                }
            }
        }
        for (int i = 0; i < taps * nb; i++) tot[i] += acc[i];
        for (int k = 0; k < nb; k++) btot[k] += bacc[k];
    }
    for (int t = 0; t < taps; t++)
        for (int k = 0; k < nb; k++) dw[(size_t)t * f + k0 + k] = (float)tot[(size_t)t * nb + k];
    if (db)
        for (int k = 0; k < nb; k++) db[k0 + k] = (float)btot[k];
}

/* backward_filter's groups of output rows for the fast path's channels: KC_CPU_DW_GROUPS per
 * thread, each summing its rows into a partial of its own in the workspace (10 x cv floats),
 * taken as the threads come free and added in group order. */
#define KC_CPU_DW_GROUPS 4
static size_t dw_part_floats(const kc_conv2d_desc *d) { return (size_t)10 * kc__cpu_dw3_channels(d, 0); }

size_t kc__cpu_depthwise_workspace(kc_backend *be, const kc_conv2d_desc *d) {
    (void)be;
    if (!d || d->n <= 0 || d->oh <= 0 || d->c <= 0 || d->f != d->c) return 0;
    return dw_part_floats(d) * KC_CPU_DW_GROUPS * (size_t)KC_MAX(1, KC_MIN(kc__num_threads(), 64)) * sizeof(float);
}

/* The filter gradient of channels [0, cv) by groups of rows (kc__cpu_dw3_filter_rows). */
static void dw3_filter_by_rows(const kc_conv2d_desc *d, const float *x, const float *dy, float *dw, float *db,
                               float *part, int64_t groups, int cv) {
    const size_t pf = (size_t)10 * cv;
    const int64_t rows = (int64_t)d->n * d->oh;
    KC_CPU_PAR_FOR(kc__cpu_par(rows * (int64_t)d->ow * cv * 9) && groups > 1, schedule(dynamic, 1),
    for (int64_t j = 0; j < groups; j++) {
        float *pj = part + (size_t)j * pf;
        memset(pj, 0, pf * sizeof(float));
        kc__cpu_dw3_filter_rows(d, x, dy, pj, rows * j / groups, rows * (j + 1) / groups, cv);
    });
    for (int t = 0; t < 10; t++) /* in group order, in double; dw (3, 3, F): tap t's row is F wide */
        for (int k = 0; k < cv; k++) {
            double sum = 0.0;
            for (int64_t j = 0; j < groups; j++) sum += part[(size_t)j * pf + (size_t)t * cv + k];
            if (t < 9)
                dw[(size_t)t * d->f + k] = (float)sum;
            else if (db)
                db[k] = (float)sum;
        }
}

kc_status kc__cpu_depthwise_backward_filter(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *dy,
                                            float *dw, float *db, void *ws, size_t ws_bytes) {
    (void)be;
    KC_TRY(dw_check(d, "depthwise_backward_filter"));
    if (!x || !dy || !dw)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu depthwise_backward_filter: NULL x, dy or dw");
    const int taps = d->kh * d->kw;
    if (taps > DW_TILE)
        return kc__fail(KC_STATUS_UNSUPPORTED, "cpu depthwise_backward_filter: a %dx%d kernel has more than %d taps",
                        d->kh, d->kw, DW_TILE);
    /* the fast path's vectors of channels [0, cv), then the general kernel's blocks of the rest;
     * the fast path by groups of rows where the workspace holds their partial sums, else by
     * blocks of channels (each thread then walks the whole of x and dy per block) */
    const int cv = kc__cpu_dw3_channels(d, 0), vw = kc__cpu_dw3_width();
    const size_t pf = dw_part_floats(d);
    const int64_t room = ws && pf ? (int64_t)(ws_bytes / (pf * sizeof(float))) : 0;
    const int64_t groups =
        KC_MIN(room, (int64_t)KC_MAX(1, kc__num_threads()) * (kc__cpu_balance() ? KC_CPU_DW_GROUPS : 1));
    int done = 0; /* the fast path's blocks run by rows */
    if (cv > 0 && groups >= 1) {
        dw3_filter_by_rows(d, x, dy, dw, db, ws, KC_MIN(groups, (int64_t)d->n * d->oh), cv);
        done = cv / vw;
    }
    const int bs = KC_MAX(1, KC_MIN(DW_BLOCK, DW_TILE / taps));
    const int fast = cv / vw, blocks = fast + (d->f - cv + bs - 1) / bs;
    const int64_t work = (int64_t)d->n * d->oh * d->ow * d->f * taps;
    KC_CPU_PAR_FOR(kc__cpu_par(work) && blocks - done > 1, KC_CPU_BALANCED(blocks),
                   for (int bi = done; bi < blocks; bi++) {
        if (bi < fast) {
            kc__cpu_dw3_filter_chunk(d, x, dy, dw, db, bi * vw);
        } else {
            const int k0 = cv + (bi - fast) * bs;
            dw_filter_block(d, x, dy, dw, db, k0, KC_MIN(bs, d->f - k0));
        }
    });
    return KC_STATUS_OK;
}
