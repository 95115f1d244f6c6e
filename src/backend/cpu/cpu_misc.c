/* cpu_misc.c — the CPU backend's elementwise and layout kernels: column sums, bias add
 * and gradient, dropout, add/axpy/scale, strided copies, zero padding, sum of squares. */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu.h"

/* ---- column sums with deterministic per-thread partials */

void kc__cpu_colsum(kc_cpu_colsum_kind kind, const float *a, const float *b, const float *p, int64_t rows,
                    int cols, int64_t ld, double *out1, double *out2) {
    kc__cpu_colsum_gs(kind, a, b, p, NULL, rows, cols, ld, out1, out2);
}

/* Thread t of tn's share of kc__cpu_colsum_gs: its rows' sums into sum1 and sum2 (cols). */
static void colsum_part(kc_cpu_colsum_kind kind, const float *a, const float *b, const float *p,
                        const kc_cpu_groupstats *gs, int64_t rows, int cols, int64_t ld, int t, int tn, double *sum1,
                        double *sum2) {
    const int64_t r0 = rows * t / tn, r1 = rows * (t + 1) / tn;
    double s1[KC_CPU_RED_COLS] = {0}, s2[KC_CPU_RED_COLS] = {0};
    switch (kind) {
    case KC_CPU_COLSUM_SUM:
        for (int64_t r = r0; r < r1; r++) {
            const float *ar = a + r * ld;
            for (int j = 0; j < cols; j++) s1[j] += (double)ar[j];
        }
        break;
    case KC_CPU_COLSUM_SUM_SQ:
        for (int64_t r = r0; r < r1; r++) {
            const float *ar = a + r * ld;
            for (int j = 0; j < cols; j++) {
                double v = (double)ar[j];
                s1[j] += v;
                s2[j] += v * v;
            }
        }
        break;
    case KC_CPU_COLSUM_DY_XC:
        for (int64_t r = r0; r < r1; r++) {
            const float *ar = a + r * ld, *br = b + r * ld;
            for (int j = 0; j < cols; j++) {
                double g = (double)br[j];
                s1[j] += g;
                s2[j] += g * ((double)ar[j] - (double)p[j]);
            }
        }
        break;
    case KC_CPU_COLSUM_DY_XHAT:
        for (int64_t r = r0; r < r1; r++) {
            const float *ar = a + r * ld, *br = b + r * ld;
            const int64_t e = r / gs->s * gs->groups;
            for (int j = 0; j < cols; j++) {
                const int64_t q = e + (gs->c0 + j) / gs->cg;
                const double g = (double)br[j];
                s1[j] += g;
                s2[j] += g * (double)((ar[j] - gs->mean[q]) * gs->inv[q]);
            }
        }
        break;
    }
    memcpy(sum1, s1, (size_t)cols * sizeof(double));
    memcpy(sum2, s2, (size_t)cols * sizeof(double));
}

void kc__cpu_colsum_gs(kc_cpu_colsum_kind kind, const float *a, const float *b, const float *p,
                       const kc_cpu_groupstats *gs, int64_t rows, int cols, int64_t ld, double *out1, double *out2) {
    double part1[KC_CPU_RED_THREADS][KC_CPU_RED_COLS]; /* per-thread partial sums */
    double part2[KC_CPU_RED_THREADS][KC_CPU_RED_COLS];
    int nt = 1, used = 1;
#ifdef _OPENMP
    if (kc__cpu_par(rows * cols)) nt = KC_MIN(kc__num_threads(), KC_CPU_RED_THREADS);
    if (nt < 1) nt = 1;
#endif
    /* one thread: no OpenMP region (libgomp would malloc a one-thread team for it) */
    if (nt > 1) {
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
        {
            const int t = omp_get_thread_num(), tn = omp_get_num_threads();
            if (t == 0) used = tn;
            colsum_part(kind, a, b, p, gs, rows, cols, ld, t, tn, part1[t], part2[t]);
        }
#endif
    } else {
        colsum_part(kind, a, b, p, gs, rows, cols, ld, 0, 1, part1[0], part2[0]);
    }
    for (int j = 0; j < cols; j++) {
        double v1 = 0, v2 = 0;
        for (int t = 0; t < used; t++) {
            v1 += part1[t][j];
            v2 += part2[t][j];
        }
        out1[j] = v1;
        if (out2) out2[j] = v2;
    }
}

/* ---- bias */

kc_status kc__cpu_bias_add(kc_backend *be, float *y, const float *bias, int64_t rows, int cols) {
    if (rows < 0 || cols < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu bias_add: negative size (%lld, %d)", (long long)rows, cols);
    if (rows == 0 || cols == 0) return KC_STATUS_OK;
    if (!y || !bias) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu bias_add: NULL y or bias");
    KC_CPU_PAR_FOR(kc__cpu_par(rows * cols), schedule(static), for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * cols; /* (cols) */
        for (int j = 0; j < cols; j++) yr[j] += bias[j];
    });
    return KC_STATUS_OK;
}

