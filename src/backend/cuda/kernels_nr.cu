// kernels_nr.cu — normalisation and resampling kernels, mirroring
// cpu_groupnorm.c and cpu_resample.c formula for formula:
//   channel_affine, normalize   one thread per value
//   groupnorm forward / dx      one block per (example, group): 256 threads sum its values
//                               in double and combine them in a fixed tree order
//   groupnorm dgamma / dbeta    one block per 32 channels, 32 x 8 threads over the rows in
//                               double, partials combined in a fixed order
//   upsample forward            one thread per output value
//   upsample backward           one thread per input value, a gather over the output pixels
//                               that read it (no atomics)
//   permute                     one thread per output value
// Every reduction has a fixed order: results are the same from run to run.
#include <math.h>
#include <stdint.h>

#include "kernels_common.cuh"

#define KC_NR_THREADS 256

__global__ void k_channel_affine(const float *x, float *y, int64_t n, int c, const float *scale, const float *shift) {
    KC_GRID_LOOP(i, n) {
        const int k = (int)(i % c);
        y[i] = x[i] * (scale ? scale[k] : 1.0f) + (shift ? shift[k] : 0.0f);
    }
}

__global__ void k_normalize(const float *x, float *y, int64_t n, int c, const float *mean, const float *var,
                            int invert) {
    KC_GRID_LOOP(i, n) {
        const int k = (int)(i % c);
        const float sd = fmaxf(sqrtf(var[k]), 1e-7f), m = mean ? mean[k] : 0.0f;
        y[i] = invert ? m + x[i] * sd : (x[i] - m) / sd;
    }
}

// sums of a and b over the block, in a fixed order; the result in a[0], b[0]
__device__ void block_sum2(double *a, double *b) {
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        __syncthreads();
        if ((int)threadIdx.x < h) {
            a[threadIdx.x] += a[threadIdx.x + h];
            b[threadIdx.x] += b[threadIdx.x + h];
        }
    }
    __syncthreads();
}

// blockIdx.x = (example, group); value j of the group is row j / cg, channel g * cg + j % cg
__global__ void k_gn_forward(const float *x, float *y, int64_t s, int c, int groups, const float *gamma,
                             const float *beta, float eps, float *save_mean, float *save_inv) {
    __shared__ double sa[KC_NR_THREADS], sb[KC_NR_THREADS];
    const int64_t p = blockIdx.x, e = p / groups;
    const int g = (int)(p % groups), cg = c / groups;
    const int64_t cnt = s * cg, base = e * s * c + (int64_t)g * cg;
    double sum = 0, sq = 0;
    for (int64_t j = threadIdx.x; j < cnt; j += blockDim.x) {
        const double v = x[base + (j / cg) * c + j % cg];
        sum += v;
        sq += v * v;
    }
    sa[threadIdx.x] = sum, sb[threadIdx.x] = sq;
    block_sum2(sa, sb);
    const double mean = sa[0] / (double)cnt;
    double var = sb[0] / (double)cnt - mean * mean;
    if (var < 0) var = 0;
    const float inv = (float)(1.0 / sqrt(var + (double)eps)), mu = (float)mean;
    if (threadIdx.x == 0) {
        if (save_mean) save_mean[p] = mu;
        if (save_inv) save_inv[p] = inv;
    }
    for (int64_t j = threadIdx.x; j < cnt; j += blockDim.x) {
        const int64_t idx = base + (j / cg) * c + j % cg;
        const int k = g * cg + (int)(j % cg);
        float v = (x[idx] - mu) * inv;
        if (gamma) v *= gamma[k];
        if (beta) v += beta[k];
        y[idx] = v;
    }
}

__global__ void k_gn_backward_dx(const float *x, const float *dy, float *dx, int64_t s, int c, int groups,
                                 const float *gamma, const float *save_mean, const float *save_inv) {
    __shared__ double sa[KC_NR_THREADS], sb[KC_NR_THREADS];
    const int64_t p = blockIdx.x, e = p / groups;
    const int g = (int)(p % groups), cg = c / groups;
    const int64_t cnt = s * cg, base = e * s * c + (int64_t)g * cg;
    const float mu = save_mean[p], inv = save_inv[p];
    double sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < cnt; j += blockDim.x) {
        const int64_t idx = base + (j / cg) * c + j % cg;
        const int k = g * cg + (int)(j % cg);
        const float gv = gamma ? dy[idx] * gamma[k] : dy[idx];
        sg += gv;
        sgx += (double)gv * (double)((x[idx] - mu) * inv);
    }
    sa[threadIdx.x] = sg, sb[threadIdx.x] = sgx;
    block_sum2(sa, sb);
    const float mg = (float)(sa[0] / (double)cnt), mgx = (float)(sb[0] / (double)cnt);
    for (int64_t j = threadIdx.x; j < cnt; j += blockDim.x) {
        const int64_t idx = base + (j / cg) * c + j % cg;
        const int k = g * cg + (int)(j % cg);
        const float gv = gamma ? dy[idx] * gamma[k] : dy[idx];
        dx[idx] = inv * (gv - mg - (x[idx] - mu) * inv * mgx);
    }
}

