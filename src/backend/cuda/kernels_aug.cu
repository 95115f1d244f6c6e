// kernels_aug.cu — the augmentation layers' kernels (see cpu_augment.c), NHWC:
//   sample2d forward   one thread per output value: its taps (backend/aug_taps.h, shared with
//                      the CPU) in tap order
//   sample2d backward  dx zeroed, then one thread per output value adds w * dy into the input
//                      values its taps read (atomicAdd: the order of the additions varies)
//   color2d            one block per (image, channel): a fixed-order tree reduction for the
//                      channel's mean (forward) or masked gradient mean (backward), then the
//                      elementwise pass over that channel's values
#include <stdint.h>

#include "backend/aug_taps.h"
#include "kernels_common.cuh"

#define KC_AUG_THREADS 256

// The taps of output value i (image n, channel k).
__device__ int value_taps(const kc_sample2d_desc &d, const float *mats, int64_t i, int *n, int *k, int64_t pix[4],
                          float wt[4]) {
    *k = (int)(i % d.c);
    int64_t p = i / d.c;
    const int ox = (int)(p % d.ow);
    p /= d.ow;
    const int oy = (int)(p % d.oh);
    *n = (int)(p / d.oh);
    return kc__aug_taps(&d, mats ? mats + (int64_t)*n * 6 : d.m, oy, ox, pix, wt);
}

__global__ void k_sample2d_forward(kc_sample2d_desc d, const float *mats, const float *x, float *y) {
    const int64_t total = (int64_t)d.n * d.oh * d.ow * d.c;
    KC_GRID_LOOP(i, total) {
        int n, k;
        int64_t pix[4];
        float wt[4];
        const int nt = value_taps(d, mats, i, &n, &k, pix, wt);
        const float *xi = x + (int64_t)n * d.h * d.w * d.c;
        float acc = 0.0f;
        for (int t = 0; t < nt; t++) acc += wt[t] * (pix[t] < 0 ? d.fill_value : xi[pix[t] * d.c + k]);
        y[i] = acc;
    }
}

__global__ void k_sample2d_backward(kc_sample2d_desc d, const float *mats, const float *dy, float *dx) {
    const int64_t total = (int64_t)d.n * d.oh * d.ow * d.c;
    KC_GRID_LOOP(i, total) {
        int n, k;
        int64_t pix[4];
        float wt[4];
        const int nt = value_taps(d, mats, i, &n, &k, pix, wt);
        float *dxi = dx + (int64_t)n * d.h * d.w * d.c;
        for (int t = 0; t < nt; t++)
            if (pix[t] >= 0 && wt[t] != 0.0f) atomicAdd(dxi + pix[t] * d.c + k, wt[t] * dy[i]);
    }
}

// The block's sum of v over its channel's pixels (masked by lo < y < hi when y is given),
// in a fixed order; every thread gets it.
__device__ double aug_channel_sum(const kc_color2d_desc &d, const float *v, const float *y, int k) {
    __shared__ double part[KC_AUG_THREADS];
    double acc = 0.0;
    for (int64_t p = threadIdx.x; p < d.hw; p += blockDim.x) {
        const int64_t i = p * d.c + k;
        if (!y || (y[i] > d.lo && y[i] < d.hi)) acc += v[i];
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    const double total = part[0];
    __syncthreads();
    return total;
}

__global__ void k_color2d_forward(kc_color2d_desc d, const float *params, const float *x, float *y) {
    const int n = (int)(blockIdx.x / d.c), k = (int)(blockIdx.x % d.c);
    const float f = params[2 * n], dd = params[2 * n + 1];
    const float *xi = x + (int64_t)n * d.hw * d.c;
    float *yi = y + (int64_t)n * d.hw * d.c;
    const float m = d.contrast ? (float)(aug_channel_sum(d, xi, NULL, k) / (double)d.hw) : 0.0f;
    for (int64_t p = threadIdx.x; p < d.hw; p += blockDim.x) {
        const int64_t i = p * d.c + k;
        const float v = (xi[i] - m) * f + m + dd;
        yi[i] = v < d.lo ? d.lo : (v > d.hi ? d.hi : v);
    }
}

__global__ void k_color2d_backward(kc_color2d_desc d, const float *params, const float *y, const float *dy,
                                   float *dx) {
    const int n = (int)(blockIdx.x / d.c), k = (int)(blockIdx.x % d.c);
    const float f = params[2 * n];
    const float *yi = y + (int64_t)n * d.hw * d.c, *gi = dy + (int64_t)n * d.hw * d.c;
    float *dxi = dx + (int64_t)n * d.hw * d.c;
    const float mg = d.contrast ? (float)(aug_channel_sum(d, gi, yi, k) / (double)d.hw) : 0.0f;
    for (int64_t p = threadIdx.x; p < d.hw; p += blockDim.x) {
        const int64_t i = p * d.c + k;
        const float g = yi[i] > d.lo && yi[i] < d.hi ? gi[i] : 0.0f;
        dxi[i] = f * g + (d.contrast ? (1.0f - f) * mg : 0.0f);
    }
}

extern "C" cudaError_t kc__k_sample2d_forward(const kc_cu_launch *L, const kc_sample2d_desc *d, const float *mats,
                                               const float *x, float *y) {
    const int64_t total = (int64_t)d->n * d->oh * d->ow * d->c;
    k_sample2d_forward<<<kc_blocks(L, total, KC_AUG_THREADS), KC_AUG_THREADS, 0, L->stream>>>(*d, mats, x, y);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_sample2d_backward(const kc_cu_launch *L, const kc_sample2d_desc *d, const float *mats,
                                                const float *dy, float *dx) {
    cudaError_t e = cudaMemsetAsync(dx, 0, (size_t)d->n * d->h * d->w * d->c * sizeof(float), L->stream);
    if (e != cudaSuccess) return e;
    const int64_t total = (int64_t)d->n * d->oh * d->ow * d->c;
    k_sample2d_backward<<<kc_blocks(L, total, KC_AUG_THREADS), KC_AUG_THREADS, 0, L->stream>>>(*d, mats, dy, dx);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_color2d_forward(const kc_cu_launch *L, const kc_color2d_desc *d, const float *params,
                                              const float *x, float *y) {
    k_color2d_forward<<<(unsigned)((int64_t)d->n * d->c), KC_AUG_THREADS, 0, L->stream>>>(*d, params, x, y);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_color2d_backward(const kc_cu_launch *L, const kc_color2d_desc *d, const float *params,
                                               const float *y, const float *dy, float *dx) {
    k_color2d_backward<<<(unsigned)((int64_t)d->n * d->c), KC_AUG_THREADS, 0, L->stream>>>(*d, params, y, dy, dx);
    return cudaGetLastError();
}
