// kernels_ew.cu — the CUDA backend's elementwise, layout, pooling and optimizer kernels.
// Each mirrors its CPU counterpart in src/backend/cpu/ formula for formula (see
// cuda_kernels.h); the launchers enqueue on L->stream and return the launch error.
#include <math.h>
#include <stdint.h>

#include "backend/normal_draw.h"
#include "kernels_common.cuh"

#define KC_THREADS 256
#define KC_SQRT1_2 0.70710678118654752440f
#define KC_INV_SQRT_2PI 0.39894228040143267794f

// ---------------------------------------------------------------- probe

__global__ void k_probe(int *out) {
    if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = 0x6b657261;
}

extern "C" cudaError_t kc__k_probe(const kc_cu_launch *L, int *out) {
    k_probe<<<1, 32, 0, L->stream>>>(out);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- activations

__device__ __forceinline__ float relu_general_forward(float x, float slope, float max_value, float threshold) {
    if (max_value > 0.0f && x >= max_value) return max_value;
    if (x >= threshold) return x;
    return slope * (x - threshold);
}

#define KC_SELU_ALPHA 1.67326324f
#define KC_SELU_SCALE 1.05070098f
#define KC_SQRT_2_PI 0.79788456080286535588f

__device__ __forceinline__ float hard_sigmoid_f(float x) {
    const float t = x + 3.0f;
    return (t <= 0.0f ? 0.0f : (t >= 6.0f ? 6.0f : t)) * (1.0f / 6.0f);
}
__device__ __forceinline__ float softplus_f(float x) { return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))); }
__device__ __forceinline__ float gelu_tanh_u(float x) { return KC_SQRT_2_PI * (x + 0.044715f * x * x * x); }

// ReLU layer branch of x: 0 clipped at max_value, 1 linear, 2 negative slope
__device__ __forceinline__ int relu_general_branch_x(float x, float max_value, float threshold) {
    if (max_value > 0.0f && x >= max_value) return 0;
    if (threshold != 0.0f ? x >= threshold : x > 0.0f) return 1;
    return 2;
}

__global__ void k_act_forward(int kind, float alpha, float beta, float gamma, const float *x, float *y, int64_t n) {
    KC_GRID_LOOP(i, n) {
        const float v = x[i];
        float r;
        switch (kind) {
        case KC_ACT_RELU: r = v > 0.0f ? v : 0.0f; break;
        case KC_ACT_SIGMOID: r = 1.0f / (1.0f + expf(-v)); break;
        case KC_ACT_TANH: r = tanhf(v); break;
        case KC_ACT_ELU: r = v > 0.0f ? v : alpha * expm1f(v); break;
        case KC_ACT_GELU: r = 0.5f * v * erfcf(-v * KC_SQRT1_2); break;
        case KC_ACT_LEAKY_RELU: r = v > 0.0f ? v : alpha * v; break;
        case KC_ACT_SILU: r = v / (1.0f + expf(-v)); break;
        case KC_ACT_RELU_GENERAL: r = relu_general_forward(v, alpha, beta, gamma); break;
        case KC_ACT_HARD_SIGMOID: r = hard_sigmoid_f(v); break;
        case KC_ACT_HARD_SIGMOID_K2: r = fminf(fmaxf(0.2f * v + 0.5f, 0.0f), 1.0f); break;
        case KC_ACT_HARD_SILU: r = v * hard_sigmoid_f(v); break;
        case KC_ACT_SOFTPLUS: r = softplus_f(v); break;
        case KC_ACT_SOFTSIGN: r = v / (1.0f + fabsf(v)); break;
        case KC_ACT_SELU: r = KC_SELU_SCALE * (v > 0.0f ? v : KC_SELU_ALPHA * expm1f(v)); break;
        case KC_ACT_MISH: r = v * tanhf(softplus_f(v)); break;
        case KC_ACT_EXPONENTIAL: r = expf(v); break;
        case KC_ACT_GELU_TANH: r = 0.5f * v * (1.0f + tanhf(gelu_tanh_u(v))); break;
        default: r = v; break; // linear
        }
        y[i] = r;
    }
}

