/* cpu_norm.c — batch normalization over (rows, c): rows = N*H*W (or N for Dense
 * outputs), statistics per channel (the last axis).
 *
 * Training uses the batch mean and the biased batch variance (sums in double), saves
 * mean and inv_std = 1/sqrt(var + eps) for backward and updates the moving statistics
 * as Keras 3: moving = moving * momentum + batch * (1 - momentum).
 * gamma NULL means 1 (scale=False), beta NULL means 0 (center=False).
 * Channels are processed in blocks of KC_CPU_RED_COLS so per-channel coefficients live
 * on the stack; rows run in parallel. */
#include <math.h>

#include "cpu.h"

static kc_status bn_check(const char *what, const float *x, const float *y, int64_t rows, int c) {
    if (rows <= 0 || c <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: bad size (%lld rows, %d channels); both must be positive",
                        what, (long long)rows, c);
    if (!x || !y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: NULL input or output", what);
    return KC_STATUS_OK;
}

/* y[r, c0+j] = (x[r, c0+j] - sub[j]) * mul[j] + add[j] for j < cb. */
static void bn_apply(const float *x, float *y, int64_t rows, int c, int c0, int cb, const float *sub,
                     const float *mul, const float *add) {
#pragma omp parallel for schedule(static) if (kc__cpu_par(rows * cb))
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c + c0;
        float *yr = y + r * c + c0;
        for (int j = 0; j < cb; j++) yr[j] = (xr[j] - sub[j]) * mul[j] + add[j];
    }
}

kc_status kc__cpu_batchnorm_forward_train(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                          const float *gamma, const float *beta, float *moving_mean,
                                          float *moving_var, float momentum, float epsilon, float *save_mean,
                                          float *save_inv_std) {
    KC_TRY(bn_check("batchnorm_forward_train", x, y, rows, c));
    if (!save_mean || !save_inv_std)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_forward_train: NULL save_mean or save_inv_std");
    if (!(epsilon > 0.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_forward_train: epsilon %g must be > 0",
                        (double)epsilon);
    for (int c0 = 0; c0 < c; c0 += KC_CPU_RED_COLS) {
        const int cb = KC_MIN(KC_CPU_RED_COLS, c - c0);
        double s[KC_CPU_RED_COLS], sq[KC_CPU_RED_COLS];
        kc__cpu_colsum(KC_CPU_COLSUM_SUM_SQ, x + c0, NULL, NULL, rows, cb, c, s, sq);
        float mean[KC_CPU_RED_COLS], mul[KC_CPU_RED_COLS], add[KC_CPU_RED_COLS];
        for (int j = 0; j < cb; j++) {
            const int ch = c0 + j;
            const double m = s[j] / (double)rows;
            double var = sq[j] / (double)rows - m * m;
            if (var < 0) var = 0;
            const float inv = (float)(1.0 / sqrt(var + (double)epsilon));
            mean[j] = (float)m;
            save_mean[ch] = (float)m;
            save_inv_std[ch] = inv;
            mul[j] = (gamma ? gamma[ch] : 1.0f) * inv;
            add[j] = beta ? beta[ch] : 0.0f;
            if (moving_mean) moving_mean[ch] = moving_mean[ch] * momentum + (float)m * (1.0f - momentum);
            if (moving_var) moving_var[ch] = moving_var[ch] * momentum + (float)var * (1.0f - momentum);
        }
        bn_apply(x, y, rows, c, c0, cb, mean, mul, add);
    }
    return KC_STATUS_OK;
}

kc_status kc__cpu_batchnorm_forward_infer(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                          const float *gamma, const float *beta, const float *moving_mean,
                                          const float *moving_var, float epsilon) {
    KC_TRY(bn_check("batchnorm_forward_infer", x, y, rows, c));
    if (!moving_mean || !moving_var)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_forward_infer: NULL moving mean or variance");
    for (int c0 = 0; c0 < c; c0 += KC_CPU_RED_COLS) {
        const int cb = KC_MIN(KC_CPU_RED_COLS, c - c0);
        float mul[KC_CPU_RED_COLS], add[KC_CPU_RED_COLS];
        for (int j = 0; j < cb; j++) {
            const int ch = c0 + j;
            const float inv = 1.0f / sqrtf(moving_var[ch] + epsilon);
            mul[j] = (gamma ? gamma[ch] : 1.0f) * inv;
            add[j] = beta ? beta[ch] : 0.0f;
        }
        bn_apply(x, y, rows, c, c0, cb, moving_mean + c0, mul, add);
    }
    return KC_STATUS_OK;
}

kc_status kc__cpu_batchnorm_backward(kc_backend *be, const float *x, const float *dy, float *dx, int64_t rows, int c,
                                     const float *gamma, const float *save_mean, const float *save_inv_std,
                                     float *dgamma, float *dbeta) {
    KC_TRY(bn_check("batchnorm_backward", x, dx, rows, c));
    if (!dy || !save_mean || !save_inv_std)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_backward: NULL dy or saved statistics");
    const double inv_n = 1.0 / (double)rows;
    for (int c0 = 0; c0 < c; c0 += KC_CPU_RED_COLS) {
        const int cb = KC_MIN(KC_CPU_RED_COLS, c - c0);
        double sdy[KC_CPU_RED_COLS], sdyxc[KC_CPU_RED_COLS]; /* sum dy, sum dy * (x - mean) */
        kc__cpu_colsum(KC_CPU_COLSUM_DY_XC, x + c0, dy + c0, save_mean + c0, rows, cb, c, sdy, sdyxc);
        /* dx = g*inv * (dy - mean(dy) - xhat * mean(dy * xhat)), xhat = (x - mean) * inv
         *    = k1 * dy + k2 * (x - mean) + k3 */
        float k1[KC_CPU_RED_COLS], k2[KC_CPU_RED_COLS], k3[KC_CPU_RED_COLS];
        for (int j = 0; j < cb; j++) {
            const int ch = c0 + j;
            const double inv = save_inv_std[ch], g = gamma ? gamma[ch] : 1.0;
            const double dg = sdyxc[j] * inv; /* sum dy * xhat */
            if (dgamma) dgamma[ch] = (float)dg;
            if (dbeta) dbeta[ch] = (float)sdy[j];
            k1[j] = (float)(g * inv);
            k2[j] = (float)(-g * inv * inv * dg * inv_n);
            k3[j] = (float)(-g * inv * sdy[j] * inv_n);
        }
        const float *mean = save_mean + c0;
#pragma omp parallel for schedule(static) if (kc__cpu_par(rows * cb))
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * c + c0, *gr = dy + r * c + c0;
            float *o = dx + r * c + c0;
            for (int j = 0; j < cb; j++) o[j] = k1[j] * gr[j] + k2[j] * (xr[j] - mean[j]) + k3[j];
        }
    }
    return KC_STATUS_OK;
}
