/* cpu_augment.c — image resampling and colour kernels of the augmentation and preprocessing
 * layers (RandomFlip, RandomRotation, RandomZoom, RandomTranslation, RandomCrop, CenterCrop,
 * Resizing; RandomContrast, RandomBrightness), NHWC.
 *
 *   sample2d_forward   parallel over output rows: each output pixel is the weighted sum of
 *                      its taps (backend/aug_taps.h), the channels innermost
 *   sample2d_backward  the adjoint: dx zeroed, then each image's taps scatter w * dy into dx;
 *                      parallel over images (one thread owns an image's dx: no atomics)
 *   color2d_*          parallel over images; the per-channel means and gradient sums of an
 *                      image in double */
#include <stdlib.h>
#include <string.h>

#include "../aug_taps.h"
#include "cpu.h"

#define AUG_MAX_C 4096 /* channels of the per-image stack sums in color2d */

static kc_status sample_check(const kc_sample2d_desc *d, const void *a, const void *b, const char *what) {
    if (!d || !a || !b) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: NULL descriptor or tensor", what);
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->oh <= 0 || d->ow <= 0 || d->ch <= 0 || d->cw <= 0 ||
        d->interp < KC_SAMPLE_ROUND || d->interp > KC_SAMPLE_FLOOR || d->fill < KC_FILL_REFLECT ||
        d->fill > KC_FILL_NEAREST)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu %s: bad resampling descriptor (input %dx%dx%dx%d, output %dx%d, canvas %dx%d, "
                        "interpolation %d, fill %d)",
                        what, d->n, d->h, d->w, d->c, d->oh, d->ow, d->ch, d->cw, d->interp, d->fill);
    return KC_STATUS_OK;
}

kc_status kc__cpu_sample2d_forward(kc_backend *be, const kc_sample2d_desc *d, const float *mats, const float *x,
                                   float *y) {
    (void)be;
    KC_TRY(sample_check(d, x, y, "sample2d_forward"));
    const int c = d->c;
    const int64_t rows = (int64_t)d->n * d->oh;
    KC_CPU_PAR_FOR(kc__cpu_par(rows * d->ow * c), schedule(static), for (int64_t row = 0; row < rows; row++) {
        const int n = (int)(row / d->oh), oy = (int)(row % d->oh);
        const float *m = mats ? mats + (int64_t)n * 6 : d->m;
        const float *xi = x + (int64_t)n * d->h * d->w * c;
        float *yr = y + row * d->ow * c;
        for (int ox = 0; ox < d->ow; ox++) {
            int64_t pix[4];
            float wt[4];
            int nt = kc__aug_taps(d, m, oy, ox, pix, wt);
            float *yp = yr + (int64_t)ox * c;
            for (int k = 0; k < c; k++) yp[k] = 0.0f;
            for (int t = 0; t < nt; t++) {
                const float w = wt[t];
                if (pix[t] < 0) {
                    for (int k = 0; k < c; k++) yp[k] += w * d->fill_value;
                } else {
                    const float *xp = xi + pix[t] * c;
                    for (int k = 0; k < c; k++) yp[k] += w * xp[k];
                }
            }
        }
    });
    return KC_STATUS_OK;
}

kc_status kc__cpu_sample2d_backward(kc_backend *be, const kc_sample2d_desc *d, const float *mats, const float *dy,
                                    float *dx) {
    (void)be;
    KC_TRY(sample_check(d, dy, dx, "sample2d_backward"));
    const int c = d->c;
    const int64_t img_in = (int64_t)d->h * d->w * c, img_out = (int64_t)d->oh * d->ow * c;
    KC_CPU_PAR_FOR(kc__cpu_par((int64_t)d->n * (img_in + img_out)), schedule(static), for (int n = 0; n < d->n; n++) {
        const float *m = mats ? mats + (int64_t)n * 6 : d->m;
        float *dxi = dx + n * img_in;
        memset(dxi, 0, (size_t)img_in * sizeof(float));
        for (int oy = 0; oy < d->oh; oy++) {
            for (int ox = 0; ox < d->ow; ox++) {
                int64_t pix[4];
                float wt[4];
                int nt = kc__aug_taps(d, m, oy, ox, pix, wt);
                const float *g = dy + n * img_out + ((int64_t)oy * d->ow + ox) * c;
                for (int t = 0; t < nt; t++) {
                    if (pix[t] < 0 || wt[t] == 0.0f) continue;
                    float *dp = dxi + pix[t] * c;
                    for (int k = 0; k < c; k++) dp[k] += wt[t] * g[k];
                }
            }
        }
    });
    return KC_STATUS_OK;
}

