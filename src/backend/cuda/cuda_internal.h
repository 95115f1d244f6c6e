/* cuda_internal.h — private header of the CUDA backend module (src/backend/cuda/).
 *
 * The module (libkerac_cuda.so) implements the kc_backend table of include/kerac_backend.h
 * on one NVIDIA GPU with the CPU backend's exact semantics:
 *   cuda_backend.c  kc_backend_module_init: device choice, driver / cuDNN / cuBLAS checks,
 *                   handles, the table; copies, sync, memory info
 *   cuda_errors.c   error reporting and logging (through the host), kc__cu_enter
 *   cuda_alloc.c    the caching device allocator (KERAC_GPU_MEMORY modes)
 *   cuda_ops.c      GEMM (cuBLAS) and every non-convolution entry (own kernels)
 *   cuda_conv.c     convolutions through cuDNN (v7-style calls): the per-shape cache, the calls
 *   cuda_conv_algo.c  the algorithm and workspace choice per shape and direction (cuda_conv.h)
 *   cuda_rules.c    the decisions that need no GPU (cuda_rules.h; tested without CUDA)
 *   cuda_feed.c     the input feed: page-locked host memory, uploads on a copy stream
 *   cuda_nccl.c     data-parallel all-reduce through NCCL (dlopen'ed), on a stream of its own
 *   kernels_*.cu    the kernels (cuda_kernels.h)
 *
 * Everything runs in order on one compute stream, except the input feed's uploads, which
 * run on a copy stream ordered against it by events (cuda_feed.c); the host waits only in
 * to_host, sync and feed_wait (and when the allocator has to return memory to the driver;
 * mem_info's cudaMemGetInfo does not wait for the stream). The module is a separate
 * shared object: it never calls libkerac's internals; errors and log lines go through the
 * host_fail / host_log pointers that the loader puts in the table.
 *
 * Options (kc_device_opts, given to kc_backend_module_init; libkerac fills them from the
 * KERAC_* variables named here when the caller gives none):
 *   gpu_memory              grow (default) | preallocate[=FRACTION] (default 0.9 of free
 *                           memory) | limit=SIZE (K/M/G/T, powers of 1024); KERAC_GPU_MEMORY
 *   cudnn_benchmark         choose convolution algorithms by timing them (cudnnFind*Ex, in
 *                           the workspace kerac planned), once per convolution shape at its
 *                           first run at the batch size planned last, instead of cuDNN's
 *                           heuristics; KERAC_CUDNN_BENCHMARK=1
 *   deterministic           only deterministic cuDNN algorithms (backward passes); without it
 *                           cuDNN may pick backward algorithms that use atomics, so GPU
 *                           results can differ in the last bits from run to run;
 *                           KERAC_DETERMINISTIC=1
 *   tf32                    allow TF32 tensor cores in cuBLAS and cuDNN (default: off, plain
 *                           fp32, as the CPU backend computes); KERAC_TF32=1
 *   cudnn_workspace_limit   the most workspace one convolution algorithm may use (default
 *                           1G); KERAC_CUDNN_WORKSPACE_LIMIT
 * and one variable the module reads itself, a debugging switch:
 *   KERAC_CUDA_DEBUG_SYNC=1 synchronise after every kernel, so that a fault names the
 *                           operation that caused it (slow; for debugging) */
#ifndef KC_CUDA_INTERNAL_H
#define KC_CUDA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "cuda_kernels.h"
#include "cuda_rules.h"
#include "kerac_backend.h"

#define KC_CU_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KC_CU_MAX(a, b) ((a) > (b) ? (a) : (b))
#define KC_CU_ALIGN 256 /* every device block and workspace slice starts on 256 bytes */

static inline size_t kc__cu_align(size_t b) { return (b + KC_CU_ALIGN - 1) & ~(size_t)(KC_CU_ALIGN - 1); }

/* ---- the caching allocator (cuda_alloc.c) */

typedef enum kc_cu_mem_mode { KC_CU_MEM_GROW = 0, KC_CU_MEM_PREALLOCATE, KC_CU_MEM_LIMIT } kc_cu_mem_mode;

typedef struct kc_cu_block {
    void *ptr;
    size_t size; /* bytes reserved for it (rounded) */
} kc_cu_block;

typedef struct kc_cu_range {
    size_t off, size; /* a free range of the preallocated pool */
} kc_cu_range;

