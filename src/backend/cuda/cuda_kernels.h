/* cuda_kernels.h — the CUDA backend's own kernels, as plain C launchers (src/backend/cuda/).
 *
 * The kernels live in .cu files (kernels_ew.cu: elementwise, layout, pooling, the
 * optimizer; kernels_red.cu: column sums, batch norm, losses, accuracy, sums of squares;
 * kernels_common.cuh: the grid-stride loops and grid sizes they share).
 * Each launcher enqueues its kernel(s) on L->stream and returns cudaGetLastError() (the
 * launch error only: faults inside a kernel surface at the next synchronisation). The C
 * side (cuda_ops.c, cuda_conv.c) validates arguments first, as the CPU backend does.
 *
 * Semantics are the CPU backend's (src/backend/cpu/), formula for formula, so that the two
 * agree up to floating-point rounding:
 *   - reductions accumulate in double, in a fixed order (no floating-point atomics), so a
 *     result is the same from run to run;
 *   - max pooling records the flat index of the first maximum in window order; its
 *     backward (and average pooling's) gathers over the windows that cover each input, in
 *     the order the CPU scatters them, so they match it bit for bit;
 *   - dropout uses the same counter-based hash (kc__hash_uniform, src/core/core.h);
 *   - labels that are not class indices (sparse losses and accuracy) set an error flag in
 *     device memory (flag[0] = 1 loss / 2 accuracy, [1] = example, [2] = label bits,
 *     [3] = classes) instead of failing the launch; the backend reports it at the next
 *     to_host or sync. */
#ifndef KC_CUDA_KERNELS_H
#define KC_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kerac_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where and how wide kernels launch: grid-stride loops use at most max_blocks blocks. */
typedef struct kc_cu_launch {
    cudaStream_t stream;
    int max_blocks;
} kc_cu_launch;

/* Writes 0x6b657261 ("kera") to out[0]: proves that this GPU can run the module's code. */
cudaError_t kc__k_probe(const kc_cu_launch *L, int *out);

/* ---- kernels_ew.cu: elementwise */
/* kind: kc_act (never SOFTMAX here); x or y may be NULL as the CPU's act_backward allows */
cudaError_t kc__k_act_forward(const kc_cu_launch *L, int kind, float alpha, float beta, float gamma,
                               const float *x, float *y, int64_t n);
cudaError_t kc__k_act_backward(const kc_cu_launch *L, int kind, float alpha, float beta, float gamma,
                                const float *x, const float *y, const float *dy, float *dx, int64_t n);
/* log_softmax over rows of cols (one thread per row); y may alias x */
cudaError_t kc__k_log_softmax_forward(const kc_cu_launch *L, const float *x, float *y, int64_t rows, int cols);
cudaError_t kc__k_log_softmax_backward(const kc_cu_launch *L, const float *y, const float *dy, float *dx,
                                       int64_t rows, int cols);
/* softmax over rows of cols (one warp per row); y may alias x, dx may alias dy */
cudaError_t kc__k_softmax_forward(const kc_cu_launch *L, const float *x, float *y, int64_t rows, int cols);
cudaError_t kc__k_softmax_backward(const kc_cu_launch *L, const float *y, const float *dy, float *dx,
                                    int64_t rows, int cols);
cudaError_t kc__k_dropout_forward(const kc_cu_launch *L, const float *x, float *y, uint8_t *mask, int64_t n,
                                   float rate, uint64_t seed);
cudaError_t kc__k_dropout_backward(const kc_cu_launch *L, const float *dy, const uint8_t *mask, float *dx,
                                    int64_t n, float rate);
/* Gaussian noise layers: y[i] = mean + stddev * normal draw i of seed (backend/normal_draw.h) */
cudaError_t kc__k_random_normal(const kc_cu_launch *L, float *y, int64_t n, float mean, float stddev, uint64_t seed);
cudaError_t kc__k_add(const kc_cu_launch *L, float *y, const float *a, const float *b, int64_t n);
cudaError_t kc__k_axpy(const kc_cu_launch *L, float *y, const float *x, float alpha, int64_t n);
cudaError_t kc__k_scale(const kc_cu_launch *L, float *y, float alpha, int64_t n);
/* c (rows, cols) with row stride ldc: c = beta * c (beta 0: zeros, NaN-free) */
cudaError_t kc__k_scale_rows(const kc_cu_launch *L, float *c, int rows, int cols, int ldc, float beta);
/* y (rows, cols) += bias (cols) */
cudaError_t kc__k_bias_add(const kc_cu_launch *L, float *y, const float *bias, int64_t rows, int cols);
cudaError_t kc__k_copy_strided(const kc_cu_launch *L, float *dst, int dst_ld, int dst_off, const float *src,
                                int src_ld, int src_off, int64_t rows, int cols);
