/* cpu.h — private header of the CPU backend (src/backend/cpu/): the kernels behind the
 * kc_backend table, one group per file, and the small helpers they share.
 *
 * The kernel files are compiled once per instruction set on x86-64 and one copy is chosen
 * at run time (cpu_isa.h); 3x3 stride-1 convolutions with enough channels run as Winograd
 * (cpu_winograd.c).
 *
 * Device pointers are plain host pointers. Kernels never allocate: scratch comes from
 * `ws` (sized by conv2d_workspace) or from small fixed-size stack blocks. Memory-bound
 * loops run in parallel (OpenMP, static schedule) when they touch more than
 * KC_CPU_PAR_MIN elements, serially otherwise. GEMM and convolution go through OpenBLAS
 * (cblas_sgemm, the OpenMP build so that both share one thread pool).
 *
 * Reductions over whole batches (BN statistics, bias gradients, loss sums, sum_squares)
 * accumulate in double. Column sums (BN, bias and conv bias gradients) combine their
 * per-thread partials in thread order, so they are reproducible for a fixed thread count. */
#ifndef KC_BACKEND_CPU_H
#define KC_BACKEND_CPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/core.h"
#include "cpu_isa.h"
#include "kerac_backend.h"

/* Loops over more elements than this run on all OpenMP threads. */
#define KC_CPU_PAR_MIN 32768
/* Convolution workspace cap: the im2col buffer holds as many whole images as fit in
 * this many bytes (at least one image), and the batch is processed in chunks of that
 * many images. 4 MiB keeps the col matrix in cache between im2col and the GEMM that
 * reads it: on the second conv of the Fashion-MNIST CNN (batch 128, col 17.8 MB) forward
 * and backward measured ~25% faster than one whole-batch chunk (1 and 2 threads, on a
 * shared, noisy machine), and it keeps the workspace small. */
#ifndef KC_CPU_CONV_WS_CAP
#define KC_CPU_CONV_WS_CAP ((size_t)4 << 20)
#endif
/* Column reductions work on blocks of this many columns with per-thread partial sums
 * on the stack; at most KC_CPU_RED_THREADS threads take part. */
#define KC_CPU_RED_COLS 64
#define KC_CPU_RED_THREADS 32

/* ---- helpers (cpu_misc.c) */
/* Column sums in double over `rows` rows of row stride ld, for cols <= KC_CPU_RED_COLS
 * columns (callers walk wider matrices in blocks); out1 (and out2) (cols) overwritten.
 *   SUM:    out1 = sum_r a
 *   SUM_SQ: out1 = sum_r a, out2 = sum_r a^2
 *   DY_XC:  out1 = sum_r b, out2 = sum_r b * (a - p[j])   (batch norm backward) */
typedef enum kc_cpu_colsum_kind {
    KC_CPU_COLSUM_SUM = 0,
    KC_CPU_COLSUM_SUM_SQ,
    KC_CPU_COLSUM_DY_XC,
    KC_CPU_COLSUM_DY_XHAT, /* out1 = sum_r b, out2 = sum_r b * (a - mean) * inv, with the statistics of
                              row r's (example, group) from gs (group and layer norm backward) */
} kc_cpu_colsum_kind;
typedef struct kc_cpu_groupstats {
    const float *mean, *inv; /* (examples, groups) */
    int64_t s;               /* rows per example */
    int groups, cg, c0;      /* groups, channels per group, first column's channel */
} kc_cpu_groupstats;
void kc__cpu_colsum(kc_cpu_colsum_kind kind, const float *a, const float *b, const float *p, int64_t rows,
                    int cols, int64_t ld, double *out1, double *out2);
/* The same, DY_XHAT with its statistics. */
void kc__cpu_colsum_gs(kc_cpu_colsum_kind kind, const float *a, const float *b, const float *p,
                       const kc_cpu_groupstats *gs, int64_t rows, int cols, int64_t ld, double *out1, double *out2);
/* Whether a loop over n elements should run in parallel (a pure function of n: workspace
 * sizes depend on it, so it must answer the same when planning and when running). */
static inline int kc__cpu_par(int64_t n) { return n > KC_CPU_PAR_MIN; }
/* Whether a parallel region here would get more than one thread (kerac's one thread count,
 * kc__num_threads, which every region names, and no nesting beyond what OpenMP allows). */
