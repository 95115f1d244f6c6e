// kernels_grouped.cu — grouped convolution (Conv2D with 1 < groups), NHWC, kernel
// (KH, KW, CG, F) with CG = C / G input channels per group: output channel k belongs to group
// k / (F / G). DepthwiseConv2D is the case G = C (kernels_dw.cu launches these):
//   forward          one thread per output value: taps in order, then the group's channels
//   backward_data    one thread per input value: a gather over the output pixels whose
//                    windows cover it and the group's filters (no atomics)
//   backward_filter  one block per (tap and group channel, or the bias; 32 filters): 32 x 8
//                    threads sum over the batch's output pixels in double, then combine their
//                    8 partials in a fixed order, so results are the same from run to run
#include <stdint.h>

#include "kernels_common.cuh"

#define KC_GC_THREADS 256

__global__ void k_gc_forward(kc_conv2d_desc d, int groups, const float *x, const float *w, const float *b, float *y) {
    const int64_t total = (int64_t)d.n * d.oh * d.ow * d.f;
    const int cg = d.c / groups, fg = d.f / groups;
    KC_GRID_LOOP(i, total) {
        const int k = (int)(i % d.f);
        int64_t p = i / d.f;
        const int ox = (int)(p % d.ow);
        p /= d.ow;
        const int oy = (int)(p % d.oh), n = (int)(p / d.oh);
        const int c0 = (k / fg) * cg;
        float acc = b ? b[k] : 0.0f;
        for (int r = 0; r < d.kh; r++) {
            const int iy = oy * d.sh - d.pad_top + r * d.dh;
            if (iy < 0 || iy >= d.h) continue;
            for (int s = 0; s < d.kw; s++) {
                const int ix = ox * d.sw - d.pad_left + s * d.dw;
                if (ix < 0 || ix >= d.w) continue;
                const float *xp = x + (((int64_t)n * d.h + iy) * d.w + ix) * d.c + c0;
                const float *wp = w + ((int64_t)r * d.kw + s) * cg * d.f + k;
                for (int ci = 0; ci < cg; ci++) acc += xp[ci] * wp[(int64_t)ci * d.f];
            }
        }
        y[i] = d.relu && acc < 0.0f ? 0.0f : acc;
    }
}

__global__ void k_gc_backward_data(kc_conv2d_desc d, int groups, const float *dy, const float *w, float *dx) {
    const int64_t total = (int64_t)d.n * d.h * d.w * d.c;
    const int cg = d.c / groups, fg = d.f / groups;
    KC_GRID_LOOP(i, total) {
        const int ch = (int)(i % d.c);
        int64_t p = i / d.c;
        const int ix = (int)(p % d.w);
        p /= d.w;
        const int iy = (int)(p % d.h), n = (int)(p / d.h);
        const int g = ch / cg, ci = ch % cg;
        float acc = 0.0f;
        for (int r = 0; r < d.kh; r++) {
            const int t = iy + d.pad_top - r * d.dh;
            if (t < 0 || t % d.sh || t / d.sh >= d.oh) continue;
            for (int s = 0; s < d.kw; s++) {
                const int u = ix + d.pad_left - s * d.dw;
                if (u < 0 || u % d.sw || u / d.sw >= d.ow) continue;
                const float *gp = dy + (((int64_t)n * d.oh + t / d.sh) * d.ow + u / d.sw) * d.f + (int64_t)g * fg;
                const float *wp = w + (((int64_t)r * d.kw + s) * cg + ci) * d.f + (int64_t)g * fg;
                float sum = 0.0f;
                for (int j = 0; j < fg; j++) sum += gp[j] * wp[j];
                acc += sum;
            }
        }
        dx[i] = acc;
    }
}

// blockIdx.x = row * chunks + chunk, row = tap * cg + ci (row == taps * cg: the bias);
// threads (32, 8)
__global__ void k_gc_backward_filter(kc_conv2d_desc d, int groups, const float *x, const float *dy, float *dw,
                                     float *db, int chunks) {
    __shared__ double part[8][32];
    const int cg = d.c / groups, fg = d.f / groups, rows = d.kh * d.kw * cg;
    const int row = (int)blockIdx.x / chunks, k = ((int)blockIdx.x % chunks) * 32 + (int)threadIdx.x;
    const int tap = row / cg, ci = row % cg, r = tap / d.kw, s = tap % d.kw;
    const int64_t pixels = (int64_t)d.n * d.oh * d.ow;
    double acc = 0.0;
    if (k < d.f) {
        const int ch = (k / fg) * cg + ci;
        for (int64_t p = threadIdx.y; p < pixels; p += 8) {
            const float g = dy[p * d.f + k];
            if (row == rows) {
                acc += g;
                continue;
            }
            const int ox = (int)(p % d.ow), oy = (int)((p / d.ow) % d.oh), n = (int)(p / ((int64_t)d.ow * d.oh));
            const int iy = oy * d.sh - d.pad_top + r * d.dh, ix = ox * d.sw - d.pad_left + s * d.dw;
            if (iy < 0 || iy >= d.h || ix < 0 || ix >= d.w) continue;
            acc += (double)(x[(((int64_t)n * d.h + iy) * d.w + ix) * d.c + ch] * g);
        }
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && k < d.f) {
        double t = 0.0;
        for (int j = 0; j < 8; j++) t += part[j][threadIdx.x];
        if (row == rows) db[k] = (float)t;
        else dw[(int64_t)row * d.f + k] = (float)t;
    }
}

extern "C" cudaError_t kc__k_gc_forward(const kc_cu_launch *L, const kc_conv2d_desc *d, int groups, const float *x,
                                         const float *w, const float *b, float *y) {
    const int64_t total = (int64_t)d->n * d->oh * d->ow * d->f;
    k_gc_forward<<<kc_blocks(L, total, KC_GC_THREADS), KC_GC_THREADS, 0, L->stream>>>(*d, groups, x, w, b, y);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_gc_backward_data(const kc_cu_launch *L, const kc_conv2d_desc *d, int groups,
                                               const float *dy, const float *w, float *dx) {
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    k_gc_backward_data<<<kc_blocks(L, total, KC_GC_THREADS), KC_GC_THREADS, 0, L->stream>>>(*d, groups, dy, w, dx);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_gc_backward_filter(const kc_cu_launch *L, const kc_conv2d_desc *d, int groups,
                                                 const float *x, const float *dy, float *dw, float *db) {
    const int chunks = (d->f + 31) / 32, rows = d->kh * d->kw * (d->c / groups) + (db ? 1 : 0);
    k_gc_backward_filter<<<(unsigned)rows * (unsigned)chunks, dim3(32, 8), 0, L->stream>>>(*d, groups, x, dy, dw, db,
                                                                                           chunks);
    return cudaGetLastError();
}
