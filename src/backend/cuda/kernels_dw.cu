// kernels_dw.cu — depthwise convolution (DepthwiseConv2D), NHWC, kernel (KH, KW, F) with
// F = C * M: output channel k reads input channel k / M. Mirrors cpu_depthwise.c:
//   forward          one thread per output value: the sum over the kernel taps in tap order
//   backward_data    one thread per input value: a gather over the output pixels whose
//                    windows cover it (no atomics)
//   backward_filter  one block per (tap or bias, 32 channels): 32 x 8 threads sum over the
//                    batch's output pixels in double, then combine their 8 partials in a
//                    fixed order, so results are the same from run to run
#include <stdint.h>

#include "cuda_kernels.h"

#define KC_DW_THREADS 256

static int dw_blocks(const kc_cu_launch *L, int64_t n) {
    int64_t b = (n + KC_DW_THREADS - 1) / KC_DW_THREADS;
    if (b > L->max_blocks) b = L->max_blocks;
    return b < 1 ? 1 : (int)b;
}

__global__ void k_dw_forward(kc_conv2d_desc d, const float *x, const float *w, const float *b, float *y) {
    const int64_t total = (int64_t)d.n * d.oh * d.ow * d.f;
    const int m = d.f / d.c;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)blockDim.x * gridDim.x) {
        const int k = (int)(i % d.f);
        int64_t p = i / d.f;
        const int ox = (int)(p % d.ow);
        p /= d.ow;
        const int oy = (int)(p % d.oh), n = (int)(p / d.oh);
        const int ch = k / m;
        float acc = b ? b[k] : 0.0f;
        for (int r = 0; r < d.kh; r++) {
            const int iy = oy * d.sh - d.pad_top + r * d.dh;
            if (iy < 0 || iy >= d.h) continue;
            for (int s = 0; s < d.kw; s++) {
                const int ix = ox * d.sw - d.pad_left + s * d.dw;
                if (ix < 0 || ix >= d.w) continue;
                acc += x[(((int64_t)n * d.h + iy) * d.w + ix) * d.c + ch] * w[((int64_t)r * d.kw + s) * d.f + k];
            }
        }
        y[i] = d.relu && acc < 0.0f ? 0.0f : acc;
    }
}

__global__ void k_dw_backward_data(kc_conv2d_desc d, const float *dy, const float *w, float *dx) {
    const int64_t total = (int64_t)d.n * d.h * d.w * d.c;
    const int m = d.f / d.c;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)blockDim.x * gridDim.x) {
        const int ch = (int)(i % d.c);
        int64_t p = i / d.c;
        const int ix = (int)(p % d.w);
        p /= d.w;
        const int iy = (int)(p % d.h), n = (int)(p / d.h);
        float acc = 0.0f;
        for (int r = 0; r < d.kh; r++) {
            const int t = iy + d.pad_top - r * d.dh;
            if (t < 0 || t % d.sh) continue;
            const int oy = t / d.sh;
            if (oy >= d.oh) continue;
            for (int s = 0; s < d.kw; s++) {
                const int u = ix + d.pad_left - s * d.dw;
                if (u < 0 || u % d.sw) continue;
                const int ox = u / d.sw;
                if (ox >= d.ow) continue;
                const float *g = dy + (((int64_t)n * d.oh + oy) * d.ow + ox) * d.f + (int64_t)ch * m;
                const float *wp = w + ((int64_t)r * d.kw + s) * d.f + (int64_t)ch * m;
                float sum = 0.0f;
                for (int j = 0; j < m; j++) sum += g[j] * wp[j];
                acc += sum;
            }
        }
        dx[i] = acc;
    }
}

// blockIdx.x = tap * chunks + chunk (tap == kh * kw: the bias); threads (32, 8)
__global__ void k_dw_backward_filter(kc_conv2d_desc d, const float *x, const float *dy, float *dw, float *db,
                                     int chunks) {
    __shared__ double part[8][32];
    const int taps = d.kh * d.kw, m = d.f / d.c;
    const int tap = (int)blockIdx.x / chunks, k = ((int)blockIdx.x % chunks) * 32 + (int)threadIdx.x;
    const int r = tap / d.kw, s = tap % d.kw;
    const int64_t pixels = (int64_t)d.n * d.oh * d.ow;
    double acc = 0.0;
    if (k < d.f) {
        for (int64_t p = threadIdx.y; p < pixels; p += 8) {
            const float g = dy[p * d.f + k];
            if (tap == taps) {
                acc += g;
                continue;
            }
            const int ox = (int)(p % d.ow), oy = (int)((p / d.ow) % d.oh), n = (int)(p / ((int64_t)d.ow * d.oh));
            const int iy = oy * d.sh - d.pad_top + r * d.dh, ix = ox * d.sw - d.pad_left + s * d.dw;
            if (iy < 0 || iy >= d.h || ix < 0 || ix >= d.w) continue;
            acc += (double)(x[(((int64_t)n * d.h + iy) * d.w + ix) * d.c + k / m] * g);
        }
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && k < d.f) {
        double t = 0.0;
        for (int j = 0; j < 8; j++) t += part[j][threadIdx.x];
        if (tap == taps) db[k] = (float)t;
        else dw[(int64_t)tap * d.f + k] = (float)t;
    }
}

extern "C" cudaError_t kc__k_dw_forward(const kc_cu_launch *L, const kc_conv2d_desc *d, const float *x,
                                         const float *w, const float *b, float *y) {
    const int64_t total = (int64_t)d->n * d->oh * d->ow * d->f;
    k_dw_forward<<<dw_blocks(L, total), KC_DW_THREADS, 0, L->stream>>>(*d, x, w, b, y);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_dw_backward_data(const kc_cu_launch *L, const kc_conv2d_desc *d, const float *dy,
                                               const float *w, float *dx) {
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    k_dw_backward_data<<<dw_blocks(L, total), KC_DW_THREADS, 0, L->stream>>>(*d, dy, w, dx);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_dw_backward_filter(const kc_cu_launch *L, const kc_conv2d_desc *d, const float *x,
                                                 const float *dy, float *dw, float *db) {
    const int chunks = (d->f + 31) / 32, taps = d->kh * d->kw + (db ? 1 : 0);
    k_dw_backward_filter<<<(unsigned)(taps * chunks), dim3(32, 8), 0, L->stream>>>(*d, x, dy, dw, db, chunks);
    return cudaGetLastError();
}