static kc_status color_check(const kc_color2d_desc *d, const void *p, const void *a, const void *b, const char *what) {
    if (!d || !p || !a || !b) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: NULL descriptor or tensor", what);
    if (d->n <= 0 || d->hw <= 0 || d->c <= 0 || d->c > AUG_MAX_C || !(d->lo <= d->hi))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu %s: bad colour descriptor (%d images of %d pixels x %d channels, range [%g, %g]); "
                        "channels must be 1..%d and lo <= hi",
                        what, d->n, d->hw, d->c, (double)d->lo, (double)d->hi, AUG_MAX_C);
    return KC_STATUS_OK;
}

/* Per-channel means of one image's v (hw x c), masked by y inside (lo, hi) when y is given. */
static void channel_means(const kc_color2d_desc *d, const float *v, const float *y, double *mean) {
    for (int k = 0; k < d->c; k++) mean[k] = 0.0;
    for (int64_t p = 0; p < d->hw; p++)
        for (int k = 0; k < d->c; k++) {
            int64_t i = p * d->c + k;
            if (!y || (y[i] > d->lo && y[i] < d->hi)) mean[k] += v[i];
        }
    for (int k = 0; k < d->c; k++) mean[k] /= (double)d->hw;
}

kc_status kc__cpu_color2d_forward(kc_backend *be, const kc_color2d_desc *d, const float *params, const float *x,
                                  float *y) {
    (void)be;
    KC_TRY(color_check(d, params, x, y, "color2d_forward"));
    const int64_t img = (int64_t)d->hw * d->c;
    KC_CPU_PAR_FOR(kc__cpu_par(d->n * img), schedule(static), for (int n = 0; n < d->n; n++) {
        double mean[AUG_MAX_C];
        const float f = params[2 * n], dd = params[2 * n + 1];
        const float *xi = x + n * img;
        float *yi = y + n * img;
        if (d->contrast) channel_means(d, xi, NULL, mean);
        for (int64_t i = 0; i < img; i++) {
            float m = d->contrast ? (float)mean[i % d->c] : 0.0f;
            float v = (xi[i] - m) * f + m + dd;
            yi[i] = v < d->lo ? d->lo : (v > d->hi ? d->hi : v);
        }
    });
    return KC_STATUS_OK;
}

kc_status kc__cpu_color2d_backward(kc_backend *be, const kc_color2d_desc *d, const float *params, const float *y,
                                   const float *dy, float *dx) {
    (void)be;
    KC_TRY(color_check(d, params, y, dy, "color2d_backward"));
    if (!dx) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu color2d_backward: NULL dx");
    const int64_t img = (int64_t)d->hw * d->c;
    KC_CPU_PAR_FOR(kc__cpu_par(d->n * img), schedule(static), for (int n = 0; n < d->n; n++) {
        double mg[AUG_MAX_C] = {0}; /* read only with contrast (set then); zeroed for the compiler */
        const float f = params[2 * n];
        const float *yi = y + n * img, *gi = dy + n * img;
        float *dxi = dx + n * img;
        if (d->contrast) channel_means(d, gi, yi, mg);
        for (int64_t i = 0; i < img; i++) {
            float g = yi[i] > d->lo && yi[i] < d->hi ? gi[i] : 0.0f;
            dxi[i] = f * g + (d->contrast ? (1.0f - f) * (float)mg[i % d->c] : 0.0f);
        }
    });
    return KC_STATUS_OK;
}
