/* cpu_resample.c — UpSampling2D (nearest and bilinear) and Permute, NHWC.
 *
 * Every loop runs over whole output pixels with the channels innermost (contiguous in
 * NHWC), so the per-pixel work vectorises. Forward and the nearest backward are gathers,
 * parallel over output rows; the bilinear backward scatters each output row into the two
 * input rows it reads, parallel over examples (each thread owns whole images of dx).
 *
 * Bilinear uses half-pixel centres, source = (o + 0.5) / factor - 0.5, clamped to the
 * image: what TensorFlow's resize (half_pixel_centers) and JAX's scale_and_translate
 * (whose triangle weights are renormalised at the border) both compute for upsampling. */
#include <string.h>

#include "cpu.h"

static kc_status rs_check(const kc_resample2d_desc *d, const void *a, const void *b, const char *what) {
    if (!d || !a || !b) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: NULL descriptor or buffer", what);
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->sh <= 0 || d->sw <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: bad descriptor (input %dx%dx%dx%d, factors %dx%d)", what,
                        d->n, d->h, d->w, d->c, d->sh, d->sw);
    return KC_STATUS_OK;
}

/* The two source indices and the weight of the second for output o of an axis. */
void kc__cpu_bilinear_tap(int o, int factor, int in, int *i0, int *i1, float *frac) {
    float src = ((float)o + 0.5f) / (float)factor - 0.5f;
    if (src < 0.0f) src = 0.0f;
    int a = (int)src;
    if (a > in - 1) a = in - 1;
    *i0 = a;
    *i1 = a + 1 < in ? a + 1 : in - 1;
    *frac = src - (float)a;
    if (*i1 == a) *frac = 0.0f;
}

static void up_row(const kc_resample2d_desc *d, const float *x, float *yr, int n, int oy) {
    const int c = d->c, ow = d->w * d->sw;
    const float *xi = x + (size_t)n * d->h * d->w * c;
    if (!d->bilinear) {
        const float *xr = xi + (size_t)(oy / d->sh) * d->w * c;
        for (int ox = 0; ox < ow; ox++) memcpy(yr + (size_t)ox * c, xr + (size_t)(ox / d->sw) * c, (size_t)c * sizeof(float));
        return;
    }
    int y0, y1, x0, x1;
    float fy, fx;
    kc__cpu_bilinear_tap(oy, d->sh, d->h, &y0, &y1, &fy);
    const float *r0 = xi + (size_t)y0 * d->w * c, *r1 = xi + (size_t)y1 * d->w * c;
    for (int ox = 0; ox < ow; ox++) {
        kc__cpu_bilinear_tap(ox, d->sw, d->w, &x0, &x1, &fx);
        const float *a = r0 + (size_t)x0 * c, *b = r0 + (size_t)x1 * c, *p = r1 + (size_t)x0 * c,
                    *q = r1 + (size_t)x1 * c;
        float *yo = yr + (size_t)ox * c;
        for (int k = 0; k < c; k++) {
            const float top = a[k] + (b[k] - a[k]) * fx, bot = p[k] + (q[k] - p[k]) * fx;
            yo[k] = top + (bot - top) * fy;
        }
    }
}

kc_status kc__cpu_upsample2d_forward(kc_backend *be, const kc_resample2d_desc *d, const float *x, float *y) {
    (void)be;
    KC_TRY(rs_check(d, x, y, "upsample2d_forward"));
    const int oh = d->h * d->sh;
    const size_t row = (size_t)d->w * d->sw * d->c;
    const int64_t rows = (int64_t)d->n * oh;
    KC_CPU_PAR_FOR(kc__cpu_par(rows * (int64_t)row), schedule(static), for (int64_t r = 0; r < rows; r++) { up_row(d, x, y + (size_t)r * row, (int)(r / oh), (int)(r % oh)); });
    return KC_STATUS_OK;
}

/* dx row (n, iy) = sum of the sh x sw output pixels each input pixel was copied to */
static void nearest_back_row(const kc_resample2d_desc *d, const float *dy, float *dxr, int n, int iy) {
    const int c = d->c, ow = d->w * d->sw;
    const float *dyi = dy + (size_t)n * d->h * d->sh * ow * c;
    memset(dxr, 0, (size_t)d->w * c * sizeof(float));
    for (int a = 0; a < d->sh; a++) {
        const float *dr = dyi + (size_t)(iy * d->sh + a) * ow * c;
        for (int ix = 0; ix < d->w; ix++) {
            float *o = dxr + (size_t)ix * c;
            for (int b = 0; b < d->sw; b++) {
                const float *p = dr + (size_t)(ix * d->sw + b) * c;
                for (int k = 0; k < c; k++) o[k] += p[k];
            }
        }
    }
}

