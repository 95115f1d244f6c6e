/* cuda_ops.c — the CUDA backend's table entries other than memory and convolution: GEMM
 * through cuBLAS, everything else through the module's own kernels (cuda_kernels.h).
 * Argument checks and their messages follow the CPU backend's (src/backend/cpu/), so that
 * a bad call fails the same way on both; the kernels then compute the CPU's formulas. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "cuda_internal.h"

#define LAUNCH(be, what, call) return kc__cu_launched((be), (what), (call))

static const kc_cu_launch *L_of(kc_backend *be) { return &kc__cu(be)->L; }

/* ---- GEMM: row-major C (m, n) = alpha op(A) op(B) + beta C. cuBLAS is column-major, and a
 * row-major matrix read column-major is its transpose, so C^T = op(B)^T op(A)^T is one
 * column-major call with the operands swapped. */
kc_status kc__cu_gemm(kc_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                      int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (m < 0 || n < 0 || k < 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda gemm: negative size m=%d n=%d k=%d", m, n, k);
    if (m == 0 || n == 0) return KC_STATUS_OK;
    int a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
    if (lda < KC_CU_MAX(1, a_cols) || ldb < KC_CU_MAX(1, b_cols) || ldc < n)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda gemm: leading dimension too small (lda=%d needs >= %d, ldb=%d needs >= %d, ldc=%d "
                           "needs >= %d)",
                           lda, KC_CU_MAX(1, a_cols), ldb, KC_CU_MAX(1, b_cols), ldc, n);
    if (!c || (k > 0 && (!a || !b))) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda gemm: NULL matrix pointer");
    KC_TRY(kc__cu_enter(be));
    if (k == 0) LAUNCH(be, "gemm (k = 0: C = beta C)", kc__k_scale_rows(L_of(be), c, m, n, ldc, beta));
    cublasStatus_t s = cublasSgemm(kc__cu(be)->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc);
    if (s != CUBLAS_STATUS_SUCCESS) return kc__cu_cublas_fail(be, "cublasSgemm", s);
    return kc__cu_launched(be, "cublasSgemm", cudaSuccess);
}

/* ---- bias */

kc_status kc__cu_bias_add(kc_backend *be, float *y, const float *bias, int64_t rows, int cols) {
    if (rows < 0 || cols < 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda bias_add: negative size (%lld, %d)", (long long)rows,
                           cols);
    if (rows == 0 || cols == 0) return KC_STATUS_OK;
    if (!y || !bias) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda bias_add: NULL y or bias");
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "bias_add", kc__k_bias_add(L_of(be), y, bias, rows, cols));
}

kc_status kc__cu_bias_grad(kc_backend *be, const float *dy, float *db, int64_t rows, int cols) {
    if (rows < 0 || cols < 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda bias_grad: negative size (%lld, %d)", (long long)rows,
                           cols);
    if (cols == 0) return KC_STATUS_OK;
    if (!db || (rows > 0 && !dy)) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda bias_grad: NULL dy or db");
    KC_TRY(kc__cu_enter(be));
    void *scratch = NULL;
    KC_TRY(kc__cu_scratch(be, kc__k_colsum_scratch(rows, cols), &scratch));
    LAUNCH(be, "bias_grad", kc__k_bias_grad(L_of(be), dy, db, rows, cols, scratch));
}

/* ---- pooling */

static kc_status pool_check(kc_backend *be, const kc_pool2d_desc *d, const char *what) {
    if (!d) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: the descriptor is NULL", what);
    if (d->kind != KC_POOL_MAX && d->kind != KC_POOL_AVG)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: unknown pooling kind %d", what, (int)d->kind);
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->kh <= 0 || d->kw <= 0 || d->sh <= 0 || d->sw <= 0 ||
        d->oh <= 0 || d->ow <= 0 || d->pad_top < 0 || d->pad_left < 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda %s: bad pooling descriptor (input %dx%dx%dx%d, pool %dx%d, strides %dx%d, pad %d,%d, "
                           "output %dx%d): every size must be positive and padding >= 0",
                           what, d->n, d->h, d->w, d->c, d->kh, d->kw, d->sh, d->sw, d->pad_top, d->pad_left, d->oh,
                           d->ow);
    if ((int64_t)d->n * d->h * d->w * d->c > INT32_MAX)
        return kc__cu_fail(be, KC_STATUS_UNSUPPORTED,
                           "cuda %s: input of %lld elements is too large for the int32 pooling mask; use a smaller "
                           "batch",
                           what, (long long)d->n * d->h * d->w * d->c);
    return KC_STATUS_OK;
}

