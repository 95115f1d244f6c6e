// kernels_red.cu — the CUDA backend's reductions: column sums (bias gradients, batch
// norm), losses, the accuracy count and sums of squares. Every sum is in double and in a
// fixed order (per-block partials, then one ordered pass), so results do not change from
// run to run; the formulas are the CPU backend's (cpu_misc.c, cpu_norm.c, cpu_loss.c).
#include <math.h>
#include <stdint.h>

#include "kernels_common.cuh"

#define KC_THREADS 256
#define KC_LOSS_EPS 1e-7f

static size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

// ---------------------------------------------------------------- column sums
// a (rows, cols) with row stride ld: a block of 32 columns x 8 row lanes walks one part of
// the rows; part sums go to part1/part2 (P, cols), then a per-column pass adds the parts
// in order.

enum { CS_SUM = 0, CS_SUM_SQ = 1, CS_DY_XC = 2 };

static int colsum_parts(int64_t rows) {
    int64_t p = rows / 1024;
    if (p < 1) p = 1;
    if (p > 256) p = 256;
    return (int)p;
}

extern "C" size_t kc__k_colsum_scratch(int64_t rows, int cols) {
    return 2 * align256((size_t)colsum_parts(rows) * (size_t)cols * sizeof(double));
}

template <int KIND>
__global__ void k_colsum_part(const float *a, const float *b, const float *p, int64_t rows, int cols, int64_t ld,
                              int64_t rows_per_part, double *part1, double *part2) {
    __shared__ double s1s[8][33], s2s[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col = blockIdx.x * 32 + tx;
    const int part = blockIdx.y;
    const int64_t r0 = (int64_t)part * rows_per_part;
    const int64_t r1 = r0 + rows_per_part < rows ? r0 + rows_per_part : rows;
    double s1 = 0.0, s2 = 0.0;
    if (col < cols) {
        const double pj = KIND == CS_DY_XC ? (double)p[col] : 0.0;
        for (int64_t r = r0 + ty; r < r1; r += 8) {
            const double v = (double)a[r * ld + col];
            if (KIND == CS_SUM) {
                s1 += v;
            } else if (KIND == CS_SUM_SQ) {
                s1 += v;
                s2 += v * v;
            } else {
                const double g = (double)b[r * ld + col];
                s1 += g;
                s2 += g * (v - pj);
            }
        }
    }
    s1s[ty][tx] = s1;
    s2s[ty][tx] = s2;
    __syncthreads();
    if (ty == 0 && col < cols) {
        double t1 = 0.0, t2 = 0.0;
        for (int k = 0; k < 8; k++) {
            t1 += s1s[k][tx];
            t2 += s2s[k][tx];
        }
        part1[(int64_t)part * cols + col] = t1;
        if (KIND != CS_SUM) part2[(int64_t)part * cols + col] = t2;
    }
}

static cudaError_t colsum(const kc_cu_launch *L, int kind, const float *a, const float *b, const float *p,
                          int64_t rows, int cols, int64_t ld, double *part1, double *part2, int *parts) {
    const int P = colsum_parts(rows);
    const int64_t per = (rows + P - 1) / P;
    dim3 grid((unsigned)((cols + 31) / 32), (unsigned)P), block(32, 8);
    if (kind == CS_SUM) k_colsum_part<CS_SUM><<<grid, block, 0, L->stream>>>(a, b, p, rows, cols, ld, per, part1, part2);
    else if (kind == CS_SUM_SQ)
        k_colsum_part<CS_SUM_SQ><<<grid, block, 0, L->stream>>>(a, b, p, rows, cols, ld, per, part1, part2);
    else k_colsum_part<CS_DY_XC><<<grid, block, 0, L->stream>>>(a, b, p, rows, cols, ld, per, part1, part2);
    *parts = P;
    return cudaGetLastError();
}

__global__ void k_bias_finish(const double *part1, int P, int cols, float *db) {
    KC_GRID_LOOP(j, (int64_t)cols) {
        double s = 0.0;
        for (int k = 0; k < P; k++) s += part1[(int64_t)k * cols + j];
        db[j] = (float)s;
    }
}

extern "C" cudaError_t kc__k_bias_grad(const kc_cu_launch *L, const float *dy, float *db, int64_t rows, int cols,
                                        void *scratch) {
    if (cols <= 0) return cudaSuccess;
    if (rows <= 0) return cudaMemsetAsync(db, 0, (size_t)cols * sizeof(float), L->stream);
    double *part1 = (double *)scratch; // (P, cols)
    int P = 0;
    cudaError_t e = colsum(L, CS_SUM, dy, NULL, NULL, rows, cols, cols, part1, NULL, &P);
    if (e != cudaSuccess) return e;
    k_bias_finish<<<kc_blocks(L, cols, 128), 128, 0, L->stream>>>(part1, P, cols, db);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- batch normalization

extern "C" size_t kc__k_bn_scratch(int64_t rows, int c) {
    return kc__k_colsum_scratch(rows, c) + align256(3 * (size_t)c * sizeof(float));
}

// per channel: statistics, saved mean and 1/std, moving statistics, and the affine
// coefficients coef (3, c): mean, mul, add
__global__ void k_bn_train_finish(const double *part1, const double *part2, int P, int64_t rows, int c,
                                  const float *gamma, const float *beta, float *moving_mean, float *moving_var,
                                  float momentum, float epsilon, float *save_mean, float *save_inv_std, float *coef) {
    KC_GRID_LOOP(ch, (int64_t)c) {
        double s = 0.0, sq = 0.0;
        for (int k = 0; k < P; k++) {
            s += part1[(int64_t)k * c + ch];
            sq += part2[(int64_t)k * c + ch];
        }
        const double m = s / (double)rows;
        double var = sq / (double)rows - m * m;
        if (var < 0) var = 0;
        const float inv = (float)(1.0 / sqrt(var + (double)epsilon));
        save_mean[ch] = (float)m;
        save_inv_std[ch] = inv;
        coef[ch] = (float)m;
        coef[c + ch] = (gamma ? gamma[ch] : 1.0f) * inv;
        coef[2 * c + ch] = beta ? beta[ch] : 0.0f;
        if (moving_mean) moving_mean[ch] = moving_mean[ch] * momentum + (float)m * (1.0f - momentum);
        if (moving_var) moving_var[ch] = moving_var[ch] * momentum + (float)var * (1.0f - momentum);
    }
}

template <typename I> __global__ void k_bn_apply(const float *x, float *y, int64_t n, int c, const float *coef) {
    KC_GRID_LOOP_T(I, i, n) {
        const int ch = (int)(i % (I)c);
        y[i] = (x[i] - coef[ch]) * coef[c + ch] + coef[2 * c + ch];
    }
}

template <typename I>
__global__ void k_bn_infer(const float *x, float *y, int64_t n, int c, const float *gamma, const float *beta,
                           const float *mm, const float *mv, float epsilon) {
    KC_GRID_LOOP_T(I, i, n) {
        const int ch = (int)(i % (I)c);
        const float inv = 1.0f / sqrtf(mv[ch] + epsilon);
        const float mul = (gamma ? gamma[ch] : 1.0f) * inv;
        const float add = beta ? beta[ch] : 0.0f;
        y[i] = (x[i] - mm[ch]) * mul + add;
    }
}

// per channel: dgamma, dbeta and the coefficients coef (3, c) of
// dx = k1 * dy + k2 * (x - mean) + k3
__global__ void k_bn_backward_finish(const double *part1, const double *part2, int P, int64_t rows, int c,
                                     const float *gamma, const float *save_inv_std, float *dgamma, float *dbeta,
                                     float *coef) {
    const double inv_n = 1.0 / (double)rows;
    KC_GRID_LOOP(ch, (int64_t)c) {
        double sdy = 0.0, sdyxc = 0.0;
        for (int k = 0; k < P; k++) {
            sdy += part1[(int64_t)k * c + ch];
            sdyxc += part2[(int64_t)k * c + ch];
        }
        const double inv = save_inv_std[ch], g = gamma ? gamma[ch] : 1.0;
        const double dg = sdyxc * inv; // sum dy * xhat
        if (dgamma) dgamma[ch] = (float)dg;
        if (dbeta) dbeta[ch] = (float)sdy;
        coef[ch] = (float)(g * inv);
        coef[c + ch] = (float)(-g * inv * inv * dg * inv_n);
        coef[2 * c + ch] = (float)(-g * inv * sdy * inv_n);
    }
}

template <typename I>
__global__ void k_bn_backward_apply(const float *x, const float *dy, float *dx, int64_t n, int c, const float *mean,
                                    const float *coef) {
    KC_GRID_LOOP_T(I, i, n) {
        const int ch = (int)(i % (I)c);
        dx[i] = coef[ch] * dy[i] + coef[c + ch] * (x[i] - mean[ch]) + coef[2 * c + ch];
    }
}

extern "C" cudaError_t kc__k_bn_train(const kc_cu_launch *L, const float *x, float *y, int64_t rows, int c,
                                       const float *gamma, const float *beta, float *moving_mean, float *moving_var,
                                       float momentum, float epsilon, float *save_mean, float *save_inv_std,
                                       void *scratch) {
    const size_t half = kc__k_colsum_scratch(rows, c) / 2;
    double *part1 = (double *)scratch, *part2 = (double *)((char *)scratch + half); // (P, c) each
    float *coef = (float *)((char *)scratch + 2 * half);                            // (3, c)
    int P = 0;
    cudaError_t e = colsum(L, CS_SUM_SQ, x, NULL, NULL, rows, c, c, part1, part2, &P);
    if (e != cudaSuccess) return e;
    k_bn_train_finish<<<kc_blocks(L, c, 128), 128, 0, L->stream>>>(part1, part2, P, rows, c, gamma, beta,
                                                                    moving_mean, moving_var, momentum, epsilon,
                                                                    save_mean, save_inv_std, coef);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    const int64_t n = rows * c;
    KC_LAUNCH_IDX(k_bn_apply, n, kc_blocks(L, n, KC_THREADS), KC_THREADS, L->stream, x, y, n, c, (const float *)coef);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_bn_infer(const kc_cu_launch *L, const float *x, float *y, int64_t rows, int c,
                                       const float *gamma, const float *beta, const float *moving_mean,
                                       const float *moving_var, float epsilon) {
    const int64_t n = rows * c;
    if (n <= 0) return cudaSuccess;
    KC_LAUNCH_IDX(k_bn_infer, n, kc_blocks(L, n, KC_THREADS), KC_THREADS, L->stream, x, y, n, c, gamma, beta,
                  moving_mean, moving_var, epsilon);
    return cudaGetLastError();
}

extern "C" cudaError_t kc__k_bn_backward(const kc_cu_launch *L, const float *x, const float *dy, float *dx,
                                          int64_t rows, int c, const float *gamma, const float *save_mean,
                                          const float *save_inv_std, float *dgamma, float *dbeta, void *scratch) {
    const size_t half = kc__k_colsum_scratch(rows, c) / 2;
    double *part1 = (double *)scratch, *part2 = (double *)((char *)scratch + half);
    float *coef = (float *)((char *)scratch + 2 * half);
    int P = 0;
    cudaError_t e = colsum(L, CS_DY_XC, x, dy, save_mean, rows, c, c, part1, part2, &P);
    if (e != cudaSuccess) return e;
    k_bn_backward_finish<<<kc_blocks(L, c, 128), 128, 0, L->stream>>>(part1, part2, P, rows, c, gamma,
                                                                       save_inv_std, dgamma, dbeta, coef);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    const int64_t n = rows * c;
    KC_LAUNCH_IDX(k_bn_backward_apply, n, kc_blocks(L, n, KC_THREADS), KC_THREADS, L->stream, x, dy, dx, n, c,
                  save_mean, (const float *)coef);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- one ordered sum

// *out = (float)(sum of v[0..n)) (accumulate: *out += ...), one block of 256 threads
__global__ void k_sum_to_float(const double *v, int64_t n, float *out, int accumulate) {
    __shared__ double sh[KC_THREADS];
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += v[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = accumulate ? *out + (float)sh[0] : (float)sh[0];
}

// ---------------------------------------------------------------- losses (cpu_loss.c)

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

// the class index coded in a float label, or -1 when it is not an integer in [0, c)
__device__ __forceinline__ int label_index(float t, int c) {
    if (!(t >= 0.0f && t < (float)c)) return -1;
    const int i = (int)t;
    return (float)i == t ? i : -1;
}

__device__ void set_flag(int *flag, int code, int row, float label, int c) {
    if (atomicCAS(flag, 0, code) == 0) {
        flag[1] = row;
        flag[2] = __float_as_int(label);
        flag[3] = c;
    }
}

extern "C" size_t kc__k_loss_scratch(int n) { return align256((size_t)(n > 0 ? n : 1) * sizeof(double)); }

// one warp per example: its loss into row_loss[row], its gradient (x gs) into dpred
__global__ void k_loss(int kind, int logits, const float *pred, const float *target, int n, int c,
                       double *row_loss, float *dpred, double gs, int *flag) {
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const double lo = (double)KC_LOSS_EPS, hi = (double)(1.0f - KC_LOSS_EPS);
    for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < n; row += nwarps) {
        const float *p = pred + row * c;                                      // (c)
        const float *t = kind == KC_LOSS_SPARSE_CCE ? NULL : target + row * c; // (c)
        float *g = dpred ? dpred + row * c : NULL;                             // (c)
        double loss = 0.0;
        if (kind == KC_LOSS_SPARSE_CCE || kind == KC_LOSS_CCE) {
            const int sparse = kind == KC_LOSS_SPARSE_CCE;
            int ti = -1;
            if (sparse) {
                ti = label_index(target[row], c);
                if (ti < 0) { // reported by the host at the next sync; this row contributes nothing
                    if (lane == 0) {
                        set_flag(flag, 1, (int)row, target[row], c);
                        row_loss[row] = 0.0;
                    }
                    if (g)
                        for (int j = lane; j < c; j += 32) g[j] = 0.0f;
                    continue;
                }
            }
            if (logits) {
                float m = p[0];
                for (int j = lane; j < c; j += 32) m = p[j] > m ? p[j] : m;
                m = warp_max_f(m);
                double s = 0.0;
                for (int j = lane; j < c; j += 32) s += exp((double)p[j] - (double)m);
                s = warp_sum_d(s);
                const double lse = (double)m + log(s);
                double tsum = 1.0;
                if (sparse) {
                    loss = lse - (double)p[ti];
                } else {
                    double l = 0.0, ts = 0.0;
                    for (int j = lane; j < c; j += 32) {
                        l += (double)t[j] * (lse - (double)p[j]);
                        ts += (double)t[j];
                    }
                    loss = warp_sum_d(l);
                    tsum = warp_sum_d(ts);
                }
                if (g)
                    for (int j = lane; j < c; j += 32) {
                        const double sm = exp((double)p[j] - lse);
                        const double tj = sparse ? (j == ti ? 1.0 : 0.0) : (double)t[j];
                        g[j] = (float)((sm * tsum - tj) * gs);
                    }
            } else {
                double s = 0.0;
                for (int j = lane; j < c; j += 32) s += (double)p[j];
                s = warp_sum_d(s);
                if (sparse) {
                    const double q = (double)p[ti] / s;
                    const int in = q >= lo && q <= hi;
                    const double qc = q < lo ? lo : (q > hi ? hi : q);
                    if (g)
                        for (int j = lane; j < c; j += 32)
                            g[j] = in ? (float)((1.0 / s - (j == ti ? 1.0 / (double)p[ti] : 0.0)) * gs) : 0.0f;
                    loss = -log(qc);
                } else {
                    double l = 0.0, tin = 0.0;
                    for (int j = lane; j < c; j += 32) {
                        const double q = (double)p[j] / s;
                        const double qc = q < lo ? lo : (q > hi ? hi : q);
                        l -= (double)t[j] * log(qc);
                        if (q >= lo && q <= hi) tin += (double)t[j];
                    }
                    loss = warp_sum_d(l);
                    tin = warp_sum_d(tin);
                    if (g)
                        for (int j = lane; j < c; j += 32) {
                            const double q = (double)p[j] / s;
                            const int in = q >= lo && q <= hi;
                            g[j] = (float)(((in ? -(double)t[j] / (double)p[j] : 0.0) + tin / s) * gs);
                        }
                }
            }
        } else if (kind == KC_LOSS_BCE) {
            const double gc = gs / c;
            double l = 0.0;
            for (int j = lane; j < c; j += 32) {
                const double x = p[j], tj = t[j];
                if (logits) {
                    l += (x > 0 ? x : 0.0) - x * tj + log1p(exp(-fabs(x)));
                    if (g) g[j] = (float)((1.0 / (1.0 + exp(-x)) - tj) * gc);
                } else {
                    const int in = x >= lo && x <= hi;
                    const double xc = x < lo ? lo : (x > hi ? hi : x);
                    l -= tj * log(xc) + (1.0 - tj) * log(1.0 - xc);
                    if (g) g[j] = in ? (float)((-tj / x + (1.0 - tj) / (1.0 - x)) * gc) : 0.0f;
                }
            }
            loss = warp_sum_d(l) / c;
        } else if (kind == KC_LOSS_MSE) {
            double l = 0.0;
            for (int j = lane; j < c; j += 32) {
                const double e = (double)p[j] - (double)t[j];
                l += e * e;
                if (g) g[j] = (float)(2.0 * e * gs / c);
            }
            loss = warp_sum_d(l) / c;
        } else { // MAE
            double l = 0.0;
            for (int j = lane; j < c; j += 32) {
                const double e = (double)p[j] - (double)t[j];
                l += fabs(e);
                if (g) g[j] = (float)((e > 0 ? 1.0 : (e < 0 ? -1.0 : 0.0)) * gs / c);
            }
            loss = warp_sum_d(l) / c;
        }
        if (lane == 0) row_loss[row] = loss;
    }
}

extern "C" cudaError_t kc__k_loss(const kc_cu_launch *L, int kind, int logits, const float *pred,
                                   const float *target, int n, int c, float *loss_sum, float *dpred, double gs,
                                   void *scratch, int *flag) {
    if (n <= 0) {
        if (loss_sum) return cudaMemsetAsync(loss_sum, 0, sizeof(float), L->stream);
        return cudaSuccess;
    }
    double *row_loss = (double *)scratch; // (n)
    k_loss<<<kc_blocks(L, (int64_t)n * 32, KC_THREADS), KC_THREADS, 0, L->stream>>>(kind, logits, pred, target, n,
                                                                                    c, row_loss, dpred, gs, flag);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || !loss_sum) return e;
    k_sum_to_float<<<1, KC_THREADS, 0, L->stream>>>(row_loss, n, loss_sum, 0);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- accuracy (cpu_loss.c)

extern "C" size_t kc__k_count_scratch(void) { return 256; }

// first index of the maximum of v over j (ties: the smallest index), one warp
__device__ __forceinline__ int warp_argmax(const float *v, int c, int lane) {
    float best = v[0];
    int bi = 0;
    for (int j = lane; j < c; j += 32)
        if (v[j] > best || (v[j] == best && j < bi)) {
            best = v[j];
            bi = j;
        }
    for (int o = 16; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ob > best || (ob == best && oi < bi)) {
            best = ob;
            bi = oi;
        }
    }
    return bi;
}

__global__ void k_count_correct(const float *pred, const float *target, int n, int c, int sparse, int k,
                                int from_logits, unsigned long long *count, int *flag) {
    if (c == 1) {
        const float thr = from_logits ? 0.0f : 0.5f;
        unsigned long long local = 0;
        KC_GRID_LOOP(i, (int64_t)n) local += (pred[i] > thr ? 1.0f : 0.0f) == target[i]; // Keras: exact 0/1
        if (local) atomicAdd(count, local);
        return;
    }
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < n; row += nwarps) {
        const float *p = pred + row * c; // (c)
        int label;
        if (sparse) {
            label = label_index(target[row], c);
            if (label < 0) {
                if (lane == 0) set_flag(flag, 2, (int)row, target[row], c);
                continue;
            }
        } else {
            label = warp_argmax(target + row * c, c, lane);
        }
        int ok;
        if (k == 1) {
            ok = warp_argmax(p, c, lane) == label;
        } else { // in_top_k: ties at the boundary count as in
            int greater = 0;
            const float pl = p[label];
            for (int j = lane; j < c; j += 32) greater += p[j] > pl;
            for (int o = 16; o > 0; o >>= 1) greater += __shfl_xor_sync(0xffffffffu, greater, o);
            ok = greater < k;
        }
        if (lane == 0 && ok) atomicAdd(count, 1ull); // integer: the total is exact in any order
    }
}

__global__ void k_add_count(const unsigned long long *count, float *correct) { *correct += (float)*count; }

extern "C" cudaError_t kc__k_count_correct(const kc_cu_launch *L, const float *pred, const float *target, int n,
                                            int c, int sparse, int k, int from_logits, float *correct, void *scratch,
                                            int *flag) {
    if (n <= 0) return cudaSuccess;
    unsigned long long *count = (unsigned long long *)scratch;
    cudaError_t e = cudaMemsetAsync(count, 0, sizeof *count, L->stream);
    if (e != cudaSuccess) return e;
    const int64_t threads = c == 1 ? n : (int64_t)n * 32;
    k_count_correct<<<kc_blocks(L, threads, KC_THREADS), KC_THREADS, 0, L->stream>>>(pred, target, n, c, sparse, k,
                                                                                     from_logits, count, flag);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    k_add_count<<<1, 1, 0, L->stream>>>(count, correct);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- sum of squares

static int ss_parts(int64_t n) {
    int64_t p = (n + KC_THREADS * 8 - 1) / (KC_THREADS * 8);
    if (p < 1) p = 1;
    if (p > 1024) p = 1024;
    return (int)p;
}

extern "C" size_t kc__k_sum_squares_scratch(int64_t n) { return align256((size_t)ss_parts(n) * sizeof(double)); }

__global__ void k_sum_squares_part(const float *x, int64_t n, double *part) {
    __shared__ double sh[KC_THREADS];
    double s = 0.0;
    KC_GRID_LOOP(i, n) s += (double)x[i] * (double)x[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

extern "C" cudaError_t kc__k_sum_squares(const kc_cu_launch *L, const float *x, int64_t n, float *out,
                                          void *scratch) {
    if (n <= 0) return cudaMemsetAsync(out, 0, sizeof(float), L->stream);
    const int P = ss_parts(n);
    double *part = (double *)scratch; // (P)
    k_sum_squares_part<<<P, KC_THREADS, 0, L->stream>>>(x, n, part);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    k_sum_to_float<<<1, KC_THREADS, 0, L->stream>>>(part, P, out, 0);
    return cudaGetLastError();
}
