/* cpu_norm.c — batch normalization over (rows, c): rows = N*H*W (or N for Dense
 * outputs), statistics per channel (the last axis).
 *
 * Training uses the batch mean and the biased batch variance (sums in double, of float
 * partial sums over blocks of BN_ROW_BLOCK rows), saves
 * mean and inv_std = 1/sqrt(var + eps) for backward and updates the moving statistics
 * as Keras 3: moving = moving * momentum + batch * (1 - momentum).
 * gamma NULL means 1 (scale=False), beta NULL means 0 (center=False).
 * Up to BN_ONE_PASS channels are processed together (one walk over the rows for the sums,
 * one for the normalisation), wider inputs in blocks of KC_CPU_RED_COLS; the per-channel
 * coefficients live on the stack; rows run in parallel.
 * The _relu entries (mnv2-speed) are the same with a ReLU after the normalisation: the
 * forward clips in the normalising pass, the backward masks dy where the ReLU passed
 * nothing while it sums and while it writes dx, so neither needs a pass of its own. */
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu.h"

static kc_status bn_check(const char *what, const float *x, const float *y, int64_t rows, int c) {
    if (rows <= 0 || c <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: bad size (%lld rows, %d channels); both must be positive",
                        what, (long long)rows, c);
    if (!x || !y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: NULL input or output", what);
    return KC_STATUS_OK;
}

/* One pass over all channels when there are at most BN_ONE_PASS of them (ResNet50's 2048): the sums of
 * every channel from one walk over the rows, and the normalisation in one more; wider inputs go in blocks
 * of KC_CPU_RED_COLS channels, one walk over the rows per block (the coefficients on the stack). */
#define BN_ONE_PASS 2048
/* Rows summed in float before each addition into the double totals. */
#define BN_ROW_BLOCK 32

/* The ReLU of the fused entries: on, and its upper clip (INFINITY when none). */
typedef struct bn_relu {
    int on;
    float hi;
} bn_relu;
static bn_relu bn_relu_of(float relu_max) { return (bn_relu){1, relu_max > 0.0f ? relu_max : INFINITY}; }
static const bn_relu BN_NO_RELU = {0, INFINITY};

/* A column block of a (rows, ld) matrix: columns [c0, c0 + cb). */
typedef struct bn_cols {
    int64_t rows;
    int ld, c0, cb;
} bn_cols;

/* Float sums over rows [r0, re) into f1, f2 (see bn_sums); dy rows masked by the ReLU's y when rl.on. */
static void bn_sums_rows(const float *a, const float *dy, const float *y, bn_relu rl, const float *p, bn_cols k,
                         int64_t r0, int64_t re, float *f1, float *f2) {
    const int cb = k.cb;
    for (int64_t r = r0; r < re; r++) {
        const float *ar = a + r * k.ld + k.c0;
        if (!dy) {
            for (int j = 0; j < cb; j++) {
                const float v = ar[j] - p[j];
                f1[j] += v, f2[j] += v * v;
            }
            continue;
        }
        const float *gr = dy + r * k.ld + k.c0;
        if (rl.on) {
            const float *yr = y + r * k.ld + k.c0;
            for (int j = 0; j < cb; j++) {
                const float g = yr[j] > 0.0f && yr[j] < rl.hi ? gr[j] : 0.0f;
                f1[j] += g, f2[j] += g * (ar[j] - p[j]);
            }
        } else {
            for (int j = 0; j < cb; j++) f1[j] += gr[j], f2[j] += gr[j] * (ar[j] - p[j]);
        }
    }
}

/* With p[j] a centre per channel of the block: out1[j] = sum_r (a[r, j] - p[j]), out2[j] = sum_r (a - p)^2
 * (dy == NULL; forward, p = the first row, so that the float partial sums do not lose the variance to a
 * large mean) or out1 = sum_r g[r, j], out2 = sum_r g * (a - p) with g = dy, masked by the ReLU's y when
 * rl.on (backward, p = the mean); cb <= BN_ONE_PASS. Each thread sums its rows (in float over blocks of
 * BN_ROW_BLOCK rows, then in double), and the threads' sums are added in thread order (reproducible for
 * a fixed thread count). */
static void bn_sums(const float *a, const float *dy, const float *y, bn_relu rl, const float *p, bn_cols k,
                    double *out1, double *out2) {
    const int cb = k.cb;
    for (int j = 0; j < cb; j++) out1[j] = out2[j] = 0.0;
#pragma omp parallel if (kc__cpu_par(k.rows * cb))
    {
        int t = 0, tn = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        tn = omp_get_num_threads();
#endif
        double d1[BN_ONE_PASS], d2[BN_ONE_PASS];
        float f1[BN_ONE_PASS], f2[BN_ONE_PASS];
        for (int j = 0; j < cb; j++) d1[j] = d2[j] = 0.0;
        const int64_t r1 = k.rows * (t + 1) / tn;
        for (int64_t r0 = k.rows * t / tn; r0 < r1; r0 += BN_ROW_BLOCK) {
            for (int j = 0; j < cb; j++) f1[j] = f2[j] = 0.0f;
            bn_sums_rows(a, dy, y, rl, p, k, r0, KC_MIN(r1, r0 + BN_ROW_BLOCK), f1, f2);
            for (int j = 0; j < cb; j++) d1[j] += f1[j], d2[j] += f2[j];
        }
#pragma omp for ordered schedule(static, 1)
        for (int i = 0; i < tn; i++) {
#pragma omp ordered
            for (int j = 0; j < cb; j++) out1[j] += d1[j], out2[j] += d2[j];
        }
    }
}

/* Channels per walk over the rows: all of them, or blocks of KC_CPU_RED_COLS. */
static int bn_block(int c) { return c <= BN_ONE_PASS ? c : KC_CPU_RED_COLS; }

/* y[r, c0+j] = (x[r, c0+j] - sub[j]) * mul[j] + add[j] for j < cb, clipped to [0, hi] when rl.on. */
static void bn_apply(const float *x, float *y, bn_cols k, const float *sub, const float *mul, const float *add,
                     bn_relu rl) {
    const int cb = k.cb;
#pragma omp parallel for schedule(static) if (kc__cpu_par(k.rows * cb))
    for (int64_t r = 0; r < k.rows; r++) {
        const float *xr = x + r * k.ld + k.c0;
        float *yr = y + r * k.ld + k.c0;
        if (rl.on) /* compares, not fminf/fmaxf: those keep NaN rules that do not vectorise */
            for (int j = 0; j < cb; j++) {
                const float v = (xr[j] - sub[j]) * mul[j] + add[j], p = v > 0.0f ? v : 0.0f;
                yr[j] = p < rl.hi ? p : rl.hi;
            }
        else
            for (int j = 0; j < cb; j++) yr[j] = (xr[j] - sub[j]) * mul[j] + add[j];
    }
}

static kc_status bn_forward_train(const float *x, float *y, int64_t rows, int c, const float *gamma,
                                  const float *beta, float *moving_mean, float *moving_var, float momentum,
                                  float epsilon, float *save_mean, float *save_inv_std, bn_relu rl) {
    KC_TRY(bn_check("batchnorm_forward_train", x, y, rows, c));
    if (!save_mean || !save_inv_std)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_forward_train: NULL save_mean or save_inv_std");
    if (!(epsilon > 0.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_forward_train: epsilon %g must be > 0",
                        (double)epsilon);
    const int bw = bn_block(c);
    for (int c0 = 0; c0 < c; c0 += bw) {
        const bn_cols k = {rows, c, c0, KC_MIN(bw, c - c0)};
        double s[BN_ONE_PASS], sq[BN_ONE_PASS];
        bn_sums(x, NULL, NULL, BN_NO_RELU, x + c0, k, s, sq); /* centred on the first row */
        float mean[BN_ONE_PASS], mul[BN_ONE_PASS], add[BN_ONE_PASS];
        for (int j = 0; j < k.cb; j++) {
            const int ch = c0 + j;
            const double d = s[j] / (double)rows, m = (double)x[ch] + d;
            double var = sq[j] / (double)rows - d * d;
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
        bn_apply(x, y, k, mean, mul, add, rl);
    }
    return KC_STATUS_OK;
}

kc_status kc__cpu_batchnorm_forward_train(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                          const float *gamma, const float *beta, float *moving_mean,
                                          float *moving_var, float momentum, float epsilon, float *save_mean,
                                          float *save_inv_std) {
    return bn_forward_train(x, y, rows, c, gamma, beta, moving_mean, moving_var, momentum, epsilon, save_mean,
                            save_inv_std, BN_NO_RELU);
}

kc_status kc__cpu_batchnorm_relu_forward_train(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                               const float *gamma, const float *beta, float *moving_mean,
                                               float *moving_var, float momentum, float epsilon, float *save_mean,
                                               float *save_inv_std, float relu_max) {
    return bn_forward_train(x, y, rows, c, gamma, beta, moving_mean, moving_var, momentum, epsilon, save_mean,
                            save_inv_std, bn_relu_of(relu_max));
}

static kc_status bn_forward_infer(const float *x, float *y, int64_t rows, int c, const float *gamma,
                                  const float *beta, const float *moving_mean, const float *moving_var,
                                  float epsilon, bn_relu rl) {
    KC_TRY(bn_check("batchnorm_forward_infer", x, y, rows, c));
    if (!moving_mean || !moving_var)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_forward_infer: NULL moving mean or variance");
    const int bw = bn_block(c);
    for (int c0 = 0; c0 < c; c0 += bw) {
        const bn_cols k = {rows, c, c0, KC_MIN(bw, c - c0)};
        float mul[BN_ONE_PASS], add[BN_ONE_PASS];
        for (int j = 0; j < k.cb; j++) {
            const int ch = c0 + j;
            const float inv = 1.0f / sqrtf(moving_var[ch] + epsilon);
            mul[j] = (gamma ? gamma[ch] : 1.0f) * inv;
            add[j] = beta ? beta[ch] : 0.0f;
        }
        bn_apply(x, y, k, moving_mean + c0, mul, add, rl);
    }
    return KC_STATUS_OK;
}

kc_status kc__cpu_batchnorm_forward_infer(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                          const float *gamma, const float *beta, const float *moving_mean,
                                          const float *moving_var, float epsilon) {
    return bn_forward_infer(x, y, rows, c, gamma, beta, moving_mean, moving_var, epsilon, BN_NO_RELU);
}

kc_status kc__cpu_batchnorm_relu_forward_infer(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                               const float *gamma, const float *beta, const float *moving_mean,
                                               const float *moving_var, float epsilon, float relu_max) {
    return bn_forward_infer(x, y, rows, c, gamma, beta, moving_mean, moving_var, epsilon, bn_relu_of(relu_max));
}

/* dx = k1 * g + k2 * (x - mean) + k3 over a block of channels, g = dy masked by the ReLU's y when rl.on. */
static void bn_backward_apply(const float *x, const float *y, const float *dy, float *dx, bn_cols k,
                              const float *mean, const float *k1, const float *k2, const float *k3, bn_relu rl) {
    const int cb = k.cb;
#pragma omp parallel for schedule(static) if (kc__cpu_par(k.rows * cb))
    for (int64_t r = 0; r < k.rows; r++) {
        const size_t at = (size_t)r * k.ld + k.c0;
        const float *xr = x + at, *gr = dy + at;
        float *o = dx + at;
        if (rl.on) {
            const float *yr = y + at;
            for (int j = 0; j < cb; j++) {
                const float g = yr[j] > 0.0f && yr[j] < rl.hi ? gr[j] : 0.0f;
                o[j] = k1[j] * g + k2[j] * (xr[j] - mean[j]) + k3[j];
            }
        } else {
            for (int j = 0; j < cb; j++) o[j] = k1[j] * gr[j] + k2[j] * (xr[j] - mean[j]) + k3[j];
        }
    }
}

static kc_status bn_backward(const float *x, const float *y, const float *dy, float *dx, int64_t rows, int c,
                             const float *gamma, const float *save_mean, const float *save_inv_std, float *dgamma,
                             float *dbeta, bn_relu rl) {
    KC_TRY(bn_check("batchnorm_backward", x, dx, rows, c));
    if (!dy || !save_mean || !save_inv_std)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_backward: NULL dy or saved statistics");
    if (rl.on && !y)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_relu_backward: NULL y (the fused forward's output)");
    const double inv_n = 1.0 / (double)rows;
    const int bw = bn_block(c);
    for (int c0 = 0; c0 < c; c0 += bw) {
        const bn_cols k = {rows, c, c0, KC_MIN(bw, c - c0)};
        double sdy[BN_ONE_PASS], sdyxc[BN_ONE_PASS]; /* sum dy, sum dy * (x - mean) */
        bn_sums(x, dy, y, rl, save_mean + c0, k, sdy, sdyxc);
        /* dx = g*inv * (dy - mean(dy) - xhat * mean(dy * xhat)), xhat = (x - mean) * inv
         *    = k1 * dy + k2 * (x - mean) + k3 */
        float k1[BN_ONE_PASS], k2[BN_ONE_PASS], k3[BN_ONE_PASS];
        for (int j = 0; j < k.cb; j++) {
            const int ch = c0 + j;
            const double inv = save_inv_std[ch], g = gamma ? gamma[ch] : 1.0;
            const double dg = sdyxc[j] * inv; /* sum dy * xhat */
            if (dgamma) dgamma[ch] = (float)dg;
            if (dbeta) dbeta[ch] = (float)sdy[j];
            k1[j] = (float)(g * inv);
            k2[j] = (float)(-g * inv * inv * dg * inv_n);
            k3[j] = (float)(-g * inv * sdy[j] * inv_n);
        }
        bn_backward_apply(x, y, dy, dx, k, save_mean + c0, k1, k2, k3, rl);
    }
    return KC_STATUS_OK;
}

kc_status kc__cpu_batchnorm_backward(kc_backend *be, const float *x, const float *dy, float *dx, int64_t rows, int c,
                                     const float *gamma, const float *save_mean, const float *save_inv_std,
                                     float *dgamma, float *dbeta) {
    return bn_backward(x, NULL, dy, dx, rows, c, gamma, save_mean, save_inv_std, dgamma, dbeta, BN_NO_RELU);
}

kc_status kc__cpu_batchnorm_relu_backward(kc_backend *be, const float *x, const float *y, const float *dy, float *dx,
                                          int64_t rows, int c, const float *gamma, const float *save_mean,
                                          const float *save_inv_std, float *dgamma, float *dbeta, float relu_max) {
    return bn_backward(x, y, dy, dx, rows, c, gamma, save_mean, save_inv_std, dgamma, dbeta, bn_relu_of(relu_max));
}