static inline int kc__cpu_team(void) {
#ifdef _OPENMP
    return kc__num_threads() > 1 && omp_get_active_level() < omp_get_max_active_levels();
#else
    return 0;
#endif
}
/* ---- debt (allocations per step): parallel loops that skip libgomp when they would run on
 * one thread. An OpenMP region whose `if` clause is false still enters GOMP_parallel, and
 * libgomp mallocs and frees a team for every one-thread region (it keeps only teams of 2+
 * threads for the next region): small layers made 4-9 heap allocations per training step.
 *   KC_CPU_PAR_FOR(cond, clauses, for (...) { ... });
 * runs the loop under `#pragma omp parallel for clauses num_threads(kc__num_threads())` when
 * cond holds and the region would get more than one thread (kc__cpu_team), else plainly;
 * KC_CPU_PAR_FOR_TEAM(cond, team, clauses, loop) names its own team size instead.
 * The loop is a macro argument: no preprocessor directives inside it. */
#define KC_CPU_PRAGMA(x) _Pragma(#x)
#define KC_CPU_PAR_FOR_TEAM(cond, team, clauses, ...)                                                             \
    do {                                                                                                          \
        if ((cond) && kc__cpu_team()) {                                                                          \
            KC_CPU_PRAGMA(omp parallel for clauses num_threads(team))                                             \
            __VA_ARGS__                                                                                           \
        } else {                                                                                                  \
            __VA_ARGS__                                                                                           \
        }                                                                                                         \
    } while (0)
#define KC_CPU_PAR_FOR(cond, clauses, ...) KC_CPU_PAR_FOR_TEAM(cond, kc__num_threads(), clauses, __VA_ARGS__)
/* The schedule of a parallel loop of n iterations that write disjoint outputs (no
 * reduction, no per-thread scratch): KC_CPU_BALANCE_CHUNKS chunks per thread, taken as the
 * threads come free. A virtual CPU runs at times slower than its twin (another guest on its
 * physical core; each one's rate moves by itself window by window: bench/vcpu_probe,
 * bench/RESULTS.md "Why kerac's rounds spread"); under schedule(static) the whole team waits
 * for the slow one at the end of every loop. The result is the same whichever thread runs an
 * iteration. */
#define KC_CPU_BALANCE_CHUNKS 8
/* kc__threads_balance() (core.h) 0, KERAC_CPU_BALANCE=0, the measuring switch: every
 * balanced loop, GEMM split and Winograd pass hands each thread one equal share. */
#define kc__cpu_balance kc__threads_balance
static inline long kc__cpu_chunk(int64_t n) {
    const int64_t t = KC_MAX(1, kc__num_threads());
    const int64_t c = kc__cpu_balance() ? n / ((int64_t)KC_CPU_BALANCE_CHUNKS * t) : (n + t - 1) / t;
    return (long)KC_MAX((int64_t)1, c);
}
#define KC_CPU_BALANCED(n) schedule(dynamic, kc__cpu_chunk(n))

/* ---- memory and the table (cpu_backend.c) */
/* The instruction sets this build has kernels for, as kc_cpu_isa (kerac.h), and their names. */
int kc__cpu_isa_best(void); /* the best the processor runs (cpuid), KC_CPU_ISA_BASELINE at least */
const char *kc__cpu_isa_label(int isa); /* "baseline", "avx2", "avx512" */
int kc__cpu_backend_isa(const kc_backend *be); /* the set a CPU backend runs; -1 for another backend */
/* kc_device_opts.cpu_winograd: 0 off (KC_FALSE), 1 where it wins (the default), 2 wherever it
 * runs, at any channel count (KC_TRUE) */
int kc__cpu_winograd_enabled(const kc_backend *be);
int kc__cpu_winograd_tile(const kc_backend *be);    /* kc_device_opts.cpu_winograd_tile: 0, 2, 3, 4 */
kc_status kc__cpu_alloc(kc_backend *be, size_t bytes, void **out);
void kc__cpu_free(kc_backend *be, void *p);
kc_status kc__cpu_to_device(kc_backend *be, void *dst, const void *src, size_t bytes);
kc_status kc__cpu_to_host(kc_backend *be, void *dst, const void *src, size_t bytes);
kc_status kc__cpu_copy(kc_backend *be, void *dst, const void *src, size_t bytes);
kc_status kc__cpu_memset0(kc_backend *be, void *dst, size_t bytes);
kc_status kc__cpu_sync(kc_backend *be);
kc_status kc__cpu_mem_info(kc_backend *be, kc_mem_info *out);