// x and/or y may be NULL exactly where the CPU backend allows it (checked by the caller)
__global__ void k_act_backward(int kind, float alpha, float beta, float gamma, const float *x, const float *y,
                               const float *dy, float *dx, int64_t n) {
    KC_GRID_LOOP(i, n) {
        const float g = dy[i];
        float r;
        switch (kind) {
        case KC_ACT_RELU: r = (y ? y[i] : x[i]) > 0.0f ? g : 0.0f; break;
        case KC_ACT_SIGMOID: {
            const float s = y ? y[i] : 1.0f / (1.0f + expf(-x[i]));
            r = g * s * (1.0f - s);
            break;
        }
        case KC_ACT_TANH: {
            const float t = y ? y[i] : tanhf(x[i]);
            r = g * (1.0f - t * t);
            break;
        }
        case KC_ACT_ELU:
            if (x) r = x[i] > 0.0f ? g : g * alpha * expf(x[i]);
            else r = y[i] > 0.0f ? g : g * (y[i] + alpha);
            break;
        case KC_ACT_GELU: {
            const float v = x[i];
            const float d = 0.5f * erfcf(-v * KC_SQRT1_2) + v * KC_INV_SQRT_2PI * expf(-0.5f * v * v);
            r = g * d;
            break;
        }
        case KC_ACT_LEAKY_RELU:
            if (x) r = x[i] > 0.0f ? g : alpha * g;
            else r = y[i] > 0.0f ? g : alpha * g;
            break;
        case KC_ACT_SILU: {
            const float v = x[i];
            const float s = 1.0f / (1.0f + expf(-v));
            r = g * s * (1.0f + v * (1.0f - s));
            break;
        }
        case KC_ACT_RELU_GENERAL:
            if (x) {
                const int b = relu_general_branch_x(x[i], beta, gamma);
                r = b == 1 ? g : (b == 2 ? alpha * g : 0.0f);
            } else {
                const float v = y[i];
                const int clipped = beta > 0.0f && v >= beta;
                const int lin = gamma != 0.0f ? v >= gamma : v > 0.0f;
                r = clipped ? 0.0f : (lin ? g : alpha * g);
            }
            break;
        case KC_ACT_HARD_SIGMOID: r = x[i] > -3.0f && x[i] < 3.0f ? g * (1.0f / 6.0f) : 0.0f; break;
        case KC_ACT_HARD_SIGMOID_K2: r = x[i] > -2.5f && x[i] < 2.5f ? g * 0.2f : 0.0f; break;
        case KC_ACT_HARD_SILU: {
            const float v = x[i];
            r = v <= -3.0f ? 0.0f : (v >= 3.0f ? g : g * (2.0f * v + 3.0f) * (1.0f / 6.0f));
            break;
        }
        case KC_ACT_SOFTPLUS: r = g / (1.0f + expf(-x[i])); break;
        case KC_ACT_SOFTSIGN: {
            const float t = 1.0f + fabsf(x[i]);
            r = g / (t * t);
            break;
        }
        case KC_ACT_SELU: r = g * KC_SELU_SCALE * (x[i] > 0.0f ? 1.0f : KC_SELU_ALPHA * expf(x[i])); break;
        case KC_ACT_MISH: {
            const float v = x[i], t = tanhf(softplus_f(v)), sg = 1.0f / (1.0f + expf(-v));
            r = g * (t + v * sg * (1.0f - t * t));
            break;
        }
        case KC_ACT_EXPONENTIAL: r = g * (y ? y[i] : expf(x[i])); break;
        case KC_ACT_GELU_TANH: {
            const float v = x[i], t = tanhf(gelu_tanh_u(v)), du = KC_SQRT_2_PI * (1.0f + 3.0f * 0.044715f * v * v);
            r = g * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
            break;
        }
        default: r = g; break; // linear
        }
        dx[i] = r;
    }
}