static void bilinear_back_image(const kc_resample2d_desc *d, const float *dy, float *dx, int n) {
    const int c = d->c, oh = d->h * d->sh, ow = d->w * d->sw;
    float *dxi = dx + (size_t)n * d->h * d->w * c;
    const float *dyi = dy + (size_t)n * oh * ow * c;
    memset(dxi, 0, (size_t)d->h * d->w * c * sizeof(float));
    for (int oy = 0; oy < oh; oy++) {
        int y0, y1, x0, x1;
        float fy, fx;
        kc__cpu_bilinear_tap(oy, d->sh, d->h, &y0, &y1, &fy);
        float *r0 = dxi + (size_t)y0 * d->w * c, *r1 = dxi + (size_t)y1 * d->w * c;
        for (int ox = 0; ox < ow; ox++) {
            kc__cpu_bilinear_tap(ox, d->sw, d->w, &x0, &x1, &fx);
            const float *g = dyi + ((size_t)oy * ow + ox) * c;
            const float w00 = (1 - fy) * (1 - fx), w01 = (1 - fy) * fx, w10 = fy * (1 - fx), w11 = fy * fx;
            float *a = r0 + (size_t)x0 * c, *b = r0 + (size_t)x1 * c, *p = r1 + (size_t)x0 * c, *q = r1 + (size_t)x1 * c;
            for (int k = 0; k < c; k++) a[k] += w00 * g[k];
            for (int k = 0; k < c; k++) b[k] += w01 * g[k];
            for (int k = 0; k < c; k++) p[k] += w10 * g[k];
            for (int k = 0; k < c; k++) q[k] += w11 * g[k];
        }
    }
}

kc_status kc__cpu_upsample2d_backward(kc_backend *be, const kc_resample2d_desc *d, const float *dy, float *dx) {
    (void)be;
    KC_TRY(rs_check(d, dy, dx, "upsample2d_backward"));
    const int64_t total = (int64_t)d->n * d->h * d->sh * d->w * d->sw * d->c;
    if (d->bilinear) {
        KC_CPU_PAR_FOR(kc__cpu_par(total), schedule(static), for (int n = 0; n < d->n; n++) { bilinear_back_image(d, dy, dx, n); });
        return KC_STATUS_OK;
    }
    const int64_t rows = (int64_t)d->n * d->h;
    const size_t row = (size_t)d->w * d->c;
    KC_CPU_PAR_FOR(kc__cpu_par(total), schedule(static), for (int64_t r = 0; r < rows; r++) { nearest_back_row(d, dy, dx + (size_t)r * row, (int)(r / d->h), (int)(r % d->h)); });
    return KC_STATUS_OK;
}

kc_status kc__cpu_permute(kc_backend *be, const float *x, float *y, int n, int rank, const int *dims, const int *perm) {
    (void)be;
    if (!x || !y || !dims || !perm || n <= 0 || rank < 1 || rank > KC_MAX_RANK)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu permute: NULL buffer or bad size (n %d, rank %d)", n, rank);
    int64_t xs[KC_MAX_RANK], od[KC_MAX_RANK] = {1, 1, 1, 1}, os[KC_MAX_RANK] = {0, 0, 0, 0}, size = 1;
    for (int i = rank - 1; i >= 0; i--) xs[i] = size, size *= dims[i];
    /* the output's axes, padded in front to rank 4: extent and stride in x */
    for (int j = 0; j < rank; j++) {
        const int a = perm[j];
        if (a < 0 || a >= rank) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu permute: bad axis %d", a);
        od[KC_MAX_RANK - rank + j] = dims[a];
        os[KC_MAX_RANK - rank + j] = xs[a];
    }
    const int64_t outer = (int64_t)n * od[0] * od[1] * od[2];
    KC_CPU_PAR_FOR(kc__cpu_par((int64_t)n * size), schedule(static), for (int64_t r = 0; r < outer; r++) {
        int64_t t = r;
        const int64_t i2 = t % od[2];
        t /= od[2];
        const int64_t i1 = t % od[1];
        t /= od[1];
        const int64_t i0 = t % od[0], e = t / od[0];
        const float *src = x + e * size + i0 * os[0] + i1 * os[1] + i2 * os[2];
        float *dst = y + r * od[3];
        const int64_t st = os[3];
        if (st == 1) memcpy(dst, src, (size_t)od[3] * sizeof(float));
        else
            for (int64_t k = 0; k < od[3]; k++) dst[k] = src[k * st];
    });
    return KC_STATUS_OK;
}