kc_status kc__cpu_bias_grad(kc_backend *be, const float *dy, float *db, int64_t rows, int cols) {
    if (rows < 0 || cols < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu bias_grad: negative size (%lld, %d)", (long long)rows, cols);
    if (cols == 0) return KC_STATUS_OK;
    if (!db || (rows > 0 && !dy)) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu bias_grad: NULL dy or db");
    for (int c0 = 0; c0 < cols; c0 += KC_CPU_RED_COLS) {
        const int cb = KC_MIN(KC_CPU_RED_COLS, cols - c0);
        double s[KC_CPU_RED_COLS];
        kc__cpu_colsum(KC_CPU_COLSUM_SUM, dy + c0, NULL, NULL, rows, cb, cols, s, NULL);
        for (int j = 0; j < cb; j++) db[c0 + j] = (float)s[j];
    }
    return KC_STATUS_OK;
}

/* ---- dropout */

static kc_status dropout_check(const char *what, float rate, int64_t n) {
    if (n < 0) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: negative size %lld", what, (long long)n);
    if (!(rate >= 0.0f && rate < 1.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: rate %g is outside [0, 1); use a Dropout rate in [0, 1)",
                        what, (double)rate);
    return KC_STATUS_OK;
}

kc_status kc__cpu_dropout_forward(kc_backend *be, const float *x, float *y, uint8_t *mask, int64_t n, float rate,
                                  uint64_t seed) {
    KC_TRY(dropout_check("dropout_forward", rate, n));
    if (n == 0) return KC_STATUS_OK;
    if (!x || !y || !mask) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu dropout_forward: NULL x, y or mask");
    const float keep_frac = 1.0f - rate;
    KC_CPU_PAR_FOR(kc__cpu_par(n), schedule(static), for (int64_t i = 0; i < n; i++) {
        const int keep = kc__hash_uniform(seed, (uint64_t)i) >= rate;
        mask[i] = (uint8_t)keep;
        y[i] = keep ? x[i] / keep_frac : 0.0f;
    });
    return KC_STATUS_OK;
}

kc_status kc__cpu_dropout_backward(kc_backend *be, const float *dy, const uint8_t *mask, float *dx, int64_t n,
                                   float rate) {
    KC_TRY(dropout_check("dropout_backward", rate, n));
    if (n == 0) return KC_STATUS_OK;
    if (!dy || !dx || !mask) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu dropout_backward: NULL dy, dx or mask");
    const float keep_frac = 1.0f - rate;
    KC_CPU_PAR_FOR(kc__cpu_par(n), schedule(static),
    for (int64_t i = 0; i < n; i++) { dx[i] = mask[i] ? dy[i] / keep_frac : 0.0f; });
    return KC_STATUS_OK;
}

/* ---- elementwise */

#define KC_CPU_CHECK_N(what, n)                                                                                   \
    do {                                                                                                          \
        if ((n) < 0)                                                                                              \
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: negative size %lld", what, (long long)(n));     \
        if ((n) == 0) return KC_STATUS_OK;                                                                        \
    } while (0)

kc_status kc__cpu_add(kc_backend *be, float *y, const float *a, const float *b, int64_t n) {
    KC_CPU_CHECK_N("add", n);
    if (!y || !a || !b) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu add: NULL pointer");
    KC_CPU_PAR_FOR(kc__cpu_par(n), schedule(static), for (int64_t i = 0; i < n; i++) { y[i] = a[i] + b[i]; });
    return KC_STATUS_OK;
}

kc_status kc__cpu_add_relu(kc_backend *be, float *y, const float *a, const float *b, int64_t n, float relu_max) {
    KC_CPU_CHECK_N("add_relu", n);
    if (!y || !a || !b) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu add_relu: NULL pointer");
    if (!(relu_max >= 0.0f)) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu add_relu: relu_max %g is negative", relu_max);
    if (relu_max > 0.0f)
        KC_CPU_PAR_FOR(kc__cpu_par(n), schedule(static), for (int64_t i = 0; i < n; i++) {
            const float s = a[i] + b[i];
            y[i] = s > 0.0f ? (s < relu_max ? s : relu_max) : 0.0f;
        });
    else
        KC_CPU_PAR_FOR(kc__cpu_par(n), schedule(static), for (int64_t i = 0; i < n; i++) {
            const float s = a[i] + b[i];
            y[i] = s > 0.0f ? s : 0.0f;
        });
    return KC_STATUS_OK;
}

kc_status kc__cpu_axpy(kc_backend *be, float *y, const float *x, float alpha, int64_t n) {
    KC_CPU_CHECK_N("axpy", n);
    if (!y || !x) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu axpy: NULL pointer");
    KC_CPU_PAR_FOR(kc__cpu_par(n), schedule(static), for (int64_t i = 0; i < n; i++) { y[i] += alpha * x[i]; });
    return KC_STATUS_OK;
}

kc_status kc__cpu_scale(kc_backend *be, float *y, float alpha, int64_t n) {
    KC_CPU_CHECK_N("scale", n);
    if (!y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu scale: NULL pointer");
    KC_CPU_PAR_FOR(kc__cpu_par(n), schedule(static), for (int64_t i = 0; i < n; i++) { y[i] *= alpha; });
    return KC_STATUS_OK;
}

kc_status kc__cpu_sum_squares(kc_backend *be, const float *x, int64_t n, float *out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu sum_squares: NULL output");
    if (n < 0) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu sum_squares: negative size %lld", (long long)n);
    if (n > 0 && !x) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu sum_squares: NULL input");
    double s = 0.0;
    KC_CPU_PAR_FOR(kc__cpu_par(n), schedule(static) reduction(+ : s),
    for (int64_t i = 0; i < n; i++) { s += (double)x[i] * (double)x[i]; });
    *out = (float)s;
    return KC_STATUS_OK;
}

/* ---- layout */

kc_status kc__cpu_copy_strided(kc_backend *be, float *dst, int dst_ld, int dst_off, const float *src, int src_ld,
                               int src_off, int64_t rows, int cols) {
    if (rows < 0 || cols < 0 || dst_off < 0 || src_off < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu copy_strided: negative size or offset");
    if (rows == 0 || cols == 0) return KC_STATUS_OK;
    if (!dst || !src) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu copy_strided: NULL pointer");
    if ((rows > 1 && (dst_ld < dst_off + cols || src_ld < src_off + cols)))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu copy_strided: block of %d columns at offsets %d/%d does not fit rows of %d/%d", cols,
                        dst_off, src_off, dst_ld, src_ld);
    KC_CPU_PAR_FOR(kc__cpu_par(rows * cols), schedule(static), for (int64_t r = 0; r < rows; r++) {
        memcpy(dst + r * dst_ld + dst_off, src + r * src_ld + src_off, (size_t)cols * sizeof(float));
    });
    return KC_STATUS_OK;
}

static kc_status pad_check(const char *what, const float *a, const float *b, int n, int h, int w, int c, int top,
                           int bottom, int left, int right) {
    if (n < 0 || h < 0 || w < 0 || c < 0 || top < 0 || bottom < 0 || left < 0 || right < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu %s: negative size or padding (input %dx%dx%dx%d, padding %d,%d,%d,%d)", what, n, h, w,
                        c, top, bottom, left, right);
    if ((int64_t)n * h * w * c > 0 && (!a || !b))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: NULL pointer", what);
    return KC_STATUS_OK;
}

kc_status kc__cpu_pad2d_forward(kc_backend *be, const float *x, float *y, int n, int h, int w, int c, int top,
                                int bottom, int left, int right) {
    KC_TRY(pad_check("pad2d_forward", x, y, n, h, w, c, top, bottom, left, right));
    const int ph = h + top + bottom, pw = w + left + right;
    const int64_t rows = (int64_t)n * ph; /* (image, padded row) */
    if (rows == 0 || (int64_t)pw * c == 0) return KC_STATUS_OK;
    KC_CPU_PAR_FOR(kc__cpu_par(rows * pw * c), schedule(static), for (int64_t r = 0; r < rows; r++) {
        const int img = (int)(r / ph), py = (int)(r % ph), iy = py - top;
        float *yr = y + (size_t)r * pw * c; /* (PW, C) */
        if (iy < 0 || iy >= h) {
            memset(yr, 0, (size_t)pw * c * sizeof(float));
            continue;
        }
        memset(yr, 0, (size_t)left * c * sizeof(float));
        memcpy(yr + (size_t)left * c, x + ((size_t)img * h + iy) * w * c, (size_t)w * c * sizeof(float));
        memset(yr + (size_t)(left + w) * c, 0, (size_t)right * c * sizeof(float));
    });
    return KC_STATUS_OK;
}

kc_status kc__cpu_pad2d_backward(kc_backend *be, const float *dy, float *dx, int n, int h, int w, int c, int top,
                                 int bottom, int left, int right) {
    KC_TRY(pad_check("pad2d_backward", dy, dx, n, h, w, c, top, bottom, left, right));
    const int ph = h + top + bottom, pw = w + left + right;
    const int64_t rows = (int64_t)n * h; /* (image, row) of dx */
    if (rows == 0 || (int64_t)w * c == 0) return KC_STATUS_OK;
    KC_CPU_PAR_FOR(kc__cpu_par(rows * w * c), schedule(static), for (int64_t r = 0; r < rows; r++) {
        const int img = (int)(r / h), iy = (int)(r % h);
        memcpy(dx + (size_t)r * w * c, dy + (((size_t)img * ph + iy + top) * pw + left) * c,
               (size_t)w * c * sizeof(float));
    });
    return KC_STATUS_OK;
}
