/* cpu_pool.c — 2-D max / average pooling (NHWC) and global average pooling.
 *
 * Max pooling ignores padded positions and records in mask, per output element, the
 * flat index into x of the chosen element (the first maximum in window order); its
 * backward scatters dy there. Average pooling divides by the number of non-padded
 * elements in the window (TensorFlow's "same" padding). Forward runs in parallel over
 * output rows; backward over images, so no two threads write the same dx element even
 * when windows overlap (stride < pool size). */
#include <limits.h>
#include <string.h>

#include "cpu.h"

static kc_status pool_check(const kc_pool2d_desc *d, const char *what) {
    if (!d) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: the descriptor is NULL", what);
    if (d->kind != KC_POOL_MAX && d->kind != KC_POOL_AVG)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: unknown pooling kind %d", what, (int)d->kind);
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->kh <= 0 || d->kw <= 0 || d->sh <= 0 || d->sw <= 0 ||
        d->oh <= 0 || d->ow <= 0 || d->pad_top < 0 || d->pad_left < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu %s: bad pooling descriptor (input %dx%dx%dx%d, pool %dx%d, strides %dx%d, pad %d,%d, "
                        "output %dx%d): every size must be positive and padding >= 0",
                        what, d->n, d->h, d->w, d->c, d->kh, d->kw, d->sh, d->sw, d->pad_top, d->pad_left, d->oh,
                        d->ow);
    if ((int64_t)d->n * d->h * d->w * d->c > INT32_MAX)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        "cpu %s: input of %lld elements is too large for the int32 pooling mask; use a smaller batch",
                        what, (long long)d->n * d->h * d->w * d->c);
    return KC_STATUS_OK;
}

/* The valid window rows [*k0, *k1) of output position o along an axis of size n. */
static inline void window(int o, int stride, int pad, int k, int n, int *k0, int *k1) {
    const int i0 = o * stride - pad;
    *k0 = i0 < 0 ? -i0 : 0;
    *k1 = i0 + k > n ? n - i0 : k;
}

