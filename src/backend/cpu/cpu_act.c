/* cpu_act.c — activations, forward and backward, as Keras 3 defines them.
 *
 * Backward works from the forward output y for every kind except GELU and SILU (they
 * need x). ELU, LEAKY_RELU and RELU_GENERAL use x when it is given (exact in every
 * case); from y alone they are exact when alpha >= 0 (ELU: alpha > 0) and, for
 * RELU_GENERAL, threshold (gamma) >= 0; otherwise they need x and fail without it.
 * dx may alias dy; y may alias x in forward. Softmax works on rows of `cols`. */
#include <math.h>
#include <string.h>

#include "cpu.h"

#define KC_SQRT1_2 0.70710678118654752440f
#define KC_INV_SQRT_2PI 0.39894228040143267794f

/* Elementwise loop over i < n, in parallel when n is large. */
#define EW_LOOP(body)                                                                                             \
    do {                                                                                                          \
        KC_CPU_PAR_FOR(par, KC_CPU_BALANCED(n), for (int64_t i = 0; i < n; i++) { body; });                      \
    } while (0)

static const char *act_name(kc_act k) {
    static const char *names[KC_ACT_COUNT] = {
        "linear", "relu",     "sigmoid",  "tanh", "softmax",     "elu",         "gelu",        "leaky_relu",
        "silu",   "relu (general)", "hard_sigmoid", "hard_silu", "softplus", "softsign", "selu", "mish",
        "exponential", "log_softmax", "gelu (tanh)", "hard_sigmoid (tf-keras)"};
    return (k >= 0 && k < KC_ACT_COUNT) ? names[k] : "unknown";
}

static kc_status act_check(const char *what, kc_act_params a, int64_t n, int cols) {
    if ((int)a.kind < 0 || a.kind >= KC_ACT_COUNT)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: unknown activation kind %d", what, (int)a.kind);
    if (n < 0) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: negative size %lld", what, (long long)n);
    if ((a.kind == KC_ACT_SOFTMAX || a.kind == KC_ACT_LOG_SOFTMAX) && (cols <= 0 || n % cols != 0))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu %s: softmax over rows of %d values does not divide %lld values", what, cols,
                        (long long)n);
    return KC_STATUS_OK;
}

/* ReLU layer (RELU_GENERAL) branch of x: 0 clipped at max_value, 1 linear, 2 negative slope. */
static inline int relu_general_branch_x(float x, float max_value, float threshold) {
    if (max_value > 0.0f && x >= max_value) return 0;
    if (threshold != 0.0f ? x >= threshold : x > 0.0f) return 1;
    return 2;
}

#define KC_SELU_ALPHA 1.67326324f
#define KC_SELU_SCALE 1.05070098f
#define KC_SQRT_2_PI 0.79788456080286535588f

static inline float hard_sigmoid(float x) { /* relu6(x + 3) / 6 */
    const float t = x + 3.0f;
    return (t <= 0.0f ? 0.0f : (t >= 6.0f ? 6.0f : t)) * (1.0f / 6.0f);
}

static inline float hard_sigmoid_k2(float x) { /* clip(0.2 x + 0.5, 0, 1) (tf-keras) */
    const float t = 0.2f * x + 0.5f;
    return t <= 0.0f ? 0.0f : (t >= 1.0f ? 1.0f : t);
}
static inline float softplus(float x) { return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))); }
static inline float gelu_tanh_u(float x) { return KC_SQRT_2_PI * (x + 0.044715f * x * x * x); }

static inline float relu_general_forward(float x, float slope, float max_value, float threshold) {
    if (max_value > 0.0f && x >= max_value) return max_value;
    if (x >= threshold) return x;
    return slope * (x - threshold);
}