kc_status kc__cu_pool2d_forward(kc_backend *be, const kc_pool2d_desc *d, const float *x, float *y, int32_t *mask) {
    KC_TRY(pool_check(be, d, "pool2d_forward"));
    if (!x || !y) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda pool2d_forward: NULL x or y");
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, d->kind == KC_POOL_MAX ? "max pooling forward" : "average pooling forward",
           kc__k_pool_forward(L_of(be), d, x, y, mask));
}

kc_status kc__cu_pool2d_backward(kc_backend *be, const kc_pool2d_desc *d, const float *dy, const int32_t *mask,
                                 float *dx) {
    KC_TRY(pool_check(be, d, "pool2d_backward"));
    if (!dy || !dx) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda pool2d_backward: NULL dy or dx");
    if (d->kind == KC_POOL_MAX && !mask)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda pool2d_backward: max pooling needs the mask from forward");
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, d->kind == KC_POOL_MAX ? "max pooling backward" : "average pooling backward",
           kc__k_pool_backward(L_of(be), d, dy, mask, dx));
}

kc_status kc__cu_gap_forward(kc_backend *be, const float *x, float *y, int n, int hw, int c) {
    if (n < 0 || hw <= 0 || c < 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda global_avg_pool_forward: bad size (%d, %d, %d)", n, hw,
                           c);
    if (n == 0 || c == 0) return KC_STATUS_OK;
    if (!x || !y) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda global_avg_pool_forward: NULL x or y");
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "global average pooling forward", kc__k_gap_forward(L_of(be), x, y, n, hw, c));
}

kc_status kc__cu_gap_backward(kc_backend *be, const float *dy, float *dx, int n, int hw, int c) {
    if (n < 0 || hw <= 0 || c < 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda global_avg_pool_backward: bad size (%d, %d, %d)", n,
                           hw, c);
    if (n == 0 || c == 0) return KC_STATUS_OK;
    if (!dy || !dx) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda global_avg_pool_backward: NULL dy or dx");
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "global average pooling backward", kc__k_gap_backward(L_of(be), dy, dx, n, hw, c));
}

/* ---- batch normalization */

static kc_status bn_check(kc_backend *be, const char *what, const float *x, const float *y, int64_t rows, int c) {
    if (rows <= 0 || c <= 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda %s: bad size (%lld rows, %d channels); both must be positive", what, (long long)rows,
                           c);
    if (!x || !y) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: NULL input or output", what);
    return KC_STATUS_OK;
}

kc_status kc__cu_bn_forward_train(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *gamma,
                                  const float *beta, float *moving_mean, float *moving_var, float momentum,
                                  float epsilon, float *save_mean, float *save_inv_std) {
    KC_TRY(bn_check(be, "batchnorm_forward_train", x, y, rows, c));
    if (!save_mean || !save_inv_std)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda batchnorm_forward_train: NULL save_mean or save_inv_std");
    if (!(epsilon > 0.0f))
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda batchnorm_forward_train: epsilon %g must be > 0",
                           (double)epsilon);
    KC_TRY(kc__cu_enter(be));
    void *scratch = NULL;
    KC_TRY(kc__cu_scratch(be, kc__k_bn_scratch(rows, c), &scratch));
    LAUNCH(be, "batch normalization forward (training)",
           kc__k_bn_train(L_of(be), x, y, rows, c, gamma, beta, moving_mean, moving_var, momentum, epsilon, save_mean,
                           save_inv_std, scratch));
}

kc_status kc__cu_bn_forward_infer(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *gamma,
                                  const float *beta, const float *moving_mean, const float *moving_var,
                                  float epsilon) {
    KC_TRY(bn_check(be, "batchnorm_forward_infer", x, y, rows, c));
    if (!moving_mean || !moving_var)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda batchnorm_forward_infer: NULL moving mean or variance");
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "batch normalization forward (inference)",
           kc__k_bn_infer(L_of(be), x, y, rows, c, gamma, beta, moving_mean, moving_var, epsilon));
}