// threads (32, 8): channel blockIdx.x * 32 + tx, rows ty, ty + 8, ...
__global__ void k_gn_param_grads(const float *x, const float *dy, int64_t rows, int64_t s, int c, int groups,
                                 const float *mean, const float *inv, float *dgamma, float *dbeta) {
    __shared__ double pg[8][32], pb[8][32];
    const int tx = threadIdx.x, ty = threadIdx.y, k = blockIdx.x * 32 + tx, cg = c / groups;
    double sg = 0, sb = 0;
    if (k < c)
        for (int64_t r = ty; r < rows; r += 8) {
            const int64_t q = (r / s) * groups + k / cg, idx = r * c + k;
            const double gv = dy[idx];
            sb += gv;
            sg += gv * (double)((x[idx] - mean[q]) * inv[q]);
        }
    pg[ty][tx] = sg, pb[ty][tx] = sb;
    __syncthreads();
    if (ty == 0 && k < c) {
        double a = 0, b = 0;
        for (int t = 0; t < 8; t++) a += pg[t][tx], b += pb[t][tx];
        if (dgamma) dgamma[k] = (float)a;
        if (dbeta) dbeta[k] = (float)b;
    }
}

// the two source indices and the second one's weight (cpu_resample.c's kc__cpu_bilinear_tap)
__device__ void bilinear_tap(int o, int factor, int in, int *i0, int *i1, float *frac) {
    float src = ((float)o + 0.5f) / (float)factor - 0.5f;
    if (src < 0.0f) src = 0.0f;
    int a = (int)src;
    if (a > in - 1) a = in - 1;
    *i0 = a;
    *i1 = a + 1 < in ? a + 1 : in - 1;
    *frac = *i1 == a ? 0.0f : src - (float)a;
}

__global__ void k_upsample_forward(kc_resample2d_desc d, const float *x, float *y) {
    const int oh = d.h * d.sh, ow = d.w * d.sw;
    const int64_t total = (int64_t)d.n * oh * ow * d.c;
    KC_GRID_LOOP(i, total) {
        const int k = (int)(i % d.c);
        int64_t p = i / d.c;
        const int ox = (int)(p % ow);
        p /= ow;
        const int oy = (int)(p % oh), n = (int)(p / oh);
        const float *xi = x + (int64_t)n * d.h * d.w * d.c;
        if (!d.bilinear) {
            y[i] = xi[((int64_t)(oy / d.sh) * d.w + ox / d.sw) * d.c + k];
            continue;
        }
        int y0, y1, x0, x1;
        float fy, fx;
        bilinear_tap(oy, d.sh, d.h, &y0, &y1, &fy);
        bilinear_tap(ox, d.sw, d.w, &x0, &x1, &fx);
        const float a = xi[((int64_t)y0 * d.w + x0) * d.c + k], b = xi[((int64_t)y0 * d.w + x1) * d.c + k];
        const float pp = xi[((int64_t)y1 * d.w + x0) * d.c + k], q = xi[((int64_t)y1 * d.w + x1) * d.c + k];
        const float top = a + (b - a) * fx, bot = pp + (q - pp) * fx;
        y[i] = top + (bot - top) * fy;
    }
}

// weight of input index i in output o's interpolation along one axis
__device__ float tap_weight(int o, int factor, int in, int i) {
    int i0, i1;
    float f;
    bilinear_tap(o, factor, in, &i0, &i1, &f);
    return (i0 == i ? 1.0f - f : 0.0f) + (i1 == i ? f : 0.0f);
}

__global__ void k_upsample_backward(kc_resample2d_desc d, const float *dy, float *dx) {
    const int oh = d.h * d.sh, ow = d.w * d.sw;
    const int64_t total = (int64_t)d.n * d.h * d.w * d.c;
    KC_GRID_LOOP(i, total) {
        const int k = (int)(i % d.c);
        int64_t p = i / d.c;
        const int ix = (int)(p % d.w);
        p /= d.w;
        const int iy = (int)(p % d.h), n = (int)(p / d.h);
        const float *g = dy + (int64_t)n * oh * ow * d.c + k;
        float acc = 0.0f;
        if (!d.bilinear) {
            for (int a = 0; a < d.sh; a++)
                for (int b = 0; b < d.sw; b++) acc += g[((int64_t)(iy * d.sh + a) * ow + ix * d.sw + b) * d.c];
            dx[i] = acc;
            continue;
        }
        // the outputs that read input row iy lie within rows [(iy - 1) * sh, (iy + 2) * sh)
        const int oy0 = max(0, (iy - 1) * d.sh), oy1 = min(oh, (iy + 2) * d.sh);
        const int ox0 = max(0, (ix - 1) * d.sw), ox1 = min(ow, (ix + 2) * d.sw);
        for (int oy = oy0; oy < oy1; oy++) {
            const float wy = tap_weight(oy, d.sh, d.h, iy);
            if (wy == 0.0f) continue;
            for (int ox = ox0; ox < ox1; ox++) {
                const float wx = tap_weight(ox, d.sw, d.w, ix);
                if (wx != 0.0f) acc += wy * wx * g[((int64_t)oy * ow + ox) * d.c];
            }
        }
        dx[i] = acc;
    }
}

