// kernels_bcast.cu — broadcasting binary operations and tensor-scalar operations, formula
// for formula as cpu_bcast.c. Forward: one thread per output element,
// its index split over the descriptor's axes. Backward: one thread per element of the
// operand's gradient, summing over the axes it is broadcast along (no atomics, so the sum
// runs in the same order on every call).
#include <stdint.h>

#include "kernels_common.cuh"

#define KC_THREADS 256

__device__ __forceinline__ float bin_apply(int op, float a, float b) {
    switch (op) {
    case KC_BIN_ADD: return a + b;
    case KC_BIN_SUB: return a - b;
    case KC_BIN_MUL: return a * b;
    case KC_BIN_DIV: return a / b;
    case KC_BIN_MAX: return a >= b ? a : b;
    case KC_BIN_MIN: return a <= b ? a : b;
    case KC_BIN_PRELU: return a > 0.0f ? a : b * a;
    default: return 0.0f;
    }
}

// d y / d a (side 0) or d y / d b (side 1)
__device__ __forceinline__ float bin_grad(int op, int side_b, float a, float b) {
    switch (op) {
    case KC_BIN_ADD: return 1.0f;
    case KC_BIN_SUB: return side_b ? -1.0f : 1.0f;
    case KC_BIN_MUL: return side_b ? a : b;
    case KC_BIN_DIV: return side_b ? -a / (b * b) : 1.0f / b;
    case KC_BIN_MAX: return (a >= b) != side_b ? 1.0f : 0.0f;
    case KC_BIN_MIN: return (a <= b) != side_b ? 1.0f : 0.0f;
    case KC_BIN_PRELU: return side_b ? (a > 0.0f ? 0.0f : a) : (a > 0.0f ? 1.0f : b);
    default: return 0.0f;
    }
}

__global__ void k_binary_forward(int op, kc_bcast_desc d, int64_t n, const float *a, const float *b, float *y) {
    KC_GRID_LOOP(i, n) {
        int64_t r = i, oa = 0, ob = 0;
        for (int k = d.rank - 1; k >= 0; k--) {
            const int64_t q = r % d.dims[k];
            r /= d.dims[k];
            oa += q * d.sa[k], ob += q * d.sb[k];
        }
        y[i] = bin_apply(op, a[oa], b[ob]);
    }
}

// g (the operand's own size gsize) for side: thread t's element is its index over the
// operand's own axes (stride != 0), summed over the others (stride == 0, size > 1)
__global__ void k_binary_grad(int op, int side_b, kc_bcast_desc d, int64_t gsize, int64_t nred, const float *a,
                              const float *b, const float *dy, float *g) {
    const int64_t *s = side_b ? d.sb : d.sa;
    KC_GRID_LOOP(t, gsize) {
        // the y index of the element's first contribution, axis by axis
        int64_t own[KC_BCAST_MAX_RANK];
        int64_t r = t;
        for (int k = d.rank - 1; k >= 0; k--) {
            own[k] = 0;
            if (s[k] == 0) continue;
            own[k] = r % d.dims[k];
            r /= d.dims[k];
        }
        float acc = 0.0f;
        for (int64_t u = 0; u < nred; u++) {
            int64_t rr = u, oy = 0, oa = 0, ob = 0, stride_y = 1;
            for (int k = d.rank - 1; k >= 0; k--) {
                int64_t q = own[k];
                if (s[k] == 0) {
                    q = rr % d.dims[k];
                    rr /= d.dims[k];
                }
                oy += q * stride_y, oa += q * d.sa[k], ob += q * d.sb[k];
                stride_y *= d.dims[k];
            }
            const float av = a ? a[oa] : 0.0f, bv = b ? b[ob] : 0.0f;
            acc += dy[oy] * bin_grad(op, side_b, av, bv);
        }
        g[t] = acc;
    }
}

extern "C" cudaError_t kc__k_binary_forward(const kc_cu_launch *L, int op, const kc_bcast_desc *d, const float *a,
                                            const float *b, float *y) {
    int64_t n = 1;
    for (int k = 0; k < d->rank; k++) n *= d->dims[k];
    if (n <= 0) return cudaSuccess;
    k_binary_forward<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(op, *d, n, a, b, y);
    return cudaGetLastError();
}

static cudaError_t grad_side(const kc_cu_launch *L, int op, int side_b, const kc_bcast_desc *d, const float *a,
                             const float *b, const float *dy, float *g) {
    const int64_t *s = side_b ? d->sb : d->sa;
    int64_t gsize = 1, nred = 1;
    for (int k = 0; k < d->rank; k++) {
        if (s[k]) gsize *= d->dims[k];
        else nred *= d->dims[k];
    }
    if (gsize <= 0) return cudaSuccess;
    k_binary_grad<<<kc_blocks(L, gsize, KC_THREADS), KC_THREADS, 0, L->stream>>>(op, side_b, *d, gsize, nred, a, b,
                                                                                    dy, g);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_binary_backward(const kc_cu_launch *L, int op, const kc_bcast_desc *d, const float *a,
                                             const float *b, const float *dy, float *da, float *db) {
    cudaError_t e = cudaSuccess;
    if (da) e = grad_side(L, op, 0, d, a, b, dy, da);
    if (e == cudaSuccess && db) e = grad_side(L, op, 1, d, a, b, dy, db);
    return e;
}

__global__ void k_scalar_forward(int op, const float *x, float s, int scalar_first, float *y, int64_t n) {
    KC_GRID_LOOP(i, n) { y[i] = scalar_first ? bin_apply(op, s, x[i]) : bin_apply(op, x[i], s); }
}

// the tensor is b when the scalar comes first; ties of MAX/MIN go to the tensor, as the CPU
__global__ void k_scalar_backward(int op, const float *x, float s, int scalar_first, const float *dy, float *dx,
                                  int64_t n) {
    KC_GRID_LOOP(i, n) {
        const float v = x ? x[i] : 0.0f;
        float g;
        if (op == KC_BIN_MAX) g = v >= s ? 1.0f : 0.0f;
        else if (op == KC_BIN_MIN) g = v <= s ? 1.0f : 0.0f;
        else g = scalar_first ? bin_grad(op, 1, s, v) : bin_grad(op, 0, v, s);
        dx[i] = dy[i] * g;
    }
}

extern "C" cudaError_t kc__k_scalar_forward(const kc_cu_launch *L, int op, const float *x, float s, int scalar_first,
                                            float *y, int64_t n) {
    if (n <= 0) return cudaSuccess;
    k_scalar_forward<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(op, x, s, scalar_first, y, n);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_scalar_backward(const kc_cu_launch *L, int op, const float *x, float s,
                                             int scalar_first, const float *dy, float *dx, int64_t n) {
    if (n <= 0) return cudaSuccess;
    k_scalar_backward<<<kc_blocks(L, n, KC_THREADS), KC_THREADS, 0, L->stream>>>(op, x, s, scalar_first, dy, dx, n);
    return cudaGetLastError();
}