kc_status kc__cu_bn_backward(kc_backend *be, const float *x, const float *dy, float *dx, int64_t rows, int c,
                             const float *gamma, const float *save_mean, const float *save_inv_std, float *dgamma,
                             float *dbeta) {
    KC_TRY(bn_check(be, "batchnorm_backward", x, dx, rows, c));
    if (!dy || !save_mean || !save_inv_std)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda batchnorm_backward: NULL dy or saved statistics");
    KC_TRY(kc__cu_enter(be));
    void *scratch = NULL;
    KC_TRY(kc__cu_scratch(be, kc__k_bn_scratch(rows, c), &scratch));
    LAUNCH(be, "batch normalization backward",
           kc__k_bn_backward(L_of(be), x, dy, dx, rows, c, gamma, save_mean, save_inv_std, dgamma, dbeta, scratch));
}

/* ---- activations */

static const char *act_name(kc_act k) {
    static const char *names[KC_ACT_COUNT] = {
        "linear", "relu",     "sigmoid",  "tanh", "softmax",     "elu",         "gelu",        "leaky_relu",
        "silu",   "relu (general)", "hard_sigmoid", "hard_silu", "softplus", "softsign", "selu", "mish",
        "exponential", "log_softmax", "gelu (tanh)", "hard_sigmoid (tf-keras)"};
    return ((int)k >= 0 && k < KC_ACT_COUNT) ? names[k] : "unknown";
}

static kc_status act_check(kc_backend *be, const char *what, kc_act_params a, int64_t n, int cols) {
    if ((int)a.kind < 0 || a.kind >= KC_ACT_COUNT)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: unknown activation kind %d", what, (int)a.kind);
    if (n < 0) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: negative size %lld", what, (long long)n);
    if ((a.kind == KC_ACT_SOFTMAX || a.kind == KC_ACT_LOG_SOFTMAX) && (cols <= 0 || n % cols != 0))
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda %s: softmax over rows of %d values does not divide %lld values", what, cols,
                           (long long)n);
    return KC_STATUS_OK;
}

kc_status kc__cu_act_forward(kc_backend *be, kc_act_params a, const float *x, float *y, int64_t n, int cols) {
    KC_TRY(act_check(be, "act_forward", a, n, cols));
    if (n == 0) return KC_STATUS_OK;
    if (!x || !y)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda act_forward (%s): NULL x or y", act_name(a.kind));
    KC_TRY(kc__cu_enter(be));
    if (a.kind == KC_ACT_LINEAR) {
        if (x == y) return KC_STATUS_OK;
        KC_CU_TRY_CUDA(be, "act_forward (linear): copy",
                       cudaMemcpyAsync(y, x, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, kc__cu(be)->stream));
        return kc__cu_launched(be, "act_forward (linear)", cudaSuccess);
    }
    if (a.kind == KC_ACT_SOFTMAX) LAUNCH(be, "softmax forward", kc__k_softmax_forward(L_of(be), x, y, n / cols, cols));
    if (a.kind == KC_ACT_LOG_SOFTMAX)
        LAUNCH(be, "log_softmax forward", kc__k_log_softmax_forward(L_of(be), x, y, n / cols, cols));
    LAUNCH(be, act_name(a.kind), kc__k_act_forward(L_of(be), (int)a.kind, a.alpha, a.beta, a.gamma, x, y, n));
}