/* backward 0: y (N, H+t+b, W+l+r, C) = zero-padded x (N, H, W, C); backward 1: dx = crop of dy */
cudaError_t kc__k_pad2d(const kc_cu_launch *L, const float *src, float *dst, int n, int h, int w, int c, int top,
                         int bottom, int left, int right, int backward);
/* dst (cols, rows) = src (rows, cols) transposed */
cudaError_t kc__k_transpose(const kc_cu_launch *L, const float *src, float *dst, int rows, int cols);
/* xp (N, HP, WP, C): xp[n, i, j] = x[n, i - pt, j - pl] inside x, else 0 (asymmetric padding
 * and cropping for cuDNN, which pads symmetrically) */
cudaError_t kc__k_window_copy(const kc_cu_launch *L, const float *x, float *xp, int n, int h, int w, int c,
                               int hp, int wp, int pt, int pl);
/* the adjoint: dx (N, H, W, C)[n, i, j] = dxp[n, i + pt, j + pl] inside dxp, else 0 */
cudaError_t kc__k_window_crop(const kc_cu_launch *L, const float *dxp, float *dx, int n, int h, int w, int c,
                               int hp, int wp, int pt, int pl);

/* one fused optimizer update; the host folds Adam's bias correction into alpha, as the CPU does */
typedef struct kc_cu_opt {
    int kind;        /* kc_opt_kind */
    int nesterov;
    float lr, momentum, grad_scale;
    const float *norm_sq; /* device: clip to clipnorm / max(sqrt(*norm_sq), clipnorm) (NULL: no clipping) */
    float clipnorm;
    float alpha, omb1, omb2, eps, decay; /* adam/adamw */
    float rho, omrho;                    /* rmsprop */
} kc_cu_opt;
cudaError_t kc__k_optimizer(const kc_cu_launch *L, const kc_cu_opt *o, float *param, const float *grad,
                             float *slot0, float *slot1, int64_t n);

/* ---- kernels_ew.cu: pooling */
cudaError_t kc__k_pool_forward(const kc_cu_launch *L, const kc_pool2d_desc *d, const float *x, float *y,
                                int32_t *mask);
cudaError_t kc__k_pool_backward(const kc_cu_launch *L, const kc_pool2d_desc *d, const float *dy,
                                 const int32_t *mask, float *dx);
cudaError_t kc__k_gap_forward(const kc_cu_launch *L, const float *x, float *y, int n, int hw, int c);
cudaError_t kc__k_gap_backward(const kc_cu_launch *L, const float *dy, float *dx, int n, int hw, int c);

/* ---- kernels_red.cu: reductions. `scratch` is device memory of the size the matching
 * *_scratch function gives (the backend keeps one growing scratch buffer). */
size_t kc__k_colsum_scratch(int64_t rows, int cols);
/* db (cols) = column sums of dy (rows, cols) */
cudaError_t kc__k_bias_grad(const kc_cu_launch *L, const float *dy, float *db, int64_t rows, int cols,
                             void *scratch);
size_t kc__k_bn_scratch(int64_t rows, int c);
cudaError_t kc__k_bn_train(const kc_cu_launch *L, const float *x, float *y, int64_t rows, int c,
                            const float *gamma, const float *beta, float *moving_mean, float *moving_var,
                            float momentum, float epsilon, float *save_mean, float *save_inv_std, void *scratch);
cudaError_t kc__k_bn_infer(const kc_cu_launch *L, const float *x, float *y, int64_t rows, int c,
                            const float *gamma, const float *beta, const float *moving_mean,
                            const float *moving_var, float epsilon);
cudaError_t kc__k_bn_backward(const kc_cu_launch *L, const float *x, const float *dy, float *dx, int64_t rows,
                               int c, const float *gamma, const float *save_mean, const float *save_inv_std,
                               float *dgamma, float *dbeta, void *scratch);
size_t kc__k_loss_scratch(int n);
/* *loss_sum (may be NULL) = sum of per-example losses; dpred (may be NULL) = gradient x gs */
cudaError_t kc__k_loss(const kc_cu_launch *L, int kind, int logits, const float *pred, const float *target,
                        int n, int c, float *loss_sum, float *dpred, double gs, void *scratch, int *flag);
size_t kc__k_count_scratch(void);
/* *correct += number of correct rows */
cudaError_t kc__k_count_correct(const kc_cu_launch *L, const float *pred, const float *target, int n, int c,
                                 int sparse, int k, int from_logits, float *correct, void *scratch, int *flag);