typedef struct perm_args {
    int rank;
    int64_t out_dim[4], src_stride[4]; // the output's axes and their strides in x
    int64_t size;
} perm_args;

__global__ void k_permute(perm_args a, const float *x, float *y, int64_t total) {
    KC_GRID_LOOP(i, total) {
        int64_t t = i % a.size, src = (i / a.size) * a.size;
        for (int j = a.rank - 1; j >= 0; j--) {
            src += (t % a.out_dim[j]) * a.src_stride[j];
            t /= a.out_dim[j];
        }
        y[i] = x[src];
    }
}

extern "C" {

cudaError_t kc__k_channel_affine(const kc_cu_launch *L, const float *x, float *y, int64_t rows, int c,
                                 const float *scale, const float *shift) {
    const int64_t n = rows * c;
    k_channel_affine<<<kc_blocks(L, n, KC_NR_THREADS), KC_NR_THREADS, 0, L->stream>>>(x, y, n, c, scale, shift);
    return cudaGetLastError();
}

cudaError_t kc__k_normalize(const kc_cu_launch *L, const float *x, float *y, int64_t rows, int c, const float *mean,
                            const float *var, int invert) {
    const int64_t n = rows * c;
    k_normalize<<<kc_blocks(L, n, KC_NR_THREADS), KC_NR_THREADS, 0, L->stream>>>(x, y, n, c, mean, var, invert);
    return cudaGetLastError();
}

cudaError_t kc__k_groupnorm_forward(const kc_cu_launch *L, const float *x, float *y, int n, int64_t s, int c,
                                    int groups, const float *gamma, const float *beta, float eps, float *save_mean,
                                    float *save_inv) {
    k_gn_forward<<<(unsigned)((int64_t)n * groups), KC_NR_THREADS, 0, L->stream>>>(x, y, s, c, groups, gamma, beta,
                                                                                      eps, save_mean, save_inv);
    return cudaGetLastError();
}

cudaError_t kc__k_groupnorm_backward(const kc_cu_launch *L, const float *x, const float *dy, float *dx, int n,
                                     int64_t s, int c, int groups, const float *gamma, const float *save_mean,
                                     const float *save_inv, float *dgamma, float *dbeta) {
    if (dgamma || dbeta)
        k_gn_param_grads<<<(c + 31) / 32, dim3(32, 8), 0, L->stream>>>(x, dy, (int64_t)n * s, s, c, groups, save_mean,
                                                                       save_inv, dgamma, dbeta);
    if (dx)
        k_gn_backward_dx<<<(unsigned)((int64_t)n * groups), KC_NR_THREADS, 0, L->stream>>>(x, dy, dx, s, c, groups,
                                                                                              gamma, save_mean, save_inv);
    return cudaGetLastError();
}

cudaError_t kc__k_upsample2d_forward(const kc_cu_launch *L, const kc_resample2d_desc *d, const float *x, float *y) {
    const int64_t n = (int64_t)d->n * d->h * d->sh * d->w * d->sw * d->c;
    k_upsample_forward<<<kc_blocks(L, n, KC_NR_THREADS), KC_NR_THREADS, 0, L->stream>>>(*d, x, y);
    return cudaGetLastError();
}

cudaError_t kc__k_upsample2d_backward(const kc_cu_launch *L, const kc_resample2d_desc *d, const float *dy, float *dx) {
    const int64_t n = (int64_t)d->n * d->h * d->w * d->c;
    k_upsample_backward<<<kc_blocks(L, n, KC_NR_THREADS), KC_NR_THREADS, 0, L->stream>>>(*d, dy, dx);
    return cudaGetLastError();
}

cudaError_t kc__k_permute(const kc_cu_launch *L, const float *x, float *y, int n, int rank, const int *dims,
                          const int *perm) {
    perm_args a = {rank, {1, 1, 1, 1}, {0, 0, 0, 0}, 1};
    int64_t xs[4];
    for (int i = rank - 1; i >= 0; i--) xs[i] = a.size, a.size *= dims[i];
    for (int j = 0; j < rank; j++) a.out_dim[j] = dims[perm[j]], a.src_stride[j] = xs[perm[j]];
    const int64_t total = (int64_t)n * a.size;
    k_permute<<<kc_blocks(L, total, KC_NR_THREADS), KC_NR_THREADS, 0, L->stream>>>(a, x, y, total);
    return cudaGetLastError();
}

}  // extern "C"