kc_status kc__cu_act_backward(kc_backend *be, kc_act_params a, const float *x, const float *y, const float *dy,
                              float *dx, int64_t n, int cols) {
    KC_TRY(act_check(be, "act_backward", a, n, cols));
    if (n == 0) return KC_STATUS_OK;
    if (!dy || !dx)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda act_backward (%s): NULL dy or dx", act_name(a.kind));
    const float alpha = a.alpha, gamma = a.gamma;
    const int needs_x = a.kind == KC_ACT_GELU || a.kind == KC_ACT_SILU || a.kind == KC_ACT_HARD_SILU ||
                        a.kind == KC_ACT_SOFTPLUS || a.kind == KC_ACT_SOFTSIGN || a.kind == KC_ACT_SELU ||
                        a.kind == KC_ACT_MISH || a.kind == KC_ACT_GELU_TANH || a.kind == KC_ACT_HARD_SIGMOID ||
                        a.kind == KC_ACT_HARD_SIGMOID_K2 ||
                        (a.kind == KC_ACT_ELU && !(alpha > 0.0f)) ||
                        (a.kind == KC_ACT_LEAKY_RELU && alpha < 0.0f) ||
                        (a.kind == KC_ACT_RELU_GENERAL && (gamma < 0.0f || alpha < 0.0f));
    if (needs_x && !x)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda act_backward (%s): this activation's gradient needs its input x, which is NULL; keep "
                           "the pre-activation for backward",
                           act_name(a.kind));
    if (!x && !y && a.kind != KC_ACT_LINEAR)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda act_backward (%s): NULL x and y", act_name(a.kind));
    KC_TRY(kc__cu_enter(be));
    if (a.kind == KC_ACT_LINEAR) {
        if (dx == dy) return KC_STATUS_OK;
        KC_CU_TRY_CUDA(be, "act_backward (linear): copy",
                       cudaMemcpyAsync(dx, dy, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, kc__cu(be)->stream));
        return kc__cu_launched(be, "act_backward (linear)", cudaSuccess);
    }
    if (a.kind == KC_ACT_SOFTMAX) {
        if (!y)
            return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                               "cuda act_backward (softmax): needs the forward output y");
        LAUNCH(be, "softmax backward", kc__k_softmax_backward(L_of(be), y, dy, dx, n / cols, cols));
    }
    if (a.kind == KC_ACT_LOG_SOFTMAX) {
        if (!y)
            return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                               "cuda act_backward (log_softmax): needs the forward output y");
        LAUNCH(be, "log_softmax backward", kc__k_log_softmax_backward(L_of(be), y, dy, dx, n / cols, cols));
    }
    /* RELU_GENERAL uses x whenever it is given, like the CPU backend; the others prefer y */
    LAUNCH(be, act_name(a.kind),
           kc__k_act_backward(L_of(be), (int)a.kind, a.alpha, a.beta, a.gamma, x, y, dy, dx, n));
}

/* ---- dropout */

static kc_status dropout_check(kc_backend *be, const char *what, float rate, int64_t n) {
    if (n < 0) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: negative size %lld", what, (long long)n);
    if (!(rate >= 0.0f && rate < 1.0f))
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda %s: rate %g is outside [0, 1); use a Dropout rate in [0, 1)", what, (double)rate);
    return KC_STATUS_OK;
}

kc_status kc__cu_dropout_forward(kc_backend *be, const float *x, float *y, uint8_t *mask, int64_t n, float rate,
                                 uint64_t seed) {
    KC_TRY(dropout_check(be, "dropout_forward", rate, n));
    if (n == 0) return KC_STATUS_OK;
    if (!x || !y || !mask)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda dropout_forward: NULL x, y or mask");
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "dropout forward", kc__k_dropout_forward(L_of(be), x, y, mask, n, rate, seed));
}

kc_status kc__cu_dropout_backward(kc_backend *be, const float *dy, const uint8_t *mask, float *dx, int64_t n,
                                  float rate) {
    KC_TRY(dropout_check(be, "dropout_backward", rate, n));
    if (n == 0) return KC_STATUS_OK;
    if (!dy || !dx || !mask)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda dropout_backward: NULL dy, dx or mask");
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "dropout backward", kc__k_dropout_backward(L_of(be), dy, mask, dx, n, rate));
}

/* ---- normal random numbers (Gaussian noise layers) */

kc_status kc__cu_random_normal(kc_backend *be, float *y, int64_t n, float mean, float stddev, uint64_t seed) {
    if (n < 0) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda random_normal: negative size %lld", (long long)n);
    if (n == 0) return KC_STATUS_OK;
    if (!y) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda random_normal: NULL output");
    if (!(stddev >= 0.0f) || !isfinite(stddev) || !isfinite(mean))
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda random_normal: mean %g and stddev %g must be finite, stddev >= 0", (double)mean,
                           (double)stddev);
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "random normal", kc__k_random_normal(L_of(be), y, n, mean, stddev, seed));
}

/* ---- elementwise and layout */

#define CHECK_N(what, n)                                                                                          \
    do {                                                                                                          \
        if ((n) < 0)                                                                                              \
            return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: negative size %lld", what, (long long)(n)); \
        if ((n) == 0) return KC_STATUS_OK;                                                                        \
    } while (0)

kc_status kc__cu_add(kc_backend *be, float *y, const float *a, const float *b, int64_t n) {
    CHECK_N("add", n);
    if (!y || !a || !b) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda add: NULL pointer");
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "add", kc__k_add(L_of(be), y, a, b, n));
}