size_t kc__k_sum_squares_scratch(int64_t n);
cudaError_t kc__k_sum_squares(const kc_cu_launch *L, const float *x, int64_t n, float *out, void *scratch);

/* ---- kernels_dw.cu: depthwise convolution (see cpu_depthwise.c; b and db may be NULL):
 * the grouped kernels below with C groups */
cudaError_t kc__k_dw_forward(const kc_cu_launch *L, const kc_conv2d_desc *d, const float *x, const float *w,
                             const float *b, float *y);
cudaError_t kc__k_dw_backward_data(const kc_cu_launch *L, const kc_conv2d_desc *d, const float *dy, const float *w,
                                   float *dx);
cudaError_t kc__k_dw_backward_filter(const kc_cu_launch *L, const kc_conv2d_desc *d, const float *x, const float *dy,
                                     float *dw, float *db);

/* ---- kernels_nr.cu: normalisation and resampling (see cpu_groupnorm.c
 * and cpu_resample.c; NULL gamma/beta/scale/shift/mean/dx/dgamma/dbeta as there) */
cudaError_t kc__k_channel_affine(const kc_cu_launch *L, const float *x, float *y, int64_t rows, int c,
                                 const float *scale, const float *shift);
cudaError_t kc__k_normalize(const kc_cu_launch *L, const float *x, float *y, int64_t rows, int c, const float *mean,
                            const float *var, int invert);
cudaError_t kc__k_groupnorm_forward(const kc_cu_launch *L, const float *x, float *y, int n, int64_t s, int c,
                                    int groups, const float *gamma, const float *beta, float eps, float *save_mean,
                                    float *save_inv);
cudaError_t kc__k_groupnorm_backward(const kc_cu_launch *L, const float *x, const float *dy, float *dx, int n,
                                     int64_t s, int c, int groups, const float *gamma, const float *save_mean,
                                     const float *save_inv, float *dgamma, float *dbeta);
cudaError_t kc__k_upsample2d_forward(const kc_cu_launch *L, const kc_resample2d_desc *d, const float *x, float *y);
cudaError_t kc__k_upsample2d_backward(const kc_cu_launch *L, const kc_resample2d_desc *d, const float *dy, float *dx);
cudaError_t kc__k_permute(const kc_cu_launch *L, const float *x, float *y, int n, int rank, const int *dims,
                          const int *perm);
/* ---- kernels_bcast.cu: broadcasting binary operations and tensor-scalar operations (see
 * cpu_bcast.c). da/db may be NULL; a/b may be NULL where the op's
 * gradient does not read them. */
cudaError_t kc__k_binary_forward(const kc_cu_launch *L, int op, const kc_bcast_desc *d, const float *a,
                                 const float *b, float *y);
cudaError_t kc__k_binary_backward(const kc_cu_launch *L, int op, const kc_bcast_desc *d, const float *a,
                                  const float *b, const float *dy, float *da, float *db);
cudaError_t kc__k_scalar_forward(const kc_cu_launch *L, int op, const float *x, float s, int scalar_first, float *y,
                                 int64_t n);
cudaError_t kc__k_scalar_backward(const kc_cu_launch *L, int op, const float *x, float s, int scalar_first,
                                  const float *dy, float *dx, int64_t n);
/* ---- kernels_aug.cu: resampling and colour (see cpu_augment.c) */
cudaError_t kc__k_sample2d_forward(const kc_cu_launch *L, const kc_sample2d_desc *d, const float *mats,
                                   const float *x, float *y);
cudaError_t kc__k_sample2d_backward(const kc_cu_launch *L, const kc_sample2d_desc *d, const float *mats,
                                    const float *dy, float *dx);
cudaError_t kc__k_color2d_forward(const kc_cu_launch *L, const kc_color2d_desc *d, const float *params,
                                  const float *x, float *y);
cudaError_t kc__k_color2d_backward(const kc_cu_launch *L, const kc_color2d_desc *d, const float *params,
                                   const float *y, const float *dy, float *dx);
/* ---- kernels_grouped.cu: grouped convolution (see cpu_conv_grouped.c; b and db may be NULL) */
cudaError_t kc__k_gc_forward(const kc_cu_launch *L, const kc_conv2d_desc *d, int groups, const float *x,
                             const float *w, const float *b, float *y);
cudaError_t kc__k_gc_backward_data(const kc_cu_launch *L, const kc_conv2d_desc *d, int groups, const float *dy,
                                   const float *w, float *dx);
cudaError_t kc__k_gc_backward_filter(const kc_cu_launch *L, const kc_conv2d_desc *d, int groups, const float *x,
                                     const float *dy, float *dw, float *db);

#ifdef __cplusplus
}
#endif

#endif /* KC_CUDA_KERNELS_H */