/* ---- cpu_table.c: the kernel slots and describe of the table, from this compilation's copy */
void kc__cpu_fill_kernels(kc_backend *be);

/* ---- cpu_gemm_conv.c */
/* The kernel a convolution runs (the same for every batch chunk): one GEMM for a 1x1 kernel
 * with stride 1 and no padding; the direct kernel for a small patch (KH*KW*C <= 32) and a
 * multiple of 16 filters (its backward-data is the im2col one); the blocked direct kernel
 * where it applies and the backend has it on; im2col + GEMM otherwise. */
typedef enum kc_cpu_conv_kernel {
    KC_CPU_CONV_IM2COL = 0,
    KC_CPU_CONV_DIRECT,
    KC_CPU_CONV_1X1,
    KC_CPU_CONV_BLOCKED, /* cpu_conv_blocked.c (forward, backward-filter; backward-data is im2col's) */
} kc_cpu_conv_kernel;
kc_cpu_conv_kernel kc__cpu_conv_kernel(kc_backend *be, const kc_conv2d_desc *d);
/* describe for KC_OP_CONV2D: the kernel above in words; fails when ws_bytes is less than
 * conv2d_workspace asks (the call would fail too). */
kc_status kc__cpu_conv2d_describe(kc_backend *be, const kc_conv2d_desc *d, size_t ws_bytes, char *buf, size_t n);
/* C = alpha op(A) op(B) + beta C, row-major: kerac's own tiles where
 * kc__cpu_gemm_small_applies and be->cpu_gemm_small, else split over the OpenMP team in
 * fixed slices of C with single-threaded OpenBLAS calls where kc__cpu_gemm_threads says more
 * than 1 (cpu_gemm_conv.c), else one call on OpenBLAS's own threading. Sizes and pointers
 * unchecked: kc__cpu_gemm checks them. */