typedef struct kc_cu_alloc {
    kc_cu_mem_mode mode;
    double fraction;     /* preallocate: share of the free memory taken at start */
    size_t mode_limit;   /* limit=SIZE (0: none) */
    size_t user_limit;   /* set_memory_limit (0: none) */
    char spec[96];       /* KERAC_GPU_MEMORY as given, for messages */
    kc_cu_block *live;   /* blocks handed out */
    int n_live, cap_live;
    kc_cu_block *cache;  /* grow / limit: freed blocks kept for reuse (cudaMalloc'd) */
    int n_cache, cap_cache;
    size_t cached;       /* bytes in cache */
    char *pool;          /* preallocate: one cudaMalloc, carved into ranges */
    size_t pool_size;
    kc_cu_range *free_ranges; /* sorted by offset, coalesced */
    int n_free, cap_free;
    size_t in_use, peak; /* bytes handed out now, and at the peak since reset_peak */
    size_t reserved, peak_reserved; /* bytes taken from the driver */
} kc_cu_alloc;

/* ---- per-shape convolution state (cuda_conv.h, cuda_conv.c, cuda_conv_algo.c) */
typedef struct kc_cu_conv kc_cu_conv;

/* ---- pinned host staging for uploads */
typedef struct kc_cu_stage {
    void *host;
    size_t cap;
    cudaEvent_t done; /* recorded after the copy that reads host */
    bool pending;
} kc_cu_stage;

/* ---- a host_alloc'd block */
typedef struct kc_cu_host_block {
    void *ptr;
    bool pinned; /* cudaHostAlloc'd (else posix_memalign'd) */
} kc_cu_host_block;

#define KC_CU_TIMING_MARKS 4096 /* timing marks between two reads (two per layer and pass) */

typedef struct kc_cu_ctx {
    kc_backend *be;
    int dev;
    char gpu_name[256];
    int cc_major, cc_minor, sm_count;
    size_t total_mem;
    cudaStream_t stream;
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    kc_cu_launch L;
    kc_cu_alloc mem;
    void *scratch; /* reductions' partial sums; grows, never shrinks */
    size_t scratch_cap;
    int *dflag;    /* device int[4]: a kernel's bad-label report (cuda_kernels.h) */
    int *hflag;    /* pinned host copy */
    bool flag_armed; /* a kernel that may set dflag ran since the last check */
    kc_cu_stage stage[2];
    int stage_next;
    /* the input feed (cuda_feed.c) */
    cudaStream_t copy_stream;
    cudaEvent_t feed_ready[KC_FEED_SLOTS]; /* copy stream: the slot's uploads are done */
    cudaEvent_t feed_free[KC_FEED_SLOTS];  /* compute stream: the slot's readers are done */
    bool feed_ready_set[KC_FEED_SLOTS], feed_free_set[KC_FEED_SLOTS];
    cudaEvent_t feed_order;                /* compute stream: before a new destination's first upload */
    kc_cu_feed_marks feed_marks;           /* destinations already ordered so (cuda_rules.h);
                                              kc__cu_free forgets a freed block */
    kc_cu_host_block *host_blocks;
    int n_host_blocks, cap_host_blocks;
    bool warned_pageable;
    /* device timing (cuda_timing.c): marks since the reference event */
    cudaEvent_t tm_ref;
    cudaEvent_t tm_ev[KC_CU_TIMING_MARKS];
    int tm_n;
    /* options */
    bool benchmark, deterministic, tf32, debug_sync;
    bool dnn_grouped;   /* grouped and depthwise convolutions through cuDNN first (kc_device_opts.cudnn_grouped, default on) */
    size_t ws_limit;
    /* convolution shapes seen (at most KC_CU_CONV_CACHE, least recently used go first) */
    kc_cu_conv **conv;
    int n_conv, cap_conv;
    uint64_t conv_clock, plan_clock; /* stamps of last use, and of conv2d_workspace calls */
    struct kc_cu_nccl *nccl; /* issue 13: the NCCL communicator and its stream (cuda_nccl.c) */
} kc_cu_ctx;

static inline kc_cu_ctx *kc__cu(kc_backend *be) { return (kc_cu_ctx *)be->ctx; }

/* ---- device timing (cuda_timing.c) */
kc_status kc__cu_timing_begin(kc_backend *be);
int kc__cu_timing_mark(kc_backend *be, int stream);
kc_status kc__cu_timing_read(kc_backend *be, double *seconds, int n);
void kc__cu_timing_shutdown(kc_cu_ctx *c);