kc_status kc__cpu_act_forward(kc_backend *be, kc_act_params a, const float *x, float *y, int64_t n, int cols) {
    KC_TRY(act_check("act_forward", a, n, cols));
    if (n == 0) return KC_STATUS_OK;
    if (!x || !y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu act_forward (%s): NULL x or y", act_name(a.kind));
    const int par = kc__cpu_par(n);
    const float alpha = a.alpha, beta = a.beta, gamma = a.gamma;
    switch (a.kind) {
    case KC_ACT_LINEAR:
        if (x != y) memmove(y, x, (size_t)n * sizeof(float));
        break;
    case KC_ACT_RELU: EW_LOOP(y[i] = x[i] > 0.0f ? x[i] : 0.0f); break;
    case KC_ACT_SIGMOID: EW_LOOP(y[i] = 1.0f / (1.0f + expf(-x[i]))); break;
    case KC_ACT_TANH: EW_LOOP(y[i] = tanhf(x[i])); break;
    case KC_ACT_ELU: EW_LOOP(y[i] = x[i] > 0.0f ? x[i] : alpha * expm1f(x[i])); break;
    case KC_ACT_GELU: EW_LOOP(y[i] = 0.5f * x[i] * erfcf(-x[i] * KC_SQRT1_2)); break; /* x Phi(x), no cancellation */
    case KC_ACT_LEAKY_RELU: EW_LOOP(y[i] = x[i] > 0.0f ? x[i] : alpha * x[i]); break;
    case KC_ACT_SILU: EW_LOOP(y[i] = x[i] / (1.0f + expf(-x[i]))); break;
    case KC_ACT_RELU_GENERAL: EW_LOOP(y[i] = relu_general_forward(x[i], alpha, beta, gamma)); break;
    case KC_ACT_HARD_SIGMOID: EW_LOOP(y[i] = hard_sigmoid(x[i])); break;
    case KC_ACT_HARD_SIGMOID_K2: EW_LOOP(y[i] = hard_sigmoid_k2(x[i])); break;
    case KC_ACT_HARD_SILU: EW_LOOP(y[i] = x[i] * hard_sigmoid(x[i])); break;
    case KC_ACT_SOFTPLUS: EW_LOOP(y[i] = softplus(x[i])); break;
    case KC_ACT_SOFTSIGN: EW_LOOP(y[i] = x[i] / (1.0f + fabsf(x[i]))); break;
    case KC_ACT_SELU: EW_LOOP(y[i] = KC_SELU_SCALE * (x[i] > 0.0f ? x[i] : KC_SELU_ALPHA * expm1f(x[i]))); break;
    case KC_ACT_MISH: EW_LOOP(y[i] = x[i] * tanhf(softplus(x[i]))); break;
    case KC_ACT_EXPONENTIAL: EW_LOOP(y[i] = expf(x[i])); break;
    case KC_ACT_GELU_TANH: EW_LOOP(y[i] = 0.5f * x[i] * (1.0f + tanhf(gelu_tanh_u(x[i])))); break;
    case KC_ACT_LOG_SOFTMAX:
    case KC_ACT_SOFTMAX: {
        const int64_t rows = n / cols;
        KC_CPU_PAR_FOR(par, KC_CPU_BALANCED(rows), for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * cols;
            float *yr = y + r * cols; /* (cols) */
            float m = xr[0];
            for (int j = 1; j < cols; j++) m = xr[j] > m ? xr[j] : m;
            double s = 0.0;
            for (int j = 0; j < cols; j++) {
                const float e = expf(xr[j] - m);
                if (a.kind == KC_ACT_SOFTMAX) yr[j] = e; /* log_softmax: y may be x, still read below */
                s += e;
            }
            if (a.kind == KC_ACT_LOG_SOFTMAX) {
                const float lse = m + (float)log(s);
                for (int j = 0; j < cols; j++) yr[j] = xr[j] - lse;
                continue;
            }
            const float inv = (float)(1.0 / s);
            for (int j = 0; j < cols; j++) yr[j] *= inv;
        });
        break;
    }
    case KC_ACT_COUNT: break;
    }
    return KC_STATUS_OK;
}

/* Softmax (is_log 0) and log_softmax (is_log 1) backward over rows of cols, from y:
 * softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - exp(y) sum(dy). */