void kc__cpu_sgemm(const kc_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* The threads kc__cpu_sgemm splits an m x n x k GEMM across: 1 (OpenBLAS's threading) when
 * be->cpu_gemm_split is 0 (kc_device_opts.cpu_gemm_split = KC_FALSE, KERAC_CPU_GEMM_SPLIT=0),
 * inside a parallel region, or for a GEMM that is not tall and skinny. */
int kc__cpu_gemm_threads(const kc_backend *be, int m, int n, int k);
/* cpu_gemm_small.c: whether its register tiles take this GEMM (alpha 1, beta 0 or 1, no
 * A^T B^T, C at most 256 columns (A B: 512 on AVX-512), and per form: A B and A B^T with
 * k <= 512 (192 with 16 registers), B^T at most 16,384 floats, A^T B with C at most 16,384
 * floats (8,192); each kernel set's copy has its own bounds), and the GEMM itself
 * (C = op(A) op(B) (+ C when beta is 1); on the team unless inside a parallel region or
 * small), only for a GEMM the rule takes (B^T goes on the stack). */
int kc__cpu_gemm_small_applies(int trans_a, int trans_b, int m, int n, int k, float alpha, float beta);
void kc__cpu_gemm_small(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda, const float *b,
                        int ldb, float beta, float *c, int ldc);
/* C = A B + bias (one row of n; NULL: none), then max(0, .) when relu, the bias and the ReLU
 * applied in the tiles' registers before C is written; for a GEMM that
 * kc__cpu_gemm_small_applies(0, 0, m, n, k, 1, 0) takes. */
void kc__cpu_gemm_small_bias_relu(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                                  const float *bias, int relu, float *c, int ldc);
kc_status kc__cpu_gemm(kc_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
size_t kc__cpu_conv2d_workspace(kc_backend *be, const kc_conv2d_desc *d);
kc_status kc__cpu_conv2d_forward(kc_backend *be, const kc_conv2d_desc *d, const float *x,
                                 const float *w, const float *b, float *y, void *ws, size_t ws_bytes);
kc_status kc__cpu_conv2d_backward_data(kc_backend *be, const kc_conv2d_desc *d, const float *dy,
                                       const float *w, float *dx, void *ws, size_t ws_bytes);
/* Whether kc__cpu_conv2d_backward_data honours d->accumulate (every path but Winograd). */
int kc__cpu_conv2d_dx_adds(kc_backend *be, const kc_conv2d_desc *d);
kc_status kc__cpu_conv2d_backward_filter(kc_backend *be, const kc_conv2d_desc *d, const float *x,
                                         const float *dy, float *dw, float *db, void *ws, size_t ws_bytes);

/* ---- cpu_conv_blocked.c: register-blocked direct forward and backward-filter for
 * undilated convolutions (any stride) with at most 32 channels in and 64 filters (a multiple
 * of the block: 64 filters for AVX-512, 16 for AVX2, 8 for the baseline). Their
 * backward-data is im2col's.
 * kc__cpu_blocked_enabled: the backend runs them (not when created with
 * kc_device_opts.cpu_conv_blocked = KC_FALSE, KERAC_CPU_CONV_BLOCKED=0; cpu_backend.c). */
int kc__cpu_blocked_enabled(const kc_backend *be);
int kc__cpu_blocked_applies(const kc_conv2d_desc *d);
size_t kc__cpu_blocked_workspace(const kc_conv2d_desc *d);
void kc__cpu_blocked_forward(const kc_conv2d_desc *d, const float *x, const float *w, const float *b, float *y,
                             void *ws);
void kc__cpu_blocked_backward_filter(const kc_conv2d_desc *d, const float *x, const float *dy, float *dw,
                                     void *ws);

/* ---- cpu_winograd.c: Winograd F(2x2,3x3), F(3x3,3x3) and F(4x4,3x3) for 3x3 stride-1
 * convolutions with "valid" or "same" padding, unless the backend was created without it.
 * The conv2d entries of cpu_gemm_conv.c hand such a convolution to these where the tile
 * chosen below costs less than im2col + GEMM. Channels: at least KC_CPU_WINOGRAD_MIN_C in and
 * out for F(2x2), KC_CPU_WINOGRAD4_MIN_C for F(3x3) and F(4x4). Measured (bench/bench_conv,
 * one thread, CPU time, Winograd against im2col alternately; bench/RESULTS.md): F(2x2)
 * 1.2-1.8x im2col at 64 to 256 channels on 6x6 to 32x32 images, all three passes, 0.72-0.97x
 * for workload A's 32 -> 64 on 13x13 and 0.86-1.2x at 16 -> 16: hence 64; F(4x4) 1.4-2.4x
 * im2col from 32 channels on 8x8 to 32x32 outputs, 0.9-1.15x at 16. */
#ifndef KC_CPU_WINOGRAD_MIN_C
#define KC_CPU_WINOGRAD_MIN_C 64
#endif
#ifndef KC_CPU_WINOGRAD4_MIN_C
#define KC_CPU_WINOGRAD4_MIN_C 32
#endif
/* The tile: the cheapest of F(2x2), F(3x3), F(4x4) in GEMM rows per (input, output) channel
 * pair, E (tiles + KC_CPU_WINOGRAD_U_TILES) for E = (m + 2)^2 entries per tile, against
 * im2col's 9 n oh ow. Partial tiles at the edges count whole (F(4x4) on 6x6 outputs computes
 * 8x8), and each pass transforms the kernel into U (E C F floats, written and read again by
 * the GEMMs): the same memory traffic as KC_CPU_WINOGRAD_U_TILES more rows of tiles. Fitted
 * to bench_conv (2 threads, wall clock, 7-15 alternations; bench/RESULTS.md, "F(3x3,3x3)"
 * and "Winograd's planes"): 70 while the planes of U, V and M lay a multiple of 4 KiB apart
 * (512 -> 512 on 3x3 outputs at batch 32, 1 F(3x3) tile per image, U 26 MB: im2col 1.2x
 * faster than F(3x3)); 50 since they no longer do (the same layer: F(3x3) 1.1-1.25x im2col
 * in the model, 8x8 256 -> 256 at batch 4: F(2x2) 1.0-1.3x). The cost picks F(4x4) from 7x7
 * outputs up (ResNet50's stages 2 and 3), F(3x3) on 6x6 (stage 4) down to 3x3 (stage 5 at
 * batch 32), and im2col on small batches of wide layers. */
#ifndef KC_CPU_WINOGRAD_U_TILES
#define KC_CPU_WINOGRAD_U_TILES 50
#endif
/* Winograd only where im2col's cost is at least this factor of the tile's (just above 1:
 * the cost already counts what the transforms add) */
#ifndef KC_CPU_WINOGRAD_MIN_SAVING
#define KC_CPU_WINOGRAD_MIN_SAVING 1.1
#endif
int kc__cpu_winograd_applies(kc_backend *be, const kc_conv2d_desc *d);
/* The output tile the convolution runs with (2, 3 or 4), 0 when Winograd does not apply. */
int kc__cpu_winograd_tile_of(kc_backend *be, const kc_conv2d_desc *d);
/* Whether Winograd can run d at some batch (turned on; 3x3, stride 1, "valid" or "same"):
 * the kernel chosen then depends on the batch (kc__cpu_conv2d_workspace). */
int kc__cpu_winograd_may_apply(kc_backend *be, const kc_conv2d_desc *d);
/* The workspace of tile m for d; the passes below take ws of at least that many bytes
 * (the conv2d entries of cpu_gemm_conv.c check it first). */
size_t kc__cpu_winograd_workspace(const kc_conv2d_desc *d, int m);
kc_status kc__cpu_winograd_forward(const kc_conv2d_desc *d, int m, const float *x, const float *w, const float *b,
                                   float *y, void *ws, size_t ws_bytes);
kc_status kc__cpu_winograd_backward_data(const kc_conv2d_desc *d, int m, const float *dy, const float *w, float *dx,
                                         void *ws, size_t ws_bytes);
kc_status kc__cpu_winograd_backward_filter(const kc_conv2d_desc *d, int m, const float *x, const float *dy, float *dw,
                                           void *ws, size_t ws_bytes);

/* The kernel taps [*a, *b) of a direct convolution (depthwise, grouped) that land inside an
 * input of length `in` for output position o. */
static inline void kc__cpu_tap_range(int o, int stride, int pad, int dil, int k, int in, int *a, int *b) {
    int base = o * stride - pad, lo = 0, hi = k;
    while (lo < k && base + lo * dil < 0) lo++;
    while (hi > lo && base + (hi - 1) * dil >= in) hi--;
    *a = lo, *b = hi;
}

/* ---- cpu_depthwise.c */
kc_status kc__cpu_depthwise_forward(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *w,
                                    const float *b, float *y, void *ws, size_t ws_bytes);
kc_status kc__cpu_depthwise_backward_data(kc_backend *be, const kc_conv2d_desc *d, const float *dy, const float *w,
                                          float *dx, void *ws, size_t ws_bytes);
kc_status kc__cpu_depthwise_backward_filter(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *dy,
                                            float *dw, float *db, void *ws, size_t ws_bytes);

/* ---- cpu_depthwise3.c: the 3x3, multiplier-1, undilated fast path of the three above */
/* How many channels (from 0) the fast path takes: whole vectors of kc__cpu_dw3_width() floats; 0 when
 * it does not apply (backward_data: strides (1, 1) or (2, 2) only). */
int kc__cpu_dw3_channels(const kc_conv2d_desc *d, int backward_data);
int kc__cpu_dw3_width(void);
void kc__cpu_dw3_forward_row(const kc_conv2d_desc *d, const float *x, const float *w, const float *b, float *yr,
                             int n, int oy, int cv);
void kc__cpu_dw3_backward_data_row(const kc_conv2d_desc *d, const float *dy, const float *w, float *dxr, int n,
                                   int iy, int cv);
/* dw[., ., k .. k + width) and db[k .. k + width) (db may be NULL) */
void kc__cpu_dw3_filter_chunk(const kc_conv2d_desc *d, const float *x, const float *dy, float *dw, float *db, int k);
/* backward_filter by rows: rows [i0, i1) of the output added into part (10 x cv floats: the
 * nine taps' sums x * dy, then dy's), channels [0, cv) */
void kc__cpu_dw3_filter_rows(const kc_conv2d_desc *d, const float *x, const float *dy, float *part, int64_t i0,
                             int64_t i1, int cv);
/* The workspace of backward_filter by rows: KC_CPU_DW_GROUPS per thread of 10 x cv floats. */
size_t kc__cpu_depthwise_workspace(kc_backend *be, const kc_conv2d_desc *d);

/* ---- cpu_bcast.c */
kc_status kc__cpu_binary_forward(kc_backend *be, kc_binop op, const kc_bcast_desc *d, const float *a,
                                 const float *b, float *y);
kc_status kc__cpu_binary_backward(kc_backend *be, kc_binop op, const kc_bcast_desc *d, const float *a,
                                  const float *b, const float *dy, float *da, float *db);
kc_status kc__cpu_scalar_forward(kc_backend *be, kc_binop op, const float *x, float s, int scalar_first, float *y,
                                 int64_t n);
kc_status kc__cpu_scalar_backward(kc_backend *be, kc_binop op, const float *x, float s, int scalar_first,
                                  const float *dy, float *dx, int64_t n);

/* ---- cpu_conv_grouped.c (Conv2D with groups); like the depthwise kernels, no workspace */
kc_status kc__cpu_grouped_conv_forward(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                       const float *w, const float *b, float *y, void *ws, size_t ws_bytes);
kc_status kc__cpu_grouped_conv_backward_data(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *dy,
                                             const float *w, float *dx, void *ws, size_t ws_bytes);
kc_status kc__cpu_grouped_conv_backward_filter(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                               const float *dy, float *dw, float *db, void *ws, size_t ws_bytes);

/* ---- cpu_noise.c (Gaussian noise layers) */
kc_status kc__cpu_random_normal(kc_backend *be, float *y, int64_t n, float mean, float stddev, uint64_t seed);

/* ---- cpu_pool.c */
kc_status kc__cpu_pool2d_forward(kc_backend *be, const kc_pool2d_desc *d, const float *x, float *y,
                                 int32_t *mask);
kc_status kc__cpu_pool2d_backward(kc_backend *be, const kc_pool2d_desc *d, const float *dy,
                                  const int32_t *mask, float *dx);
kc_status kc__cpu_global_avg_pool_forward(kc_backend *be, const float *x, float *y, int n, int hw, int c);
kc_status kc__cpu_global_avg_pool_backward(kc_backend *be, const float *dy, float *dx, int n, int hw, int c);

/* ---- cpu_norm.c */
kc_status kc__cpu_batchnorm_forward_train(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                          const float *gamma, const float *beta, float *moving_mean,
                                          float *moving_var, float momentum, float epsilon,
                                          float *save_mean, float *save_inv_std);
kc_status kc__cpu_batchnorm_forward_infer(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                          const float *gamma, const float *beta, const float *moving_mean,
                                          const float *moving_var, float epsilon);
kc_status kc__cpu_batchnorm_backward(kc_backend *be, const float *x, const float *dy, float *dx,
                                     int64_t rows, int c, const float *gamma, const float *save_mean,
                                     const float *save_inv_std, float *dgamma, float *dbeta);
/* the same with the ReLU after it (kerac_backend.h, batchnorm_relu_*) */
kc_status kc__cpu_batchnorm_relu_forward_train(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                               const float *gamma, const float *beta, float *moving_mean,
                                               float *moving_var, float momentum, float epsilon, float *save_mean,
                                               float *save_inv_std, float relu_max);
kc_status kc__cpu_batchnorm_relu_forward_infer(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                               const float *gamma, const float *beta, const float *moving_mean,
                                               const float *moving_var, float epsilon, float relu_max);
kc_status kc__cpu_batchnorm_relu_backward(kc_backend *be, const float *x, const float *y, const float *dy, float *dx,
                                          int64_t rows, int c, const float *gamma, const float *beta,
                                          const float *save_mean, const float *save_inv_std, float *dgamma,
                                          float *dbeta, float relu_max);

/* ---- cpu_act.c
 * act_backward needs x only for GELU and SILU, and for RELU_GENERAL when its threshold
 * (gamma) or negative slope (alpha) is negative (then y does not tell the branch); with
 * x given, RELU_GENERAL always uses it. Every other kind works from y, so x may be NULL. */
kc_status kc__cpu_act_forward(kc_backend *be, kc_act_params a, const float *x, float *y, int64_t n,
                              int cols);
kc_status kc__cpu_act_backward(kc_backend *be, kc_act_params a, const float *x, const float *y,
                               const float *dy, float *dx, int64_t n, int cols);

/* ---- cpu_loss.c */
kc_status kc__cpu_loss_forward_backward(kc_backend *be, const kc_loss_desc *d, const float *pred,
                                        const float *target, float *loss_sum, float *dpred, int grad_n);
kc_status kc__cpu_count_correct(kc_backend *be, const float *pred, const float *target, int n, int c,
                                int sparse, int k, int from_logits, float *correct);

/* ---- cpu_optim.c */
kc_status kc__cpu_optimizer_step(kc_backend *be, const kc_opt_step *s, float *param, const float *grad,
                                 float *slot0, float *slot1, int64_t n);

/* ---- cpu_misc.c */
kc_status kc__cpu_bias_add(kc_backend *be, float *y, const float *bias, int64_t rows, int cols);
kc_status kc__cpu_bias_grad(kc_backend *be, const float *dy, float *db, int64_t rows, int cols);
kc_status kc__cpu_dropout_forward(kc_backend *be, const float *x, float *y, uint8_t *mask, int64_t n,
                                  float rate, uint64_t seed);
kc_status kc__cpu_dropout_backward(kc_backend *be, const float *dy, const uint8_t *mask, float *dx,
                                   int64_t n, float rate);
kc_status kc__cpu_add(kc_backend *be, float *y, const float *a, const float *b, int64_t n);
kc_status kc__cpu_add_relu(kc_backend *be, float *y, const float *a, const float *b, int64_t n, float relu_max);
/* a batch norm's normalisation + Add (+ ReLU) in one pass (kerac_backend.h, bn_add_relu; cpu_norm.c) */
kc_status kc__cpu_bn_add_relu(kc_backend *be, float *y, const float *x0, const kc_bn_fold *f0, const float *x1,
                              const kc_bn_fold *f1, int64_t rows, int c, int relu, float relu_max);
kc_status kc__cpu_axpy(kc_backend *be, float *y, const float *x, float alpha, int64_t n);
kc_status kc__cpu_scale(kc_backend *be, float *y, float alpha, int64_t n);
kc_status kc__cpu_copy_strided(kc_backend *be, float *dst, int dst_ld, int dst_off, const float *src,
                               int src_ld, int src_off, int64_t rows, int cols);
kc_status kc__cpu_pad2d_forward(kc_backend *be, const float *x, float *y, int n, int h, int w, int c,
                                int top, int bottom, int left, int right);
kc_status kc__cpu_pad2d_backward(kc_backend *be, const float *dy, float *dx, int n, int h, int w, int c,
                                 int top, int bottom, int left, int right);
kc_status kc__cpu_sum_squares(kc_backend *be, const float *x, int64_t n, float *out);

/* ---- cpu_groupnorm.c, cpu_resample.c (kerac_backend.h says what they do) */
kc_status kc__cpu_channel_affine(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *scale,
                                 const float *shift);
kc_status kc__cpu_normalize(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *mean,
                            const float *var, int invert);
kc_status kc__cpu_groupnorm_forward(kc_backend *be, const float *x, float *y, int n, int64_t s, int c, int groups,
                                    const float *gamma, const float *beta, float epsilon, float *save_mean,
                                    float *save_inv_std);
kc_status kc__cpu_groupnorm_backward(kc_backend *be, const float *x, const float *dy, float *dx, int n, int64_t s,
                                     int c, int groups, const float *gamma, const float *save_mean,
                                     const float *save_inv_std, float *dgamma, float *dbeta);
kc_status kc__cpu_upsample2d_forward(kc_backend *be, const kc_resample2d_desc *d, const float *x, float *y);
kc_status kc__cpu_upsample2d_backward(kc_backend *be, const kc_resample2d_desc *d, const float *dy, float *dx);
kc_status kc__cpu_permute(kc_backend *be, const float *x, float *y, int n, int rank, const int *dims, const int *perm);
/* Bilinear upsampling's two source indices along an axis and the second one's weight. */
void kc__cpu_bilinear_tap(int o, int factor, int in, int *i0, int *i1, float *frac);
/* ---- cpu_augment.c: resampling and colour of the augmentation layers */
kc_status kc__cpu_sample2d_forward(kc_backend *be, const kc_sample2d_desc *d, const float *mats, const float *x,
                                   float *y);
kc_status kc__cpu_sample2d_backward(kc_backend *be, const kc_sample2d_desc *d, const float *mats, const float *dy,
                                    float *dx);
kc_status kc__cpu_color2d_forward(kc_backend *be, const kc_color2d_desc *d, const float *params, const float *x,
                                  float *y);
kc_status kc__cpu_color2d_backward(kc_backend *be, const kc_color2d_desc *d, const float *params, const float *y,
                                   const float *dy, float *dx);

/* ---- the activations one inference tile may touch (kc_backend.infer_tile_bytes):
 * about the two cores' L2 (1 MiB each on Zen 4) and a slice of the shared L3; workload A's
 * first convolution then runs 32 images at a time (bench/RESULTS.md, "Inference in tiles"). */
#define KC_CPU_INFER_TILE_BYTES ((size_t)4 << 20)
#endif /* KC_BACKEND_CPU_H */