kc_status kc__cu_axpy(kc_backend *be, float *y, const float *x, float alpha, int64_t n) {
    CHECK_N("axpy", n);
    if (!y || !x) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda axpy: NULL pointer");
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "axpy", kc__k_axpy(L_of(be), y, x, alpha, n));
}

kc_status kc__cu_scale(kc_backend *be, float *y, float alpha, int64_t n) {
    CHECK_N("scale", n);
    if (!y) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda scale: NULL pointer");
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "scale", kc__k_scale(L_of(be), y, alpha, n));
}

kc_status kc__cu_copy_strided(kc_backend *be, float *dst, int dst_ld, int dst_off, const float *src, int src_ld,
                              int src_off, int64_t rows, int cols) {
    if (rows < 0 || cols < 0 || dst_off < 0 || src_off < 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda copy_strided: negative size or offset");
    if (rows == 0 || cols == 0) return KC_STATUS_OK;
    if (!dst || !src) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda copy_strided: NULL pointer");
    if (rows > 1 && (dst_ld < dst_off + cols || src_ld < src_off + cols))
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda copy_strided: block of %d columns at offsets %d/%d does not fit rows of %d/%d", cols,
                           dst_off, src_off, dst_ld, src_ld);
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "copy_strided", kc__k_copy_strided(L_of(be), dst, dst_ld, dst_off, src, src_ld, src_off, rows, cols));
}

static kc_status pad_check(kc_backend *be, const char *what, const float *a, const float *b, int n, int h, int w, int c,
                           int top, int bottom, int left, int right) {
    if (n < 0 || h < 0 || w < 0 || c < 0 || top < 0 || bottom < 0 || left < 0 || right < 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda %s: negative size or padding (input %dx%dx%dx%d, padding %d,%d,%d,%d)", what, n, h, w,
                           c, top, bottom, left, right);
    if ((int64_t)n * h * w * c > 0 && (!a || !b))
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: NULL pointer", what);
    return KC_STATUS_OK;
}

kc_status kc__cu_pad2d_forward(kc_backend *be, const float *x, float *y, int n, int h, int w, int c, int top,
                               int bottom, int left, int right) {
    KC_TRY(pad_check(be, "pad2d_forward", x, y, n, h, w, c, top, bottom, left, right));
    if ((int64_t)n * (h + top + bottom) * (w + left + right) * c == 0) return KC_STATUS_OK;
    if (!y) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda pad2d_forward: NULL output");
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "pad2d forward", kc__k_pad2d(L_of(be), x, y, n, h, w, c, top, bottom, left, right, 0));
}

kc_status kc__cu_pad2d_backward(kc_backend *be, const float *dy, float *dx, int n, int h, int w, int c, int top,
                                int bottom, int left, int right) {
    KC_TRY(pad_check(be, "pad2d_backward", dy, dx, n, h, w, c, top, bottom, left, right));
    if ((int64_t)n * h * w * c == 0) return KC_STATUS_OK;
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "pad2d backward", kc__k_pad2d(L_of(be), dy, dx, n, h, w, c, top, bottom, left, right, 1));
}

/* ---- loss and accuracy */

kc_status kc__cu_loss_forward_backward(kc_backend *be, const kc_loss_desc *d, const float *pred,
                                       const float *target, float *loss_sum, float *dpred, int grad_n) {
    if (!d) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda loss: the descriptor is NULL");
    if ((int)d->kind < 0 || d->kind >= KC_LOSS_COUNT)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda loss: unknown loss kind %d", (int)d->kind);
    const char *name = kc_loss_name(d->kind);
    const int n = d->n, c = d->c;
    if (n < 0 || c <= 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "%s: bad prediction shape (%d, %d)", name, n, c);
    if (dpred && grad_n <= 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "%s: grad_n is %d; it must be the positive batch size", name,
                           grad_n);
    if (n > 0 && (!pred || !target))
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "%s: NULL predictions or targets", name);
    KC_TRY(kc__cu_enter(be));
    kc_cu_ctx *cx = kc__cu(be);
    void *scratch = NULL;
    KC_TRY(kc__cu_scratch(be, kc__k_loss_scratch(n), &scratch));
    if (d->kind == KC_LOSS_SPARSE_CCE) cx->flag_armed = true; /* labels are checked on the device */
    const double gs = dpred ? 1.0 / (double)grad_n : 0.0;
    LAUNCH(be, name, kc__k_loss(L_of(be), (int)d->kind, d->from_logits != 0, pred, target, n, c, loss_sum, dpred, gs,
                                 scratch, cx->dflag));
}