static kc_status softmax_backward(int is_log, const float *y, const float *dy, float *dx, int64_t n, int cols, int par) {
    if (!y)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu act_backward (%s): needs the forward output y",
                        is_log ? "log_softmax" : "softmax");
    const int64_t rows = n / cols;
    KC_CPU_PAR_FOR(par, KC_CPU_BALANCED(rows), for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * cols, *gr = dy + r * cols;
        float *o = dx + r * cols; /* (cols) */
        double s = 0.0;
        for (int j = 0; j < cols; j++) s += is_log ? (double)gr[j] : (double)gr[j] * (double)yr[j];
        const float sf = (float)s;
        if (is_log)
            for (int j = 0; j < cols; j++) o[j] = gr[j] - expf(yr[j]) * sf;
        else
            for (int j = 0; j < cols; j++) o[j] = yr[j] * (gr[j] - sf);
    });
    return KC_STATUS_OK;
}

/* Backward of Keras 3's other activations (x checked by the caller where they need it). */
static kc_status act_backward_more(kc_act_params a, const float *x, const float *y, const float *dy, float *dx,
                                   int64_t n, int cols, int par) {
    switch (a.kind) {
    case KC_ACT_HARD_SIGMOID: EW_LOOP(dx[i] = x[i] > -3.0f && x[i] < 3.0f ? dy[i] * (1.0f / 6.0f) : 0.0f); break;
    case KC_ACT_HARD_SIGMOID_K2: EW_LOOP(dx[i] = x[i] > -2.5f && x[i] < 2.5f ? dy[i] * 0.2f : 0.0f); break;
    case KC_ACT_HARD_SILU:
        EW_LOOP(const float v = x[i];
                dx[i] = v <= -3.0f ? 0.0f : (v >= 3.0f ? dy[i] : dy[i] * (2.0f * v + 3.0f) * (1.0f / 6.0f)));
        break;
    case KC_ACT_SOFTPLUS: EW_LOOP(dx[i] = dy[i] / (1.0f + expf(-x[i]))); break;
    case KC_ACT_SOFTSIGN: EW_LOOP(const float t = 1.0f + fabsf(x[i]); dx[i] = dy[i] / (t * t)); break;
    case KC_ACT_SELU:
        EW_LOOP(dx[i] = dy[i] * KC_SELU_SCALE * (x[i] > 0.0f ? 1.0f : KC_SELU_ALPHA * expf(x[i])));
        break;
    case KC_ACT_MISH:
        EW_LOOP(const float v = x[i]; const float t = tanhf(softplus(v)); const float sg = 1.0f / (1.0f + expf(-v));
                dx[i] = dy[i] * (t + v * sg * (1.0f - t * t)));
        break;
    case KC_ACT_EXPONENTIAL:
        if (y)
            EW_LOOP(dx[i] = dy[i] * y[i]);
        else
            EW_LOOP(dx[i] = dy[i] * expf(x[i]));
        break;
    case KC_ACT_GELU_TANH:
        EW_LOOP(const float v = x[i]; const float t = tanhf(gelu_tanh_u(v));
                const float du = KC_SQRT_2_PI * (1.0f + 3.0f * 0.044715f * v * v);
                dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du));
        break;
    case KC_ACT_LOG_SOFTMAX: return softmax_backward(1, y, dy, dx, n, cols, par);
    default: break;
    }
    return KC_STATUS_OK;
}