kc_status kc__cpu_pool2d_forward(kc_backend *be, const kc_pool2d_desc *d, const float *x, float *y, int32_t *mask) {
    KC_TRY(pool_check(d, "pool2d_forward"));
    if (!x || !y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu pool2d_forward: NULL x or y");
    const int h = d->h, w = d->w, c = d->c, oh = d->oh, ow = d->ow;
    const int is_max = d->kind == KC_POOL_MAX;
    const int64_t rows = (int64_t)d->n * oh; /* (image, output row) */
    KC_CPU_PAR_FOR(kc__cpu_par(rows * ow * c * (int64_t)d->kh * d->kw), KC_CPU_BALANCED(rows),
    for (int64_t r = 0; r < rows; r++) {
        const int img = (int)(r / oh), oy = (int)(r % oh);
        int ky0, ky1;
        window(oy, d->sh, d->pad_top, d->kh, h, &ky0, &ky1);
        const int iy0 = oy * d->sh - d->pad_top;
        for (int ox = 0; ox < ow; ox++) {
            int kx0, kx1;
            window(ox, d->sw, d->pad_left, d->kw, w, &kx0, &kx1);
            const int ix0 = ox * d->sw - d->pad_left;
            const size_t o = ((size_t)r * ow + ox) * c;
            float *yo = y + o;                      /* (C) */
            int32_t *mo = mask ? mask + o : NULL;   /* (C) */
            if (ky1 <= ky0 || kx1 <= kx0) { /* window entirely in the padding */
                memset(yo, 0, (size_t)c * sizeof(float));
                if (mo)
                    for (int ch = 0; ch < c; ch++) mo[ch] = -1;
                continue;
            }
            int first = 1;
            for (int ky = ky0; ky < ky1; ky++) {
                const int iy = iy0 + ky;
                for (int kx = kx0; kx < kx1; kx++) {
                    const int ix = ix0 + kx;
                    const int32_t base = (int32_t)((((size_t)img * h + iy) * w + ix) * c);
                    const float *xp = x + base; /* (C) */
                    if (first) {
                        memcpy(yo, xp, (size_t)c * sizeof(float));
                        if (mo && is_max)
                            for (int ch = 0; ch < c; ch++) mo[ch] = base + ch;
                        first = 0;
                    } else if (is_max) {
                        if (mo) {
                            /* a select, not a conditional store: AVX2 has no cheap masked store
                             * (vmaskmovps; 3x the AVX-512 copy's time on workloads A and B) */
                            for (int ch = 0; ch < c; ch++) {
                                const float a = xp[ch], b = yo[ch];
                                const int32_t gt = -(int32_t)(a > b); /* all ones where a wins */
                                yo[ch] = a > b ? a : b;
                                mo[ch] = (mo[ch] & ~gt) | ((base + ch) & gt);
                            }
                        } else {
                            for (int ch = 0; ch < c; ch++) yo[ch] = xp[ch] > yo[ch] ? xp[ch] : yo[ch];
                        }
                    } else {
                        for (int ch = 0; ch < c; ch++) yo[ch] += xp[ch];
                    }
                }
            }
            if (!is_max) {
                const float inv = 1.0f / (float)((ky1 - ky0) * (kx1 - kx0));
                for (int ch = 0; ch < c; ch++) yo[ch] *= inv;
                if (mo)
                    for (int ch = 0; ch < c; ch++) mo[ch] = -1;
            }
        }
    });
    return KC_STATUS_OK;
}

kc_status kc__cpu_pool2d_backward(kc_backend *be, const kc_pool2d_desc *d, const float *dy, const int32_t *mask,
                                  float *dx) {
    KC_TRY(pool_check(d, "pool2d_backward"));
    if (!dy || !dx) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu pool2d_backward: NULL dy or dx");
    const int is_max = d->kind == KC_POOL_MAX;
    if (is_max && !mask)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu pool2d_backward: max pooling needs the mask from forward");
    const int h = d->h, w = d->w, c = d->c, oh = d->oh, ow = d->ow;
    const size_t img_in = (size_t)h * w * c, img_out = (size_t)oh * ow * c;
    const int32_t lim = (int32_t)((int64_t)d->n * h * w * c);
    KC_CPU_PAR_FOR(kc__cpu_par((int64_t)d->n * (int64_t)(img_in + img_out)), KC_CPU_BALANCED(d->n),
    for (int img = 0; img < d->n; img++) {
        float *dxi = dx + (size_t)img * img_in; /* (H, W, C) */
        memset(dxi, 0, img_in * sizeof(float));
        const float *dyi = dy + (size_t)img * img_out; /* (OH, OW, C) */
        if (is_max) {
            const int32_t *mi = mask + (size_t)img * img_out;
            /* indices outside this image's slice (a stale or foreign mask) are skipped,
             * which also keeps the threads' writes disjoint */
            const int32_t lo = (int32_t)((size_t)img * img_in), hi = (int32_t)((size_t)(img + 1) * img_in);
            for (size_t i = 0; i < img_out; i++) {
                const int32_t t = mi[i];
                if (t >= lo && t < hi && t < lim) dx[t] += dyi[i];
            }
            continue;
        }
        for (int oy = 0; oy < oh; oy++) {
            int ky0, ky1;
            window(oy, d->sh, d->pad_top, d->kh, h, &ky0, &ky1);
            const int iy0 = oy * d->sh - d->pad_top;
            for (int ox = 0; ox < ow; ox++) {
                int kx0, kx1;
                window(ox, d->sw, d->pad_left, d->kw, w, &kx0, &kx1);
                if (ky1 <= ky0 || kx1 <= kx0) continue;
                const int ix0 = ox * d->sw - d->pad_left;
                const float inv = 1.0f / (float)((ky1 - ky0) * (kx1 - kx0));
                const float *g = dyi + ((size_t)oy * ow + ox) * c; /* (C) */
                for (int ky = ky0; ky < ky1; ky++)
                    for (int kx = kx0; kx < kx1; kx++) {
                        float *o = dxi + ((size_t)(iy0 + ky) * w + (ix0 + kx)) * c;
                        for (int ch = 0; ch < c; ch++) o[ch] += g[ch] * inv;
                    }
            }
        }
    });
    return KC_STATUS_OK;
}

kc_status kc__cpu_global_avg_pool_forward(kc_backend *be, const float *x, float *y, int n, int hw, int c) {
    if (n < 0 || hw <= 0 || c < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu global_avg_pool_forward: bad size (%d, %d, %d)", n, hw, c);
    if (n == 0 || c == 0) return KC_STATUS_OK;
    if (!x || !y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu global_avg_pool_forward: NULL x or y");
    const double inv = 1.0 / hw;
    KC_CPU_PAR_FOR(kc__cpu_par((int64_t)n * hw * c), KC_CPU_BALANCED(n), for (int img = 0; img < n; img++) {
        const float *xi = x + (size_t)img * hw * c; /* (HW, C) */
        for (int c0 = 0; c0 < c; c0 += KC_CPU_RED_COLS) {
            const int cb = KC_MIN(KC_CPU_RED_COLS, c - c0);
            double s[KC_CPU_RED_COLS] = {0};
            for (int i = 0; i < hw; i++) {
                const float *xr = xi + (size_t)i * c + c0;
                for (int j = 0; j < cb; j++) s[j] += (double)xr[j];
            }
            for (int j = 0; j < cb; j++) y[(size_t)img * c + c0 + j] = (float)(s[j] * inv);
        }
    });
    return KC_STATUS_OK;
}

kc_status kc__cpu_global_avg_pool_backward(kc_backend *be, const float *dy, float *dx, int n, int hw, int c) {
    if (n < 0 || hw <= 0 || c < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu global_avg_pool_backward: bad size (%d, %d, %d)", n, hw, c);
    if (n == 0 || c == 0) return KC_STATUS_OK;
    if (!dy || !dx) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu global_avg_pool_backward: NULL dy or dx");
    const float inv = 1.0f / (float)hw;
    const int64_t rows = (int64_t)n * hw;
    KC_CPU_PAR_FOR(kc__cpu_par(rows * c), KC_CPU_BALANCED(rows), for (int64_t r = 0; r < rows; r++) {
        const float *g = dy + (r / hw) * c; /* (C) */
        float *o = dx + r * c;
        for (int j = 0; j < c; j++) o[j] = g[j] * inv;
    });
    return KC_STATUS_OK;
}