kc_status kc__cu_count_correct(kc_backend *be, const float *pred, const float *target, int n, int c, int sparse,
                               int k, int from_logits, float *correct) {
    if (n < 0 || c <= 0 || k < 1)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda accuracy: bad arguments (n=%d, c=%d, k=%d)", n, c, k);
    if (!correct) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda accuracy: NULL output");
    if (n == 0) return KC_STATUS_OK;
    if (!pred || !target)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda accuracy: NULL predictions or targets");
    KC_TRY(kc__cu_enter(be));
    kc_cu_ctx *cx = kc__cu(be);
    void *scratch = NULL;
    KC_TRY(kc__cu_scratch(be, kc__k_count_scratch(), &scratch));
    if (sparse && c > 1) cx->flag_armed = true;
    LAUNCH(be, "accuracy",
           kc__k_count_correct(L_of(be), pred, target, n, c, sparse, k, from_logits, correct, scratch, cx->dflag));
}

/* ---- optimizer */

kc_status kc__cu_optimizer_step(kc_backend *be, const kc_opt_step *s, float *param, const float *grad, float *slot0,
                                float *slot1, int64_t n) {
    if (!s) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda optimizer_step: the step description is NULL");
    if (n < 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda optimizer_step: negative size %lld", (long long)n);
    if (n == 0) return KC_STATUS_OK;
    if (!param || !grad)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda optimizer_step: NULL parameters or gradients");
    kc_cu_opt o = {.kind = (int)s->kind, .nesterov = s->nesterov != 0, .lr = s->lr, .momentum = s->momentum,
                   .grad_scale = s->grad_scale, .norm_sq = s->norm_sq, .clipnorm = s->clipnorm};
    switch (s->kind) {
    case KC_OPT_SGD:
        if (s->momentum != 0.0f && !slot0)
            return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                               "cuda optimizer_step: SGD with momentum needs a velocity slot");
        break;
    case KC_OPT_ADAM:
    case KC_OPT_ADAMW: {
        if (!slot0 || !slot1)
            return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda optimizer_step: Adam needs its m and v slots");
        if (s->t < 1)
            return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                               "cuda optimizer_step: Adam step count t=%lld must start at 1", (long long)s->t);
        const double b1 = s->beta_1, b2 = s->beta_2, t = (double)s->t;
        o.alpha = (float)((double)s->lr * sqrt(1.0 - pow(b2, t)) / (1.0 - pow(b1, t)));
        o.omb1 = 1.0f - s->beta_1;
        o.omb2 = 1.0f - s->beta_2;
        o.eps = s->epsilon;
        o.decay = s->kind == KC_OPT_ADAMW ? s->lr * s->weight_decay : 0.0f;
        break;
    }
    case KC_OPT_RMSPROP:
        if (!slot0 || (s->momentum > 0.0f && !slot1))
            return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                               "cuda optimizer_step: RMSprop needs its velocity slot (and a momentum slot when "
                               "momentum > 0)");
        o.rho = s->rho;
        o.omrho = 1.0f - s->rho;
        o.eps = s->epsilon;
        break;
    default:
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda optimizer_step: unknown optimizer kind %d",
                           (int)s->kind);
    }
    KC_TRY(kc__cu_enter(be));
    LAUNCH(be, "optimizer step", kc__k_optimizer(L_of(be), &o, param, grad, slot0, slot1, n));
}

kc_status kc__cu_sum_squares(kc_backend *be, const float *x, int64_t n, float *out) {
    if (!out) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda sum_squares: NULL output");
    if (n < 0) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda sum_squares: negative size %lld", (long long)n);
    if (n > 0 && !x) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda sum_squares: NULL input");
    KC_TRY(kc__cu_enter(be));
    void *scratch = NULL;
    KC_TRY(kc__cu_scratch(be, kc__k_sum_squares_scratch(n), &scratch));
    LAUNCH(be, "sum of squares", kc__k_sum_squares(L_of(be), x, n, out, scratch));
}