/* ---- errors (cuda_errors.c) */
/* Set the error text (through the host) and return s. */
/* The message of this thread's last kc__cu_fail (the module cannot read libkerac's). */
const char *kc__cu_last_error(void);
kc_status kc__cu_fail(kc_backend *be, kc_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A failed CUDA runtime call: OUT_OF_MEMORY for allocation failures, DEVICE otherwise, with
 * the error's text and, for errors that break the context, what to do. */
kc_status kc__cu_cuda_fail(kc_backend *be, const char *what, cudaError_t e);
/* After a launcher: its launch error, and with KERAC_CUDA_DEBUG_SYNC a full synchronisation. */
kc_status kc__cu_launched(kc_backend *be, const char *what, cudaError_t e);
kc_status kc__cu_cudnn_fail(kc_backend *be, const char *what, cudnnStatus_t s);
kc_status kc__cu_cublas_fail(kc_backend *be, const char *what, cublasStatus_t s);
/* "CUBLAS_STATUS_NOT_INITIALIZED (...)" */
const char *kc__cu_cublas_status_text(cublasStatus_t s);
void kc__cu_log(kc_backend *be, kc_log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "1.5 GiB", "12.0 MiB", "512 B" */
const char *kc__cu_bytes(size_t b, char *buf, size_t n);
/* Make this thread's current device the backend's (cheap when it already is). */
kc_status kc__cu_enter(kc_backend *be);

#define KC_CU_TRY_CUDA(be, what, expr)                                                                          \
    do {                                                                                                        \
        cudaError_t kc_e_ = (expr);                                                                             \
        if (kc_e_ != cudaSuccess) return kc__cu_cuda_fail((be), (what), kc_e_);                                 \
    } while (0)

/* Parse "8G", "512MiB", "1000000": powers of 1024. 0 on success, -1 otherwise. */
int kc__cu_parse_size(const char *text, size_t *out);

/* ---- allocator (cuda_alloc.c) */
kc_status kc__cu_alloc_init(kc_backend *be, const char *spec, char *err, size_t err_n);
void kc__cu_alloc_shutdown(kc_backend *be);
kc_status kc__cu_alloc(kc_backend *be, size_t bytes, void **out);
void kc__cu_free(kc_backend *be, void *p);
void kc__cu_memory_stats(kc_backend *be, size_t *in_use, size_t *peak);
void kc__cu_reset_peak(kc_backend *be);
void kc__cu_set_memory_limit(kc_backend *be, size_t bytes);
void kc__cu_release_cache(kc_backend *be);
/* Bytes the allocator could still hand out without the driver (cache, pool). */
size_t kc__cu_alloc_spare(kc_backend *be);
/* Internal scratch of at least bytes (reductions), from the allocator. */
kc_status kc__cu_scratch(kc_backend *be, size_t bytes, void **out);

/* ---- cuda_ops.c */
kc_status kc__cu_gemm(kc_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                      int lda, const float *b, int ldb, float beta, float *c, int ldc);
kc_status kc__cu_bias_add(kc_backend *be, float *y, const float *bias, int64_t rows, int cols);
kc_status kc__cu_bias_grad(kc_backend *be, const float *dy, float *db, int64_t rows, int cols);
kc_status kc__cu_pool2d_forward(kc_backend *be, const kc_pool2d_desc *d, const float *x, float *y, int32_t *mask);
kc_status kc__cu_pool2d_backward(kc_backend *be, const kc_pool2d_desc *d, const float *dy, const int32_t *mask,
                                 float *dx);
kc_status kc__cu_gap_forward(kc_backend *be, const float *x, float *y, int n, int hw, int c);
kc_status kc__cu_gap_backward(kc_backend *be, const float *dy, float *dx, int n, int hw, int c);
kc_status kc__cu_bn_forward_train(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *gamma,
                                  const float *beta, float *moving_mean, float *moving_var, float momentum,
                                  float epsilon, float *save_mean, float *save_inv_std);
kc_status kc__cu_bn_forward_infer(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *gamma,
                                  const float *beta, const float *moving_mean, const float *moving_var,
                                  float epsilon);
kc_status kc__cu_bn_backward(kc_backend *be, const float *x, const float *dy, float *dx, int64_t rows, int c,
                             const float *gamma, const float *save_mean, const float *save_inv_std, float *dgamma,
                             float *dbeta);
kc_status kc__cu_act_forward(kc_backend *be, kc_act_params a, const float *x, float *y, int64_t n, int cols);
kc_status kc__cu_act_backward(kc_backend *be, kc_act_params a, const float *x, const float *y, const float *dy,
                              float *dx, int64_t n, int cols);
kc_status kc__cu_dropout_forward(kc_backend *be, const float *x, float *y, uint8_t *mask, int64_t n, float rate,
                                 uint64_t seed);
kc_status kc__cu_dropout_backward(kc_backend *be, const float *dy, const uint8_t *mask, float *dx, int64_t n,
                                  float rate);
/* Gaussian noise layers */
kc_status kc__cu_random_normal(kc_backend *be, float *y, int64_t n, float mean, float stddev, uint64_t seed);
kc_status kc__cu_add(kc_backend *be, float *y, const float *a, const float *b, int64_t n);
kc_status kc__cu_axpy(kc_backend *be, float *y, const float *x, float alpha, int64_t n);
kc_status kc__cu_scale(kc_backend *be, float *y, float alpha, int64_t n);
kc_status kc__cu_copy_strided(kc_backend *be, float *dst, int dst_ld, int dst_off, const float *src, int src_ld,
                              int src_off, int64_t rows, int cols);
kc_status kc__cu_pad2d_forward(kc_backend *be, const float *x, float *y, int n, int h, int w, int c, int top,
                               int bottom, int left, int right);
kc_status kc__cu_pad2d_backward(kc_backend *be, const float *dy, float *dx, int n, int h, int w, int c, int top,
                                int bottom, int left, int right);
kc_status kc__cu_loss_forward_backward(kc_backend *be, const kc_loss_desc *d, const float *pred,
                                       const float *target, float *loss_sum, float *dpred, int grad_n);
kc_status kc__cu_count_correct(kc_backend *be, const float *pred, const float *target, int n, int c, int sparse,
                               int k, int from_logits, float *correct);
kc_status kc__cu_optimizer_step(kc_backend *be, const kc_opt_step *s, float *param, const float *grad, float *slot0,
                                float *slot1, int64_t n);
kc_status kc__cu_sum_squares(kc_backend *be, const float *x, int64_t n, float *out);

/* ---- cuda_feed.c */
kc_status kc__cu_feed_init(kc_backend *be, char *err, size_t err_n);
void kc__cu_feed_shutdown(kc_cu_ctx *c);
kc_status kc__cu_host_alloc(kc_backend *be, size_t bytes, void **out);
void kc__cu_host_free(kc_backend *be, void *p);
kc_status kc__cu_feed_upload(kc_backend *be, int slot, void *dst, const void *src, size_t bytes);
kc_status kc__cu_feed_acquire(kc_backend *be, int slot);
kc_status kc__cu_feed_release(kc_backend *be, int slot);
kc_status kc__cu_feed_wait(kc_backend *be, int slot);

/* ---- cuda_conv.c */
size_t kc__cu_conv2d_workspace(kc_backend *be, const kc_conv2d_desc *d);
kc_status kc__cu_conv2d_forward(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *w,
                                const float *b, float *y, void *ws, size_t ws_bytes);
kc_status kc__cu_conv2d_backward_data(kc_backend *be, const kc_conv2d_desc *d, const float *dy, const float *w,
                                      float *dx, void *ws, size_t ws_bytes);
kc_status kc__cu_conv2d_backward_filter(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *dy,
                                        float *dw, float *db, void *ws, size_t ws_bytes);
void kc__cu_conv_shutdown(kc_backend *be);
kc_status kc__cu_conv2d_describe(kc_backend *be, const kc_conv2d_desc *d, size_t ws_bytes, char *buf, size_t n);

/* ---- cuda_describe.c: the table's supports and describe */
int kc__cu_supports(kc_backend *be, kc_op op);
kc_status kc__cu_describe(kc_backend *be, kc_op op, const void *desc, size_t ws_bytes, char *buf, size_t n);

/* ---- cuda_depthwise.c */
size_t kc__cu_depthwise_workspace(kc_backend *be, const kc_conv2d_desc *d);
kc_status kc__cu_depthwise_forward(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *w,
                                   const float *b, float *y, void *ws, size_t ws_bytes);
kc_status kc__cu_depthwise_backward_data(kc_backend *be, const kc_conv2d_desc *d, const float *dy, const float *w,
                                         float *dx, void *ws, size_t ws_bytes);
kc_status kc__cu_depthwise_backward_filter(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *dy,
                                           float *dw, float *db, void *ws, size_t ws_bytes);

/* ---- cuda_nr.c */
kc_status kc__cu_channel_affine(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *scale,
                                const float *shift);
kc_status kc__cu_normalize(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *mean,
                           const float *var, int invert);
kc_status kc__cu_groupnorm_forward(kc_backend *be, const float *x, float *y, int n, int64_t s, int c, int groups,
                                   const float *gamma, const float *beta, float epsilon, float *save_mean,
                                   float *save_inv_std);
kc_status kc__cu_groupnorm_backward(kc_backend *be, const float *x, const float *dy, float *dx, int n, int64_t s,
                                    int c, int groups, const float *gamma, const float *save_mean,
                                    const float *save_inv_std, float *dgamma, float *dbeta);
kc_status kc__cu_upsample2d_forward(kc_backend *be, const kc_resample2d_desc *d, const float *x, float *y);
kc_status kc__cu_upsample2d_backward(kc_backend *be, const kc_resample2d_desc *d, const float *dy, float *dx);
kc_status kc__cu_permute(kc_backend *be, const float *x, float *y, int n, int rank, const int *dims, const int *perm);
/* ---- cuda_bcast.c */
kc_status kc__cu_binary_forward(kc_backend *be, kc_binop op, const kc_bcast_desc *d, const float *a, const float *b,
                                float *y);
kc_status kc__cu_binary_backward(kc_backend *be, kc_binop op, const kc_bcast_desc *d, const float *a, const float *b,
                                 const float *dy, float *da, float *db);
kc_status kc__cu_scalar_forward(kc_backend *be, kc_binop op, const float *x, float s, int scalar_first, float *y,
                                int64_t n);
kc_status kc__cu_scalar_backward(kc_backend *be, kc_binop op, const float *x, float s, int scalar_first,
                                 const float *dy, float *dx, int64_t n);
/* ---- cuda_augment.c */
kc_status kc__cu_sample2d_forward(kc_backend *be, const kc_sample2d_desc *d, const float *mats, const float *x,
                                  float *y);
kc_status kc__cu_sample2d_backward(kc_backend *be, const kc_sample2d_desc *d, const float *mats, const float *dy,
                                   float *dx);
kc_status kc__cu_color2d_forward(kc_backend *be, const kc_color2d_desc *d, const float *params, const float *x,
                                 float *y);
kc_status kc__cu_color2d_backward(kc_backend *be, const kc_color2d_desc *d, const float *params, const float *y,
                                  const float *dy, float *dx);
/* ---- cuda_conv.c: grouped convolutions through cuDNN (KC_STATUS_UNSUPPORTED: the caller
 * runs the module's own kernels); the workspace is the table's grouped_conv_workspace
 * (0 bytes for a shape the module's kernels run) */
size_t kc__cu_dnn_grouped_workspace(kc_backend *be, const kc_conv2d_desc *d, int groups);
kc_status kc__cu_dnn_grouped_forward(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                     const float *w, const float *b, float *y, void *ws, size_t ws_bytes);
kc_status kc__cu_dnn_grouped_backward_data(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *dy,
                                           const float *w, float *dx, void *ws, size_t ws_bytes);
kc_status kc__cu_dnn_grouped_backward_filter(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                             const float *dy, float *dw, float *db, void *ws, size_t ws_bytes);
/* ---- cuda_conv_grouped.c */
kc_status kc__cu_grouped_conv_forward(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                      const float *w, const float *b, float *y, void *ws, size_t ws_bytes);
kc_status kc__cu_grouped_conv_backward_data(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *dy,
                                            const float *w, float *dx, void *ws, size_t ws_bytes);
kc_status kc__cu_grouped_conv_backward_filter(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                              const float *dy, float *dw, float *db, void *ws, size_t ws_bytes);

/* ---- issue 13: NCCL (cuda_nccl.c): the coll_* entries of the table, and the shutdown */
kc_status kc__cu_coll_unique_id(kc_backend *be, void *id, size_t bytes);
kc_status kc__cu_coll_init(kc_backend *be, const void *id, size_t bytes, int nranks, int rank);
kc_status kc__cu_coll_allreduce_sum(kc_backend *be, float *buf, int64_t n);
kc_status kc__cu_coll_join(kc_backend *be);
const char *kc__cu_coll_describe(kc_backend *be);
void kc__cu_nccl_shutdown(kc_cu_ctx *c);

#endif /* KC_CUDA_INTERNAL_H */