extern "C" cudaError_t kc__k_act_forward(const kc_cu_launch *L, int kind, float alpha, float beta, float gamma,
                                          const float *x, float *y, int64_t n) {
    if (n <= 0) return cudaSuccess;
    k_act_forward<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(kind, alpha, beta, gamma, x, y, n);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_act_backward(const kc_cu_launch *L, int kind, float alpha, float beta, float gamma,
                                           const float *x, const float *y, const float *dy, float *dx, int64_t n) {
    if (n <= 0) return cudaSuccess;
    k_act_backward<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(kind, alpha, beta, gamma, x, y, dy,
                                                                              dx, n);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- log_softmax: one thread per row
// (the CPU's order: max, then the sum of exp in double)

__global__ void k_log_softmax_forward(const float *x, float *y, int64_t rows, int cols) {
    KC_GRID_LOOP(r, rows) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = xr[0];
        for (int j = 1; j < cols; j++) m = xr[j] > m ? xr[j] : m;
        double s = 0.0;
        for (int j = 0; j < cols; j++) s += expf(xr[j] - m);
        const float lse = m + (float)log(s);
        for (int j = 0; j < cols; j++) yr[j] = xr[j] - lse;
    }
}

__global__ void k_log_softmax_backward(const float *y, const float *dy, float *dx, int64_t rows, int cols) {
    KC_GRID_LOOP(r, rows) {
        const float *yr = y + r * cols, *gr = dy + r * cols;
        float *o = dx + r * cols;
        double s = 0.0;
        for (int j = 0; j < cols; j++) s += gr[j];
        const float sf = (float)s;
        for (int j = 0; j < cols; j++) o[j] = gr[j] - expf(yr[j]) * sf;
    }
}

extern "C" cudaError_t kc__k_log_softmax_forward(const kc_cu_launch *L, const float *x, float *y, int64_t rows,
                                                  int cols) {
    if (rows <= 0) return cudaSuccess;
    k_log_softmax_forward<<<kc_blocks(L, rows, 128), 128, 0, L->stream>>>(x, y, rows, cols);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_log_softmax_backward(const kc_cu_launch *L, const float *y, const float *dy, float *dx,
                                                   int64_t rows, int cols) {
    if (rows <= 0) return cudaSuccess;
    k_log_softmax_backward<<<kc_blocks(L, rows, 128), 128, 0, L->stream>>>(y, dy, dx, rows, cols);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- softmax: one warp per row

__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max_f(float v) {
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = u > v ? u : v;
    }
    return v;
}

__global__ void k_softmax_forward(const float *x, float *y, int64_t rows, int cols) {
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows; r += nwarps) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols; // (cols)
        float m = xr[0];
        for (int j = lane; j < cols; j += 32) m = xr[j] > m ? xr[j] : m;
        m = warp_max_f(m);
        double s = 0.0;
        for (int j = lane; j < cols; j += 32) s += (double)expf(xr[j] - m);
        s = warp_sum_d(s); // every lane has read its x before any lane writes y (y may alias x)
        const float inv = (float)(1.0 / s);
        for (int j = lane; j < cols; j += 32) yr[j] = expf(xr[j] - m) * inv;
    }
}

__global__ void k_softmax_backward(const float *y, const float *dy, float *dx, int64_t rows, int cols) {
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows; r += nwarps) {
        const float *yr = y + r * cols, *gr = dy + r * cols;
        float *o = dx + r * cols; // (cols)
        double s = 0.0;
        for (int j = lane; j < cols; j += 32) s += (double)gr[j] * (double)yr[j];
        const float sf = (float)warp_sum_d(s);
        for (int j = lane; j < cols; j += 32) o[j] = yr[j] * (gr[j] - sf);
    }
}