kc_status kc__cpu_act_backward(kc_backend *be, kc_act_params a, const float *x, const float *y, const float *dy,
                               float *dx, int64_t n, int cols) {
    KC_TRY(act_check("act_backward", a, n, cols));
    if (n == 0) return KC_STATUS_OK;
    if (!dy || !dx)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu act_backward (%s): NULL dy or dx", act_name(a.kind));
    const int par = kc__cpu_par(n);
    const float alpha = a.alpha, beta = a.beta, gamma = a.gamma;
    const int needs_x = a.kind == KC_ACT_GELU || a.kind == KC_ACT_SILU || a.kind == KC_ACT_HARD_SILU ||
                        a.kind == KC_ACT_SOFTPLUS || a.kind == KC_ACT_SOFTSIGN || a.kind == KC_ACT_SELU ||
                        a.kind == KC_ACT_MISH || a.kind == KC_ACT_GELU_TANH || a.kind == KC_ACT_HARD_SIGMOID ||
                        a.kind == KC_ACT_HARD_SIGMOID_K2 ||
                        (a.kind == KC_ACT_ELU && !(alpha > 0.0f)) || (a.kind == KC_ACT_LEAKY_RELU && alpha < 0.0f) ||
                        (a.kind == KC_ACT_RELU_GENERAL && (gamma < 0.0f || alpha < 0.0f));
    if (needs_x && !x)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu act_backward (%s): this activation's gradient needs its input x, which is NULL; keep "
                        "the pre-activation for backward",
                        act_name(a.kind));
    if (!x && !y && a.kind != KC_ACT_LINEAR)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu act_backward (%s): NULL x and y", act_name(a.kind));
    if (a.kind >= KC_ACT_HARD_SIGMOID) return act_backward_more(a, x, y, dy, dx, n, cols, par);
    switch (a.kind) {
    case KC_ACT_LINEAR:
        if (dx != dy) memmove(dx, dy, (size_t)n * sizeof(float));
        break;
    case KC_ACT_RELU:
        if (y)
            EW_LOOP(dx[i] = y[i] > 0.0f ? dy[i] : 0.0f);
        else
            EW_LOOP(dx[i] = x[i] > 0.0f ? dy[i] : 0.0f);
        break;
    case KC_ACT_SIGMOID:
        if (y)
            EW_LOOP(dx[i] = dy[i] * y[i] * (1.0f - y[i]));
        else
            EW_LOOP(float s = 1.0f / (1.0f + expf(-x[i])); dx[i] = dy[i] * s * (1.0f - s));
        break;
    case KC_ACT_TANH:
        if (y)
            EW_LOOP(dx[i] = dy[i] * (1.0f - y[i] * y[i]));
        else
            EW_LOOP(float t = tanhf(x[i]); dx[i] = dy[i] * (1.0f - t * t));
        break;
    case KC_ACT_ELU:
        if (x)
            EW_LOOP(dx[i] = x[i] > 0.0f ? dy[i] : dy[i] * alpha * expf(x[i]));
        else
            EW_LOOP(dx[i] = y[i] > 0.0f ? dy[i] : dy[i] * (y[i] + alpha));
        break;
    case KC_ACT_GELU:
        EW_LOOP(const float v = x[i];
                const float d = 0.5f * erfcf(-v * KC_SQRT1_2) + v * KC_INV_SQRT_2PI * expf(-0.5f * v * v);
                dx[i] = dy[i] * d);
        break;
    case KC_ACT_LEAKY_RELU:
        if (x)
            EW_LOOP(dx[i] = x[i] > 0.0f ? dy[i] : alpha * dy[i]);
        else
            EW_LOOP(dx[i] = y[i] > 0.0f ? dy[i] : alpha * dy[i]);
        break;
    case KC_ACT_SILU:
        EW_LOOP(const float s = 1.0f / (1.0f + expf(-x[i])); dx[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s)));
        break;
    case KC_ACT_RELU_GENERAL:
        if (x) {
            EW_LOOP(const int b = relu_general_branch_x(x[i], beta, gamma);
                    dx[i] = b == 1 ? dy[i] : (b == 2 ? alpha * dy[i] : 0.0f));
        } else {
            /* threshold >= 0 and slope >= 0: the linear branch has y >= threshold (> 0 when
             * the threshold is 0), the sloped branch y <= 0 */
            EW_LOOP(const float v = y[i]; const int clipped = beta > 0.0f && v >= beta;
                    const int lin = gamma != 0.0f ? v >= gamma : v > 0.0f;
                    dx[i] = clipped ? 0.0f : (lin ? dy[i] : alpha * dy[i]));
        }
        break;
    case KC_ACT_SOFTMAX: return softmax_backward(0, y, dy, dx, n, cols, par);
    default: break;
    }
    return KC_STATUS_OK;
}