extern "C" cudaError_t kc__k_softmax_forward(const kc_cu_launch *L, const float *x, float *y, int64_t rows,
                                              int cols) {
    if (rows <= 0) return cudaSuccess;
    k_softmax_forward<<<kc_blocks(L, rows * 32, KC_THREADS), KC_THREADS, 0, L->stream>>>(x, y, rows, cols);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_softmax_backward(const kc_cu_launch *L, const float *y, const float *dy, float *dx,
                                               int64_t rows, int cols) {
    if (rows <= 0) return cudaSuccess;
    k_softmax_backward<<<kc_blocks(L, rows * 32, KC_THREADS), KC_THREADS, 0, L->stream>>>(y, dy, dx, rows, cols);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- dropout (src/core/core.h's hash)

__device__ __forceinline__ uint64_t hash64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__device__ __forceinline__ float hash_uniform(uint64_t seed, uint64_t i) {
    return (float)(hash64(seed ^ hash64(i)) >> 40) * (1.0f / 16777216.0f);
}

__global__ void k_dropout_forward(const float *x, float *y, uint8_t *mask, int64_t n, float rate, uint64_t seed) {
    const float keep_frac = 1.0f - rate;
    KC_GRID_LOOP(i, n) {
        const int keep = hash_uniform(seed, (uint64_t)i) >= rate;
        mask[i] = (uint8_t)keep;
        y[i] = keep ? x[i] / keep_frac : 0.0f;
    }
}

__global__ void k_dropout_backward(const float *dy, const uint8_t *mask, float *dx, int64_t n, float rate) {
    const float keep_frac = 1.0f - rate;
    KC_GRID_LOOP(i, n) dx[i] = mask[i] ? dy[i] / keep_frac : 0.0f;
}

extern "C" cudaError_t kc__k_dropout_forward(const kc_cu_launch *L, const float *x, float *y, uint8_t *mask,
                                              int64_t n, float rate, uint64_t seed) {
    if (n <= 0) return cudaSuccess;
    k_dropout_forward<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(x, y, mask, n, rate, seed);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_dropout_backward(const kc_cu_launch *L, const float *dy, const uint8_t *mask,
                                               float *dx, int64_t n, float rate) {
    if (n <= 0) return cudaSuccess;
    k_dropout_backward<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(dy, mask, dx, n, rate);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- normal random numbers (Gaussian noise layers)

__global__ void k_random_normal(float *y, int64_t n, float mean, float stddev, uint64_t seed) {
    KC_GRID_LOOP(i, n) y[i] = mean + stddev * kc__normal_draw(seed, (uint64_t)i);
}

extern "C" cudaError_t kc__k_random_normal(const kc_cu_launch *L, float *y, int64_t n, float mean, float stddev,
                                            uint64_t seed) {
    if (n <= 0) return cudaSuccess;
    k_random_normal<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(y, n, mean, stddev, seed);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- elementwise and layout

__global__ void k_add(float *y, const float *a, const float *b, int64_t n) {
    KC_GRID_LOOP(i, n) y[i] = a[i] + b[i];
}
__global__ void k_axpy(float *y, const float *x, float alpha, int64_t n) {
    KC_GRID_LOOP(i, n) y[i] += alpha * x[i];
}
__global__ void k_scale(float *y, float alpha, int64_t n) {
    KC_GRID_LOOP(i, n) y[i] *= alpha;
}

extern "C" cudaError_t kc__k_add(const kc_cu_launch *L, float *y, const float *a, const float *b, int64_t n) {
    if (n <= 0) return cudaSuccess;
    k_add<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(y, a, b, n);
    return cudaGetLastError();
}
extern "C" cudaError_t kc__k_axpy(const kc_cu_launch *L, float *y, const float *x, float alpha, int64_t n) {
    if (n <= 0) return cudaSuccess;
    k_axpy<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(y, x, alpha, n);
    return cudaGetLastError();
}
extern "C" cudaError_t kc__k_scale(const kc_cu_launch *L, float *y, float alpha, int64_t n) {
    if (n <= 0) return cudaSuccess;
    k_scale<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(y, alpha, n);
    return cudaGetLastError();
}

__global__ void k_scale_rows(float *c, int rows, int cols, int ldc, float beta) {
    const int64_t n = (int64_t)rows * cols;
    KC_GRID_LOOP(i, n) {
        float *p = c + (i / cols) * (int64_t)ldc + (i % cols);
        *p = beta == 0.0f ? 0.0f : *p * beta;
    }
}

extern "C" cudaError_t kc__k_scale_rows(const kc_cu_launch *L, float *c, int rows, int cols, int ldc, float beta) {
    const int64_t n = (int64_t)rows * cols;
    if (n <= 0) return cudaSuccess;
    k_scale_rows<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(c, rows, cols, ldc, beta);
    return cudaGetLastError();
}

template <typename I> __global__ void k_bias_add(float *y, const float *bias, int64_t n, int cols) {
    KC_GRID_LOOP_T(I, i, n) y[i] += bias[i % (I)cols];
}

extern "C" cudaError_t kc__k_bias_add(const kc_cu_launch *L, float *y, const float *bias, int64_t rows, int cols) {
    const int64_t n = rows * cols;
    if (n <= 0) return cudaSuccess;
    KC_LAUNCH_IDX(k_bias_add, n, kc_blocks(L, n, KC_THREADS), KC_THREADS, L->stream, y, bias, n, cols);
    return cudaGetLastError();
}

template <typename I>
__global__ void k_copy_strided(float *dst, int dst_ld, int dst_off, const float *src, int src_ld, int src_off,
                               int64_t rows, int cols) {
    const int64_t n = rows * cols;
    KC_GRID_LOOP_T(I, i, n) {
        const I r = i / (I)cols, j = i % (I)cols;
        dst[(int64_t)r * dst_ld + dst_off + j] = src[(int64_t)r * src_ld + src_off + j];
    }
}

extern "C" cudaError_t kc__k_copy_strided(const kc_cu_launch *L, float *dst, int dst_ld, int dst_off,
                                           const float *src, int src_ld, int src_off, int64_t rows, int cols) {
    const int64_t n = rows * cols;
    if (n <= 0) return cudaSuccess;
    KC_LAUNCH_IDX(k_copy_strided, n, kc_blocks(L, n, KC_THREADS), KC_THREADS, L->stream, dst, dst_ld, dst_off, src,
                  src_ld, src_off, rows, cols);
    return cudaGetLastError();
}

// xp (n, hp, wp, c)[img, i, j, ch] = x (n, h, w, c)[img, i - pt, j - pl, ch] inside x, else 0
template <typename I>
__global__ void k_window_copy(const float *x, float *xp, int n, int h, int w, int c, int hp, int wp, int pt, int pl) {
    const int64_t total = (int64_t)n * hp * wp * c;
    KC_GRID_LOOP_T(I, i, total) {
        const int ch = (int)(i % (I)c);
        I t = i / (I)c;
        const int j = (int)(t % (I)wp);
        t /= (I)wp;
        const int ii = (int)(t % (I)hp);
        const int64_t img = t / (I)hp;
        const int sy = ii - pt, sx = j - pl;
        xp[i] = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? x[((img * h + sy) * w + sx) * c + ch] : 0.0f;
    }
}

// dx (n, h, w, c)[img, i, j, ch] = dxp (n, hp, wp, c)[img, i + pt, j + pl, ch] inside dxp, else 0
template <typename I>
__global__ void k_window_crop(const float *dxp, float *dx, int n, int h, int w, int c, int hp, int wp, int pt,
                              int pl) {
    const int64_t total = (int64_t)n * h * w * c;
    KC_GRID_LOOP_T(I, i, total) {
        const int ch = (int)(i % (I)c);
        I t = i / (I)c;
        const int j = (int)(t % (I)w);
        t /= (I)w;
        const int ii = (int)(t % (I)h);
        const int64_t img = t / (I)h;
        const int sy = ii + pt, sx = j + pl;
        dx[i] = (sy < hp && sx < wp) ? dxp[((img * hp + sy) * wp + sx) * c + ch] : 0.0f;
    }
}

extern "C" cudaError_t kc__k_window_copy(const kc_cu_launch *L, const float *x, float *xp, int n, int h, int w,
                                          int c, int hp, int wp, int pt, int pl) {
    const int64_t total = (int64_t)n * hp * wp * c;
    if (total <= 0) return cudaSuccess;
    KC_LAUNCH_IDX(k_window_copy, total, kc_blocks(L, total, KC_THREADS), KC_THREADS, L->stream, x, xp, n, h, w, c, hp,
                  wp, pt, pl);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_window_crop(const kc_cu_launch *L, const float *dxp, float *dx, int n, int h, int w,
                                          int c, int hp, int wp, int pt, int pl) {
    const int64_t total = (int64_t)n * h * w * c;
    if (total <= 0) return cudaSuccess;
    KC_LAUNCH_IDX(k_window_crop, total, kc_blocks(L, total, KC_THREADS), KC_THREADS, L->stream, dxp, dx, n, h, w, c,
                  hp, wp, pt, pl);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_pad2d(const kc_cu_launch *L, const float *src, float *dst, int n, int h, int w, int c,
                                    int top, int bottom, int left, int right, int backward) {
    const int ph = h + top + bottom, pw = w + left + right;
    return backward ? kc__k_window_crop(L, src, dst, n, h, w, c, ph, pw, top, left)
                    : kc__k_window_copy(L, src, dst, n, h, w, c, ph, pw, top, left);
}

// dst (cols, rows) = src (rows, cols)^T through 32x32 shared-memory tiles; the grid is one
// flat list of tiles (no 65535 limit on either side)
__global__ void k_transpose(const float *src, float *dst, int rows, int cols, int tiles_c) {
    __shared__ float tile[32][33];
    const int bx = (int)(blockIdx.x % tiles_c) * 32, by = (int)(blockIdx.x / tiles_c) * 32;
    for (int k = threadIdx.y; k < 32; k += 8) {
        const int r = by + k, cc = bx + threadIdx.x;
        if (r < rows && cc < cols) tile[k][threadIdx.x] = src[(int64_t)r * cols + cc];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < 32; k += 8) {
        const int cc = bx + k, r = by + threadIdx.x;
        if (cc < cols && r < rows) dst[(int64_t)cc * rows + r] = tile[threadIdx.x][k];
    }
}

extern "C" cudaError_t kc__k_transpose(const kc_cu_launch *L, const float *src, float *dst, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    const int tiles_r = (rows + 31) / 32, tiles_c = (cols + 31) / 32;
    k_transpose<<<(unsigned)((int64_t)tiles_r * tiles_c), dim3(32, 8), 0, L->stream>>>(src, dst, rows, cols, tiles_c);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- optimizer (cpu_optim.c)

__global__ void k_optimizer(kc_cu_opt o, float *param, const float *grad, float *slot0, float *slot1, int64_t n) {
    float gsc = o.grad_scale;
    if (o.norm_sq) { /* clipping by norm, as cpu_optim.c: the square root in double */
        const double norm = sqrt((double)*o.norm_sq);
        if (norm > (double)o.clipnorm) gsc *= (float)((double)o.clipnorm / norm);
    }
    KC_GRID_LOOP(i, n) {
        const float g = grad[i] * gsc;
        switch (o.kind) {
        case KC_OPT_SGD:
            if (o.momentum == 0.0f) {
                param[i] -= o.lr * g;
            } else {
                slot0[i] = o.momentum * slot0[i] - o.lr * g;
                if (o.nesterov) param[i] += o.momentum * slot0[i] - o.lr * g;
                else param[i] += slot0[i];
            }
            break;
        case KC_OPT_ADAM:
        case KC_OPT_ADAMW: {
            float w = param[i];
            w -= w * o.decay;
            slot0[i] += (g - slot0[i]) * o.omb1;
            slot1[i] += (g * g - slot1[i]) * o.omb2;
            param[i] = w - o.alpha * slot0[i] / (sqrtf(slot1[i]) + o.eps);
            break;
        }
        case KC_OPT_RMSPROP: {
            slot0[i] = o.rho * slot0[i] + o.omrho * g * g;
            const float inc = o.lr * g / sqrtf(slot0[i] + o.eps);
            if (o.momentum > 0.0f) {
                slot1[i] = o.momentum * slot1[i] + inc;
                param[i] -= slot1[i];
            } else {
                param[i] -= inc;
            }
            break;
        }
        default: break;
        }
    }
}

extern "C" cudaError_t kc__k_optimizer(const kc_cu_launch *L, const kc_cu_opt *o, float *param, const float *grad,
                                        float *slot0, float *slot1, int64_t n) {
    if (n <= 0) return cudaSuccess;
    k_optimizer<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(*o, param, grad, slot0, slot1, n);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- pooling (cpu_pool.c)

// the valid window rows [*k0, *k1) of output position o along an axis of size n
__device__ __forceinline__ void window(int o, int stride, int pad, int k, int n, int *k0, int *k1) {
    const int i0 = o * stride - pad;
    *k0 = i0 < 0 ? -i0 : 0;
    *k1 = i0 + k > n ? n - i0 : k;
}

// one thread per output element (img, oy, ox, ch)
template <typename I> __global__ void k_pool_forward(kc_pool2d_desc d, const float *x, float *y, int32_t *mask) {
    const int h = d.h, w = d.w, c = d.c, oh = d.oh, ow = d.ow;
    const int is_max = d.kind == KC_POOL_MAX;
    const int64_t total = (int64_t)d.n * oh * ow * c;
    KC_GRID_LOOP_T(I, o, total) {
        const int ch = (int)(o % (I)c);
        I t = o / (I)c;
        const int ox = (int)(t % (I)ow);
        t /= (I)ow;
        const int oy = (int)(t % (I)oh);
        const int64_t img = t / (I)oh;
        int ky0, ky1, kx0, kx1;
        window(oy, d.sh, d.pad_top, d.kh, h, &ky0, &ky1);
        window(ox, d.sw, d.pad_left, d.kw, w, &kx0, &kx1);
        if (ky1 <= ky0 || kx1 <= kx0) { // the window lies in the padding
            y[o] = 0.0f;
            if (mask) mask[o] = -1;
            continue;
        }
        const int iy0 = oy * d.sh - d.pad_top, ix0 = ox * d.sw - d.pad_left;
        float acc = 0.0f;
        int32_t arg = -1;
        int first = 1;
        for (int ky = ky0; ky < ky1; ky++) {
            for (int kx = kx0; kx < kx1; kx++) {
                const int64_t at = ((img * h + (iy0 + ky)) * w + (ix0 + kx)) * c + ch;
                const float v = x[at];
                if (first) {
                    acc = v;
                    arg = (int32_t)at;
                    first = 0;
                } else if (is_max) {
                    if (v > acc) {
                        acc = v;
                        arg = (int32_t)at;
                    }
                } else {
                    acc += v;
                }
            }
        }
        if (!is_max) {
            acc *= 1.0f / (float)((ky1 - ky0) * (kx1 - kx0));
            arg = -1;
        }
        y[o] = acc;
        if (mask) mask[o] = arg;
    }
}

// ceil(a / b) for b > 0 and any a
__device__ __forceinline__ int ceil_div(int a, int b) { return a > 0 ? (a + b - 1) / b : -((-a) / b); }

// one thread per input element: gathers the outputs whose windows cover it, in (oy, ox)
// order, which is the order the CPU backend scatters them
template <typename I>
__global__ void k_pool_backward(kc_pool2d_desc d, const float *dy, const int32_t *mask, float *dx) {
    const int h = d.h, w = d.w, c = d.c, oh = d.oh, ow = d.ow;
    const int is_max = d.kind == KC_POOL_MAX;
    const int64_t total = (int64_t)d.n * h * w * c;
    KC_GRID_LOOP_T(I, idx, total) {
        const int ch = (int)(idx % (I)c);
        I t = idx / (I)c;
        const int ix = (int)(t % (I)w);
        t /= (I)w;
        const int iy = (int)(t % (I)h);
        const int64_t img = t / (I)h;
        int oy0 = ceil_div(iy + d.pad_top - d.kh + 1, d.sh), oy1 = (iy + d.pad_top) / d.sh;
        int ox0 = ceil_div(ix + d.pad_left - d.kw + 1, d.sw), ox1 = (ix + d.pad_left) / d.sw;
        if (oy0 < 0) oy0 = 0;
        if (ox0 < 0) ox0 = 0;
        if (oy1 > oh - 1) oy1 = oh - 1;
        if (ox1 > ow - 1) ox1 = ow - 1;
        float acc = 0.0f;
        for (int oy = oy0; oy <= oy1; oy++) {
            int ky0 = 0, ky1 = 0;
            if (!is_max) window(oy, d.sh, d.pad_top, d.kh, h, &ky0, &ky1);
            for (int ox = ox0; ox <= ox1; ox++) {
                const int64_t o = ((img * oh + oy) * ow + ox) * c + ch;
                if (is_max) {
                    if (mask[o] == (int32_t)idx) acc += dy[o];
                } else {
                    int kx0, kx1;
                    window(ox, d.sw, d.pad_left, d.kw, w, &kx0, &kx1);
                    if (ky1 <= ky0 || kx1 <= kx0) continue;
                    const float inv = 1.0f / (float)((ky1 - ky0) * (kx1 - kx0));
                    acc += dy[o] * inv;
                }
            }
        }
        dx[idx] = acc;
    }
}

extern "C" cudaError_t kc__k_pool_forward(const kc_cu_launch *L, const kc_pool2d_desc *d, const float *x, float *y,
                                           int32_t *mask) {
    const int64_t total = (int64_t)d->n * d->oh * d->ow * d->c;
    if (total <= 0) return cudaSuccess;
    KC_LAUNCH_IDX(k_pool_forward, total, kc_blocks(L, total, KC_THREADS), KC_THREADS, L->stream, *d, x, y, mask);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_pool_backward(const kc_cu_launch *L, const kc_pool2d_desc *d, const float *dy,
                                            const int32_t *mask, float *dx) {
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    if (total <= 0) return cudaSuccess;
    KC_LAUNCH_IDX(k_pool_backward, total, kc_blocks(L, total, KC_THREADS), KC_THREADS, L->stream, *d, dy, mask, dx);
    return cudaGetLastError();
}

// global average pooling: one thread per (image, channel), summing in double in row order
// (the CPU's order, so the sums match it exactly)
__global__ void k_gap_forward(const float *x, float *y, int n, int hw, int c) {
    const int64_t total = (int64_t)n * c;
    const double inv = 1.0 / hw;
    KC_GRID_LOOP(o, total) {
        const int64_t img = o / c, ch = o % c;
        const float *xi = x + img * hw * c + ch;
        double s = 0.0;
        for (int i = 0; i < hw; i++) s += (double)xi[(int64_t)i * c];
        y[o] = (float)(s * inv);
    }
}

template <typename I> __global__ void k_gap_backward(const float *dy, float *dx, int n, int hw, int c) {
    const int64_t total = (int64_t)n * hw * c;
    const float inv = 1.0f / (float)hw;
    KC_GRID_LOOP_T(I, i, total) {
        const I r = i / (I)c, j = i % (I)c;
        dx[i] = dy[(int64_t)(r / (I)hw) * c + j] * inv;
    }
}

extern "C" cudaError_t kc__k_gap_forward(const kc_cu_launch *L, const float *x, float *y, int n, int hw, int c) {
    const int64_t total = (int64_t)n * c;
    if (total <= 0) return cudaSuccess;
    k_gap_forward<<<kc_blocks(L, total, 128), 128, 0, L->stream>>>(x, y, n, hw, c);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_gap_backward(const kc_cu_launch *L, const float *dy, float *dx, int n, int hw, int c) {
    const int64_t total = (int64_t)n * hw * c;
    if (total <= 0) return cudaSuccess;
    KC_LAUNCH_IDX(k_gap_backward, total, kc_blocks(L, total, KC_THREADS), KC_THREADS, L->stream, dy, dx, n, hw, c);
    return cudaGetLastError();
}
