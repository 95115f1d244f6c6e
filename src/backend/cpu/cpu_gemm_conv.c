/* cpu_gemm_conv.c — GEMM (OpenBLAS) and 2-D convolution by im2col + GEMM, NHWC / HWIO.
 *
 * forward:          col (rows, K) = im2col(x);      y (rows, F) = col x W (K, F) [+ b]
 * backward_filter:  col = im2col(x);                dW (K, F) = col^T x dy;  db = colsum(dy)
 * backward_data:    dcol (rows, K) = dy x W^T;      dx = col2im(dcol)
 * with rows = N*OH*OW and K = KH*KW*C (the kernel (KH, KW, C, F) read as a (K, F) matrix).
 *
 * Workspace: the col buffer of a chunk of whole images, as many as fit in
 * KC_CPU_CONV_WS_CAP bytes (4 MiB, see cpu.h; at least one image); the batch is processed
 * chunk by chunk (backward_filter accumulates dW over the chunks). A 1x1 kernel with stride 1 and no
 * padding needs no workspace: x is already the (N*H*W, C) col matrix.
 *
 * col2im is written as a gather over input rows (each thread owns whole rows of dx), so
 * it runs in parallel without atomics and overwrites dx, or adds into it when the descriptor
 * asks (accumulate: the 1x1 GEMM then runs with beta = 1; not on the Winograd path). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu.h"

/* ---- GEMM on the OpenMP team with single-threaded OpenBLAS calls.
 * OpenBLAS's own threading (its OpenMP build) splits one GEMM across the team and shares
 * the packed panels between the threads, which wait for each other inside the call
 * (sched_yield). On tall, skinny GEMMs (thousands of pixel rows, m or k, against at most
 * 256 columns of C) that split ran 1.1-2.9x slower on 2 threads than slices of C computed by
 * one call per thread; on wider or shorter ones its shared packing was as fast or faster
 * (0.3-1.0x): bench_conv_gemm, bench/RESULTS.md (branch resnet-2t). So there (m or k at least
 * KC_CPU_GEMM_SPLIT_DIM, n at most KC_CPU_GEMM_SPLIT_COLS) C is cut into slices, one
 * single-threaded OpenBLAS call each (OpenBLAS runs single-threaded inside a parallel
 * region): by rows when C has at least as many rows as columns (each slice packs all of
 * op(B)), else by columns; the threads take the slices as they come free.
 * The slices depend on the GEMM's shape alone, and one thread computes the same slices one
 * after the other: OpenBLAS rounds a row differently by where its call starts and ends (its
 * kernels' tiles count from the call's first row and the last, partial tile has kernels of
 * its own), so only the same calls give the same C at any thread count, whatever OpenBLAS's
 * core type (test_gemm_split, run under several). A backend with cpu_gemm_split = 0
 * (kc_device_opts.cpu_gemm_split = KC_FALSE, KERAC_CPU_GEMM_SPLIT=0) leaves every GEMM to
 * OpenBLAS's threading (the reference this path is tested and measured against). */
#define KC_CPU_GEMM_SPLIT_DIM 4096
#define KC_CPU_GEMM_SPLIT_COLS 256
#define KC_CPU_GEMM_SPLIT_MIN ((int64_t)1 << 21) /* multiply-adds below which one call runs */
/* Rows a slice has: at least 16 slices where each can have KC_CPU_GEMM_ROW_ALIGN rows, at
 * most KC_CPU_GEMM_SLICE_ROWS rows a slice (a C of fewer rows, its k long: up to 4 slices
 * of 16-row multiples) (about 20 slices of a 16,000-row C): a thread
 * whose core runs slower for a while computes fewer, and each slice packs op(B) once more
 * (k x <= 256, against its own <= 768 x k of op(A)). Cuts fall on multiples of
 * KC_CPU_GEMM_ROW_ALIGN, so each slice's rows fill OpenBLAS's tiles (4 to 24 rows by core
 * type) but C's last. Columns go KC_CPU_GEMM_SLICE_COLS to a slice. */
#define KC_CPU_GEMM_SLICE_ROWS 768
#define KC_CPU_GEMM_ROW_ALIGN 192
#define KC_CPU_GEMM_SLICE_COLS 32

/* The slices of a split GEMM: by its shape alone (in KERAC_CPU_BALANCE=0's
 * one-share-a-thread mode, one a thread). */
static int gemm_slices(int m, int n) {
    if (!kc__cpu_balance()) return kc__num_threads();
    if (m < n) return (n + KC_CPU_GEMM_SLICE_COLS - 1) / KC_CPU_GEMM_SLICE_COLS;
    if (m < 2 * KC_CPU_GEMM_ROW_ALIGN) return KC_MIN(4, m / 16); /* few rows, a long k: op(B) packs once a slice */
    return KC_MIN(m / KC_CPU_GEMM_ROW_ALIGN, KC_MAX(16, m / KC_CPU_GEMM_SLICE_ROWS));
}

static int gemm_split_applies(const kc_backend *be, int m, int n, int k) {
    return be->cpu_gemm_split && KC_MAX(m, k) >= KC_CPU_GEMM_SPLIT_DIM && n <= KC_CPU_GEMM_SPLIT_COLS &&
           (int64_t)m * n * k >= KC_CPU_GEMM_SPLIT_MIN && gemm_slices(m, n) > 1;
}

/* Whether a split is off the table: inside a parallel region, or in a build without OpenMP. */
static int gemm_no_team(void) {
#ifdef _OPENMP
    return omp_in_parallel();
#else
    return 1;
#endif
}

int kc__cpu_gemm_threads(const kc_backend *be, int m, int n, int k) {
    if (gemm_no_team() || !gemm_split_applies(be, m, n, k)) return 1;
    return KC_MAX(1, KC_MIN(kc__num_threads(), gemm_slices(m, n)));
}

/* Slice sl of `slices` of C: rows [r0, r1) of C and op(A), or columns [c0, c1) of C and op(B). */
static void gemm_slice(int sl, int slices, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                       float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (m >= n) {
        const int align = m < 2 * KC_CPU_GEMM_ROW_ALIGN ? 16 : KC_CPU_GEMM_ROW_ALIGN;
        int r0 = (int)((int64_t)m * sl / slices), r1 = (int)((int64_t)m * (sl + 1) / slices);
        r0 -= r0 % align;
        r1 = sl + 1 == slices ? m : r1 - r1 % align;
        if (r1 > r0)
            cblas_sgemm(CblasRowMajor, ta, tb, r1 - r0, n, k, alpha, a + (ta == CblasTrans ? (size_t)r0 : (size_t)r0 * lda),
                        lda, b, ldb, beta, c + (size_t)r0 * ldc, ldc);
    } else {
        const int c0 = KC_MIN(n, KC_CPU_GEMM_SLICE_COLS * sl), c1 = sl + 1 == slices ? n : KC_MIN(n, KC_CPU_GEMM_SLICE_COLS * (sl + 1));
        if (c1 > c0)
            cblas_sgemm(CblasRowMajor, ta, tb, m, c1 - c0, k, alpha, a, lda,
                        b + (tb == CblasTrans ? (size_t)c0 * ldb : (size_t)c0), ldb, beta, c + c0, ldc);
    }
}

void kc__cpu_sgemm(const kc_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    /* kerac's tiles for a small dimension (cpu_gemm_small.c): the 1x1 convolutions, the
     * im2col GEMMs and Dense. (Winograd's per-thread GEMMs call OpenBLAS themselves: the
     * tiles measured no better there, bench/RESULTS.md "Small GEMMs".) */
    if (be->cpu_gemm_small && kc__cpu_gemm_small_applies(trans_a, trans_b, m, n, k, alpha, beta)) {
        kc__cpu_gemm_small(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    const enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    const int split = !gemm_no_team() && gemm_split_applies(be, m, n, k);
    kc__threads_sync(); /* OpenBLAS's team: kerac's count */
    if (!split) {
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    const int nt = kc__cpu_gemm_threads(be, m, n, k), slices = gemm_slices(m, n);
    if (nt <= 1) { /* the same slices, one thread: the same C (no one-thread OpenMP region) */
        for (int sl = 0; sl < slices; sl++) gemm_slice(sl, slices, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int sl = 0; sl < slices; sl++) gemm_slice(sl, slices, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

kc_status kc__cpu_gemm(kc_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (m < 0 || n < 0 || k < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu gemm: negative size m=%d n=%d k=%d", m, n, k);
    if (m == 0 || n == 0) return KC_STATUS_OK;
    int a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
    if (lda < KC_MAX(1, a_cols) || ldb < KC_MAX(1, b_cols) || ldc < n)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu gemm: leading dimension too small (lda=%d needs >= %d, ldb=%d needs >= %d, "
                        "ldc=%d needs >= %d)",
                        lda, KC_MAX(1, a_cols), ldb, KC_MAX(1, b_cols), ldc, n);
    if (!c || (k > 0 && (!a || !b)))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu gemm: NULL matrix pointer");
    if (k == 0) { /* C = beta * C */
        for (int i = 0; i < m; i++) {
            float *ci = c + (size_t)i * (size_t)ldc;
            if (beta == 0.0f)
                memset(ci, 0, (size_t)n * sizeof(float));
            else
                for (int j = 0; j < n; j++) ci[j] *= beta;
        }
        return KC_STATUS_OK;
    }
    kc__cpu_sgemm(be, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return KC_STATUS_OK;
}

/* ---- convolution helpers */

static int conv_is_1x1(const kc_conv2d_desc *d) {
    return d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->pad_top == 0 && d->pad_left == 0 &&
           d->oh == d->h && d->ow == d->w;
}

static kc_status conv_check(const kc_conv2d_desc *d, const char *what) {
    if (!d) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: the descriptor is NULL", what);
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->f <= 0 || d->kh <= 0 || d->kw <= 0 || d->sh <= 0 ||
        d->sw <= 0 || d->dh <= 0 || d->dw <= 0 || d->oh <= 0 || d->ow <= 0 || d->pad_top < 0 || d->pad_left < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu %s: bad convolution descriptor (input %dx%dx%dx%d, kernel %dx%dx%dx%d, strides %dx%d, "
                        "dilation %dx%d, pad %d,%d, output %dx%d): every size must be positive and padding >= 0",
                        what, d->n, d->h, d->w, d->c, d->kh, d->kw, d->c, d->f, d->sh, d->sw, d->dh, d->dw,
                        d->pad_top, d->pad_left, d->oh, d->ow);
    int64_t k = (int64_t)d->kh * d->kw * d->c;
    if (k > INT_MAX / 2 || (int64_t)d->oh * d->ow > INT_MAX / 2 || (int64_t)d->h * d->w * d->c > INT_MAX / 2)
        return kc__fail(KC_STATUS_UNSUPPORTED, "cpu %s: convolution too large for 32-bit BLAS indices", what);
    return KC_STATUS_OK;
}

/* Images per chunk: as many whole images as fit in the workspace cap (at least 1). */
static int conv_chunk(const kc_conv2d_desc *d) {
    size_t k = (size_t)d->kh * (size_t)d->kw * (size_t)d->c;
    size_t per = (size_t)d->oh * (size_t)d->ow * k * sizeof(float); /* col bytes of one image */
    size_t nb = per ? KC_CPU_CONV_WS_CAP / per : (size_t)d->n;
    if (nb < 1) nb = 1;
    if (nb > (size_t)d->n) nb = (size_t)d->n;
    size_t max_rows = (size_t)INT_MAX / ((size_t)d->oh * (size_t)d->ow); /* gemm m is an int */
    if (nb > max_rows) nb = max_rows ? max_rows : 1;
    return (int)nb;
}

static int direct_parts(const kc_conv2d_desc *d);

/* ---- direct convolution for a small patch (KH*KW*C <= KC_CPU_DIRECT_K and filters a
 * multiple of 16, e.g. a first layer on 1- or 3-channel images). im2col + GEMM would
 * stream a col matrix KH*KW times the input through memory for a GEMM whose inner
 * dimension is tiny (9 for the default CNN's first layer). Forward: for each block
 * of 16 filters, a block of 8 / 4 / 2 output pixels (AVX-512 / AVX2 / baseline) accumulates
 * in registers, 8 independent FMA chains, each input value broadcast straight from the image
 * where the pixels' patches lie inside it, else from the row's patches gathered into a small
 * buffer on the stack (im2col of one row). Backward-filter: the K gradient rows accumulate
 * in registers (K independent chains; K = 9 compiled as a constant so they stay there) while
 * the row's patches, read the same way, stream by. GCC's vector
 * extension keeps this portable: 16 floats are one AVX-512 register, two AVX2 ones. */
#define KC_CPU_DIRECT_K 32
#define KC_CPU_DIRECT_ROW 64 /* output pixels gathered at a time */

/* The one rule for which kernel runs a convolution: every entry below and the backend's
 * describe ask it. */
kc_cpu_conv_kernel kc__cpu_conv_kernel(kc_backend *be, const kc_conv2d_desc *d) {
    if (conv_is_1x1(d)) return KC_CPU_CONV_1X1;
    if (d->kh * d->kw * d->c <= KC_CPU_DIRECT_K && d->f % 16 == 0) return KC_CPU_CONV_DIRECT;
    if (kc__cpu_blocked_enabled(be) && kc__cpu_blocked_applies(d)) return KC_CPU_CONV_BLOCKED;
    return KC_CPU_CONV_IM2COL;
}

/* The workspace of the kernels other than Winograd (kc__cpu_conv_kernel's). */
static size_t gemm_workspace(kc_backend *be, const kc_conv2d_desc *d) {
    kc_cpu_conv_kernel kernel = kc__cpu_conv_kernel(be, d);
    if (kernel == KC_CPU_CONV_1X1) return 0;
    size_t k = (size_t)d->kh * (size_t)d->kw * (size_t)d->c;
    size_t col = (size_t)conv_chunk(d) * (size_t)d->oh * (size_t)d->ow * k * sizeof(float);
    if (kernel == KC_CPU_CONV_DIRECT) { /* backward-data still uses the col matrix; backward-filter the partial sums */
        size_t parts = (size_t)direct_parts(d) * k * (size_t)d->f * sizeof(float);
        return KC_MAX(col, parts);
    }
    if (kernel == KC_CPU_CONV_BLOCKED) return KC_MAX(col, kc__cpu_blocked_workspace(d)); /* col: backward-data */
    return col;
}

/* The workspace of the kernel d's own batch runs. */
static size_t choice_workspace(kc_backend *be, const kc_conv2d_desc *d) {
    const int wg = kc__cpu_winograd_tile_of(be, d);
    return wg ? kc__cpu_winograd_workspace(d, wg) : gemm_workspace(be, d);
}

/* A model plans one workspace at its largest batch and runs smaller ones in it (an epoch's
 * last). Winograd's cost, and so the kernel, depends on the batch (cpu.h): where it may run,
 * the workspace is the largest that any batch up to d's asks. */
size_t kc__cpu_conv2d_workspace(kc_backend *be, const kc_conv2d_desc *d) {
    if (!d || d->n <= 0 || d->oh <= 0 || d->ow <= 0 || d->kh <= 0 || d->kw <= 0 || d->c <= 0) return 0;
    size_t need = choice_workspace(be, d);
    if (!kc__cpu_winograd_may_apply(be, d)) return need;
    kc_conv2d_desc e = *d;
    for (e.n = 1; e.n < d->n; e.n++) need = KC_MAX(need, choice_workspace(be, &e));
    return need;
}

/* Copy n floats; short runs (few input channels) inline instead of a memcpy call. */
static inline void copy_floats(float *restrict dst, const float *restrict src, size_t n) {
    if (n > 16) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

static inline void zero_floats(float *dst, size_t n) {
    if (n > 16) {
        memset(dst, 0, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++) dst[i] = 0.0f;
}

/* col rows of output row oy of image xi (H, W, C): dst (OW, KH*KW*C), zeros outside. */
static void im2col_row(const kc_conv2d_desc *d, const float *xi, int oy, float *dst) {
    const int h = d->h, w = d->w, c = d->c, kh = d->kh, kw = d->kw, ow = d->ow;
    const int sw = d->sw, dh = d->dh, dw = d->dw, pl = d->pad_left;
    const size_t kwc = (size_t)kw * c;
    for (int ox = 0; ox < ow; ox++) {
        const int ix0 = ox * sw - pl;
        const int span_in = dw == 1 && ix0 >= 0 && ix0 + kw <= w;
        for (int ki = 0; ki < kh; ki++) {
            const int iy = oy * d->sh - d->pad_top + ki * dh;
            if (iy < 0 || iy >= h) {
                zero_floats(dst, kwc);
                dst += kwc;
                continue;
            }
            const float *xrow = xi + (size_t)iy * w * c;
            if (span_in) {
                copy_floats(dst, xrow + (size_t)ix0 * c, kwc);
                dst += kwc;
                continue;
            }
            for (int kj = 0; kj < kw; kj++) {
                const int ix = ix0 + kj * dw;
                if (ix < 0 || ix >= w)
                    zero_floats(dst, (size_t)c);
                else
                    copy_floats(dst, xrow + (size_t)ix * c, (size_t)c);
                dst += c;
            }
        }
    }
}

/* col (nb*OH*OW, KH*KW*C) from nb images starting at x (N, H, W, C). */
static void im2col(const kc_conv2d_desc *d, const float *x, int nb, float *col) {
    const size_t kdim = (size_t)d->kh * d->kw * d->c;
    const int64_t rows = (int64_t)nb * d->oh; /* (image, output row) pairs */
    KC_CPU_PAR_FOR(kc__cpu_par(rows * d->ow * (int64_t)kdim), KC_CPU_BALANCED(rows), for (int64_t r = 0; r < rows; r++) {
        const int img = (int)(r / d->oh), oy = (int)(r % d->oh);
        im2col_row(d, x + (size_t)img * d->h * d->w * d->c, oy, col + (size_t)r * d->ow * kdim);
    });
}

/* Row r (image r / H, input row r % H) of col2im below. */
static void col2im_row(const kc_conv2d_desc *d, const float *dcol, float *dx, int64_t r) {
    const int h = d->h, w = d->w, c = d->c, kh = d->kh, kw = d->kw, oh = d->oh, ow = d->ow;
    const int sh = d->sh, sw = d->sw, dh = d->dh, dw = d->dw, pt = d->pad_top, pl = d->pad_left;
    const size_t kdim = (size_t)kh * kw * c;
    const int img = (int)(r / h), iy = (int)(r % h);
    float *dst = dx + (size_t)r * w * c; /* (W, C) */
    if (!d->accumulate) memset(dst, 0, (size_t)w * c * sizeof(float));
    for (int ki = 0; ki < kh; ki++) {
        const int ty = iy + pt - ki * dh;
        if (ty < 0 || ty % sh) continue;
        const int oy = ty / sh;
        if (oy >= oh) continue;
        const float *src_row = dcol + ((size_t)img * oh + oy) * ow * kdim + (size_t)ki * kw * c;
        for (int ox = 0; ox < ow; ox++) {
            const float *src = src_row + (size_t)ox * kdim; /* (KW, C) of this (ki) */
            const int ix0 = ox * sw - pl;
            if (dw == 1 && ix0 >= 0 && ix0 + kw <= w) {
                float *o = dst + (size_t)ix0 * c;
                const size_t len = (size_t)kw * c;
                for (size_t i = 0; i < len; i++) o[i] += src[i];
                continue;
            }
            for (int kj = 0; kj < kw; kj++) {
                const int ix = ix0 + kj * dw;
                if (ix < 0 || ix >= w) continue;
                float *o = dst + (size_t)ix * c;
                const float *s = src + (size_t)kj * c;
                for (int ch = 0; ch < c; ch++) o[ch] += s[ch];
            }
        }
    }
}

/* dx (nb, H, W, C) = col2im(dcol (nb*OH*OW, KH*KW*C)), overwritten (added into with
 * d->accumulate): each input row sums the col entries that were copied from it. */
static void col2im(const kc_conv2d_desc *d, const float *dcol, int nb, float *dx) {
    const int64_t rows = (int64_t)nb * d->h; /* (image, input row) pairs: row r of dx */
    const int64_t work = (int64_t)nb * d->oh * d->ow * d->kh * d->kw * d->c;
    KC_CPU_PAR_FOR(kc__cpu_par(work), KC_CPU_BALANCED(rows), for (int64_t r = 0; r < rows; r++) col2im_row(d, dcol, dx, r););
}

/* The direct kernels work on blocks of 16 filters held as DN vectors of DV floats, DV the
 * width this copy's instruction set has (cpu_isa.h): one 64-byte vector for AVX-512, two
 * of 8 for AVX2, four of 4 for the baseline. A 64-byte vector on AVX2 goes through the
 * stack at every step (that copy ran the default CNN's first layer 15x slower than the
 * AVX-512 one), and so does an accumulator of an under-aligned vector type: the types keep
 * their natural alignment; loads and stores go through memcpy (any float address). */
#if defined(__AVX512F__)
#define DV 16
#elif defined(__AVX2__)
#define DV 8
#else
#define DV 4
#endif
#define DN (16 / DV)
typedef float kc_vd __attribute__((vector_size(DV * 4)));
typedef int32_t kc_vdi __attribute__((vector_size(DV * 4)));

/* max(0, v) lane by lane, as act_forward's ReLU (x > 0 ? x : 0, so NaN -> 0) */
static inline kc_vd vd_relu(kc_vd v) {
    const kc_vdi keep = v > (kc_vd){0};
    return (kc_vd)((kc_vdi)v & keep);
}

static inline kc_vd vd_load(const float *p) {
    kc_vd v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vd_store(float *p, kc_vd v) { memcpy(p, &v, sizeof v); }

/* patches of output pixels [ox0, ox0 + n) of row oy: col (n, K) */
static void gather_span(const kc_conv2d_desc *d, const float *xi, int oy, int ox0, int n, float *col) {
    kc_conv2d_desc sub = *d; /* the same geometry shifted to start at ox0, n pixels wide */
    sub.ow = n;
    sub.pad_left = d->pad_left - ox0 * d->sw;
    im2col_row(&sub, xi, oy, col);
}

/* Output pixels per register block of the direct forward: PB pixels x DN vectors of
 * accumulators, 8 independent FMA chains whatever the vector width (one pixel at a time was
 * a chain of K dependent FMAs: the default CNN's first layer ran at 15 % of the FMA rate). */
#define PB (8 / DN)

/* Where the direct forward finds tap k of pixel q of a span: src[off[k] + q * step] — the
 * image itself inside it (off: the taps' offsets from the first pixel's first tap, step: sw*C),
 * or a gathered col (KC_CPU_DIRECT_ROW, K) at its edges (off[k] = k, step = K). */
typedef struct direct_src {
    const float *src;
    const int *off;
    int step;
} direct_src;

/* Pixels [p0, p0 + PB) of a span, 16 filters from f0 (weights wk, bias): the first nq into yr
 * (span, F), through max(0,) when relu. */
static inline void direct_block(direct_src s, int p0, int nq, int kdim, const kc_vd (*wk)[DN], const kc_vd *bias,
                                bool relu, float *yr, int f) {
    kc_vd acc[PB][DN];
    const float *base = s.src + (size_t)p0 * s.step;
#pragma GCC unroll 8
    for (int q = 0; q < PB; q++)
#pragma GCC unroll 4
        for (int v = 0; v < DN; v++) acc[q][v] = bias[v];
    for (int k = 0; k < kdim; k++) {
        const float *tap = base + s.off[k];
#pragma GCC unroll 8
        for (int q = 0; q < PB; q++) {
            const float x = tap[(size_t)q * s.step];
#pragma GCC unroll 4
            for (int v = 0; v < DN; v++) acc[q][v] += x * wk[k][v];
        }
    }
#pragma GCC unroll 8
    for (int q = 0; q < PB; q++)
#pragma GCC unroll 4
        for (int v = 0; v < DN; v++)
            if (q < nq) vd_store(yr + (size_t)(p0 + q) * f + v * DV, relu ? vd_relu(acc[q][v]) : acc[q][v]);
}

/* Pixels [0, n) of a span, every filter, in blocks of PB: the last one moved back to end at
 * n (its first pixels computed and stored twice, the same values), or, when n < PB, computed
 * on src's zero rows past n and only n stored. */
static void direct_pixels(direct_src s, int n, int kdim, int f, const float *w, const float *b, bool relu,
                          float *yr) {
    for (int f0 = 0; f0 < f; f0 += 16) {
        kc_vd wk[KC_CPU_DIRECT_K][DN], bias[DN];
        for (int k = 0; k < kdim; k++)
#pragma GCC unroll 4
            for (int v = 0; v < DN; v++) wk[k][v] = vd_load(w + (size_t)k * f + f0 + v * DV);
#pragma GCC unroll 4
        for (int v = 0; v < DN; v++) bias[v] = b ? vd_load(b + f0 + v * DV) : (kc_vd){0};
        for (int p = 0; p < n; p += PB)
            direct_block(s, n < PB ? 0 : KC_MIN(p, n - PB), KC_MIN(PB, n), kdim, (const kc_vd(*)[DN])wk, bias, relu,
                         yr + f0, f);
    }
}

/* The taps' offsets from a pixel's first tap in the image (H, W, C): img_off[k], k = (ki, kj, ch). */
static void direct_offsets(const kc_conv2d_desc *d, int *img_off) {
    for (int ki = 0, k = 0; ki < d->kh; ki++)
        for (int kj = 0; kj < d->kw; kj++)
            for (int ch = 0; ch < d->c; ch++) img_off[k++] = (ki * d->dh * d->w + kj * d->dw) * d->c + ch;
}

/* Where pixels [ox0, ox0 + n) of output row oy of image xi find their taps. A span of at least
 * PB pixels with every tap inside the image (all of a "valid" convolution) is read in place;
 * the others are gathered into col (KC_CPU_DIRECT_ROW, K), a span under PB zero-padded to a
 * whole block. */
static direct_src direct_span(const kc_conv2d_desc *d, const float *xi, int oy, int ox0, int n, const int *img_off,
                              float *col) {
    static const int col_off[KC_CPU_DIRECT_K] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                                                 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
    const int kdim = d->kh * d->kw * d->c, iy0 = oy * d->sh - d->pad_top, ix0 = ox0 * d->sw - d->pad_left;
    if (n >= PB && iy0 >= 0 && iy0 + (d->kh - 1) * d->dh < d->h && ix0 >= 0 &&
        ix0 + (n - 1) * d->sw + (d->kw - 1) * d->dw < d->w)
        return (direct_src){xi + ((size_t)iy0 * d->w + ix0) * d->c, img_off, d->sw * d->c};
    gather_span(d, xi, oy, ox0, n, col);
    if (n < PB) memset(col + (size_t)n * kdim, 0, (size_t)(PB - n) * kdim * sizeof(float));
    return (direct_src){col, col_off, kdim};
}

/* One output row r (image r / OH, row r % OH), in spans of KC_CPU_DIRECT_ROW pixels. */
static void direct_row(const kc_conv2d_desc *d, const float *x, const float *w, const float *b, float *y,
                       int64_t r, const int *img_off) {
    const int f = d->f, kdim = d->kh * d->kw * d->c;
    const int img = (int)(r / d->oh), oy = (int)(r % d->oh);
    const float *xi = x + (size_t)img * d->h * d->w * d->c; /* (H, W, C) */
    float col[KC_CPU_DIRECT_ROW * KC_CPU_DIRECT_K];         /* (span, K) */
    for (int ox0 = 0; ox0 < d->ow; ox0 += KC_CPU_DIRECT_ROW) {
        const int n = KC_MIN(KC_CPU_DIRECT_ROW, d->ow - ox0);
        const direct_src s = direct_span(d, xi, oy, ox0, n, img_off, col);
        direct_pixels(s, n, kdim, f, w, b, d->relu != 0, y + ((size_t)r * d->ow + ox0) * f);
    }
}

static void conv_direct_forward(const kc_conv2d_desc *d, const float *x, const float *w, const float *b, float *y) {
    int img_off[KC_CPU_DIRECT_K];
    direct_offsets(d, img_off);
    const int64_t rows = (int64_t)d->n * d->oh;
    KC_CPU_PAR_FOR(kc__cpu_par(rows * d->ow * d->f), KC_CPU_BALANCED(rows),
                   for (int64_t r = 0; r < rows; r++) direct_row(d, x, w, b, y, r, img_off););
}

/* part (K, F), 16 filters from f0, += the sum over pixels [0, n) of a span of patch (K) x dy
 * row (dyr: (span, F)): the K rows accumulate in registers, K independent FMA chains. Inlined
 * with kdim a constant (9: a 3x3 kernel on one channel) the accumulators stay in registers. */
static inline __attribute__((always_inline)) void direct_dw_span(direct_src s, int n, int kdim, const float *dyr,
                                                                 int f, int f0, float *part) {
    kc_vd acc[KC_CPU_DIRECT_K][DN] = {{{0}}};
    for (int p = 0; p < n; p++) {
        kc_vd g[DN];
#pragma GCC unroll 4
        for (int v = 0; v < DN; v++) g[v] = vd_load(dyr + (size_t)p * f + f0 + v * DV);
        const float *base = s.src + (size_t)p * s.step;
#pragma GCC unroll 32
        for (int k = 0; k < kdim; k++) {
            const float xv = base[s.off[k]];
#pragma GCC unroll 4
            for (int v = 0; v < DN; v++) acc[k][v] += xv * g[v];
        }
    }
#pragma GCC unroll 32
    for (int k = 0; k < kdim; k++)
#pragma GCC unroll 4
        for (int v = 0; v < DN; v++) {
            float *o = part + (size_t)k * f + f0 + v * DV;
            vd_store(o, vd_load(o) + acc[k][v]);
        }
}

/* Output rows [r0, r1) into part (K, F). */
static void direct_dw_rows(const kc_conv2d_desc *d, const float *x, const float *dy, int64_t r0, int64_t r1,
                           const int *img_off, float *part) {
    const int f = d->f, kdim = d->kh * d->kw * d->c;
    float col[KC_CPU_DIRECT_ROW * KC_CPU_DIRECT_K];
    for (int64_t r = r0; r < r1; r++) {
        const int img = (int)(r / d->oh), oy = (int)(r % d->oh);
        const float *xi = x + (size_t)img * d->h * d->w * d->c;
        for (int ox0 = 0; ox0 < d->ow; ox0 += KC_CPU_DIRECT_ROW) {
            const int n = KC_MIN(KC_CPU_DIRECT_ROW, d->ow - ox0);
            const direct_src s = direct_span(d, xi, oy, ox0, n, img_off, col);
            const float *dyr = dy + ((size_t)r * d->ow + ox0) * f;
            for (int f0 = 0; f0 < f; f0 += 16) {
                if (kdim == 9) direct_dw_span(s, n, 9, dyr, f, f0, part);
                else direct_dw_span(s, n, kdim, dyr, f, f0, part);
            }
        }
    }
}

/* dW (K, F) = sum over output pixels of patch (K) x dy (F): nparts partial sums in the
 * workspace, part j over the output rows [rows j / nparts, rows (j + 1) / nparts) whichever
 * thread runs it (taken as threads come free), combined in part order: reproducible for a
 * given thread count. */
static void conv_direct_backward_filter(const kc_conv2d_desc *d, const float *x, const float *dy, float *dw,
                                        float *partial, int nparts) {
    const int64_t rows = (int64_t)d->n * d->oh;
    const size_t kf = (size_t)d->kh * d->kw * d->c * d->f;
    int img_off[KC_CPU_DIRECT_K];
    direct_offsets(d, img_off);
    const int team = KC_MIN(kc__num_threads(), nparts);
    KC_CPU_PAR_FOR_TEAM(team > 1, team, schedule(dynamic, 1), for (int j = 0; j < nparts; j++) {
        float *part = partial + (size_t)j * kf; /* (K, F) */
        memset(part, 0, kf * sizeof(float));
        direct_dw_rows(d, x, dy, rows * j / nparts, rows * (j + 1) / nparts, img_off, part);
    });
    for (size_t i = 0; i < kf; i++) {
        float s = 0.0f;
        for (int j = 0; j < nparts; j++) s += partial[(size_t)j * kf + i];
        dw[i] = s;
    }
}

/* The parts of the filter gradient: KC_CPU_DIRECT_GROUPS per thread (one with
 * KERAC_CPU_BALANCE=0), at most 64; one when the work is too small to share. */
#define KC_CPU_DIRECT_GROUPS 4
static int direct_parts(const kc_conv2d_desc *d) {
    int64_t work = (int64_t)d->n * d->oh * d->ow * d->f;
    int nt = kc__cpu_par(work) ? kc__num_threads() : 1;
    const int per = nt > 1 && kc__cpu_balance() ? KC_CPU_DIRECT_GROUPS : 1;
    return KC_MAX(1, KC_MIN(nt * per, 64));
}

/* A kernel that needs scratch memory got none, or less than it uses. */
static kc_status check_workspace(kc_backend *be, const kc_conv2d_desc *d, const void *ws, size_t ws_bytes,
                                 const char *what) {
    /* what this call's kernel uses (O(1)); conv2d_workspace, at plan time, also covers the
     * smaller batches, and asks at least this */
    size_t need = choice_workspace(be, d);
    if (ws && ws_bytes >= need) return KC_STATUS_OK;
    if (!ws)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu %s: no workspace given (this convolution needs %zu bytes; give it what conv2d_workspace "
                        "asks)",
                        what, need);
    return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                    "cpu %s: a workspace of %zu bytes is too small (this convolution needs %zu; give it what "
                    "conv2d_workspace asks)",
                    what, ws_bytes, need);
}

/* y (rows, f) = max(0, y), as act_forward's ReLU */
static void relu_rows(float *y, int64_t rows, int f) {
    KC_CPU_PAR_FOR(kc__cpu_par(rows * f), KC_CPU_BALANCED(rows), for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * f;
        for (int j = 0; j < f; j++) yr[j] = yr[j] > 0.0f ? yr[j] : 0.0f;
    });
}

/* y (m, f) = x (m, k) W (k, f) + b (NULL: none), then max(0, y) when relu, without a pass of
 * its own over y for the bias: kerac's tiles add it (and apply the ReLU) in their registers
 * before they store; for OpenBLAS, y starts as the bias rows and the GEMM adds into it (beta 1)
 * instead of clearing y first (its pass for beta 0), and only a ReLU takes a pass of its own.
 * ResNet50's 1x1 convolutions carry a bias: their forwards took 126.6 ms a step on one thread
 * with the separate pass, 117.2 without (bench/RESULTS.md, "The bias in the GEMM"). */
static void gemm_bias_relu(const kc_backend *be, int m, int f, int k, const float *x, const float *w, const float *b,
                           bool relu, float *y) {
    if (be->cpu_gemm_small && kc__cpu_gemm_small_applies(0, 0, m, f, k, 1.0f, 0.0f)) {
        kc__cpu_gemm_small_bias_relu(m, f, k, x, k, w, f, b, relu, y, f);
        return;
    }
    if (b)
        KC_CPU_PAR_FOR(kc__cpu_par((int64_t)m * f), KC_CPU_BALANCED(m),
                       for (int64_t r = 0; r < m; r++) memcpy(y + r * f, b, (size_t)f * sizeof(float)););
    kc__cpu_sgemm(be, 0, 0, m, f, k, 1.0f, x, k, w, f, b ? 1.0f : 0.0f, y, f);
    if (relu) relu_rows(y, m, f);
}

/* Rows of an (rows, ...) gemm done in pieces of at most this many (32-bit BLAS m). */
#define KC_CPU_GEMM_MAX_ROWS ((int64_t)1 << 30)

kc_status kc__cpu_conv2d_forward(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *w,
                                 const float *b, float *y, void *ws, size_t ws_bytes) {
    KC_TRY(conv_check(d, "conv2d_forward"));
    if (!x || !w || !y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu conv2d_forward: NULL x, kernel or y");
    const int wg = kc__cpu_winograd_tile_of(be, d);
    if (wg) {
        KC_TRY(check_workspace(be, d, ws, ws_bytes, "conv2d_forward"));
        return kc__cpu_winograd_forward(d, wg, x, w, b, y, ws, ws_bytes);
    }
    const int f = d->f;
    const int64_t rows_all = (int64_t)d->n * d->oh * d->ow;
    const kc_cpu_conv_kernel kernel = kc__cpu_conv_kernel(be, d);
    if (kernel == KC_CPU_CONV_DIRECT) {
        conv_direct_forward(d, x, w, b, y);
        return KC_STATUS_OK;
    }
    if (kernel == KC_CPU_CONV_BLOCKED) {
        KC_TRY(check_workspace(be, d, ws, ws_bytes, "conv2d_forward"));
        kc__cpu_blocked_forward(d, x, w, b, y, ws);
        return KC_STATUS_OK;
    }
    if (kernel == KC_CPU_CONV_1X1) {
        /* y (N*H*W, F) = x (N*H*W, C) x W (C, F) */
        for (int64_t r0 = 0; r0 < rows_all; r0 += KC_CPU_GEMM_MAX_ROWS) {
            int m = (int)KC_MIN(KC_CPU_GEMM_MAX_ROWS, rows_all - r0);
            gemm_bias_relu(be, m, f, d->c, x + (size_t)r0 * d->c, w, b, d->relu, y + (size_t)r0 * f);
        }
    } else {
        KC_TRY(check_workspace(be, d, ws, ws_bytes, "conv2d_forward"));
        float *col = ws; /* (nb*OH*OW, KH*KW*C) */
        const int kdim = d->kh * d->kw * d->c, nb_max = conv_chunk(d);
        const size_t img_in = (size_t)d->h * d->w * d->c, img_out = (size_t)d->oh * d->ow;
        for (int n0 = 0; n0 < d->n; n0 += nb_max) {
            int nb = KC_MIN(nb_max, d->n - n0);
            im2col(d, x + (size_t)n0 * img_in, nb, col);
            gemm_bias_relu(be, nb * d->oh * d->ow, f, kdim, col, w, b, d->relu, y + (size_t)n0 * img_out * f);
        }
    }
    return KC_STATUS_OK;
}

kc_status kc__cpu_conv2d_backward_data(kc_backend *be, const kc_conv2d_desc *d, const float *dy, const float *w,
                                       float *dx, void *ws, size_t ws_bytes) {
    KC_TRY(conv_check(d, "conv2d_backward_data"));
    if (!dy || !w || !dx)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu conv2d_backward_data: NULL dy, kernel or dx");
    const int wg = kc__cpu_winograd_tile_of(be, d);
    if (d->accumulate && wg)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu conv2d_backward_data: accumulate is not supported on the "
                        "Winograd path; ask conv2d_dx_adds first, or write into a buffer of your own and add");
    if (wg) {
        KC_TRY(check_workspace(be, d, ws, ws_bytes, "conv2d_backward_data"));
        return kc__cpu_winograd_backward_data(d, wg, dy, w, dx, ws, ws_bytes);
    }
    const int f = d->f;
    if (kc__cpu_conv_kernel(be, d) == KC_CPU_CONV_1X1) { /* the direct kernel's backward-data is the im2col one */
        /* dx (N*H*W, C) (+)= dy (N*H*W, F) x W^T, W (C, F) */
        const int64_t rows_all = (int64_t)d->n * d->h * d->w;
        const float beta = d->accumulate ? 1.0f : 0.0f;
        for (int64_t r0 = 0; r0 < rows_all; r0 += KC_CPU_GEMM_MAX_ROWS) {
            int m = (int)KC_MIN(KC_CPU_GEMM_MAX_ROWS, rows_all - r0);
            kc__cpu_sgemm(be, 0, 1, m, d->c, f, 1.0f, dy + (size_t)r0 * f, f, w, f, beta, dx + (size_t)r0 * d->c, d->c);
        }
        return KC_STATUS_OK;
    }
    KC_TRY(check_workspace(be, d, ws, ws_bytes, "conv2d_backward_data"));
    float *dcol = ws; /* (nb*OH*OW, KH*KW*C) */
    const int kdim = d->kh * d->kw * d->c, nb_max = conv_chunk(d);
    const size_t img_in = (size_t)d->h * d->w * d->c, img_out = (size_t)d->oh * d->ow;
    for (int n0 = 0; n0 < d->n; n0 += nb_max) {
        int nb = KC_MIN(nb_max, d->n - n0);
        /* dcol (rows, K) = dy (rows, F) x W^T, W (K, F) */
        kc__cpu_sgemm(be, 0, 1, nb * d->oh * d->ow, kdim, f, 1.0f, dy + (size_t)n0 * img_out * f, f, w, f, 0.0f, dcol,
                      kdim);
        col2im(d, dcol, nb, dx + (size_t)n0 * img_in);
    }
    return KC_STATUS_OK;
}

int kc__cpu_conv2d_dx_adds(kc_backend *be, const kc_conv2d_desc *d) { return !kc__cpu_winograd_applies(be, d); }

kc_status kc__cpu_conv2d_backward_filter(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *dy,
                                         float *dw, float *db, void *ws, size_t ws_bytes) {
    KC_TRY(conv_check(d, "conv2d_backward_filter"));
    if (!x || !dy || !dw)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu conv2d_backward_filter: NULL x, dy or dw");
    const int f = d->f;
    const int64_t rows_all = (int64_t)d->n * d->oh * d->ow;
    const kc_cpu_conv_kernel kernel = kc__cpu_conv_kernel(be, d);
    const int wg = kc__cpu_winograd_tile_of(be, d);
    if (wg) {
        KC_TRY(check_workspace(be, d, ws, ws_bytes, "conv2d_backward_filter"));
        KC_TRY(kc__cpu_winograd_backward_filter(d, wg, x, dy, dw, ws, ws_bytes));
    } else if (kernel == KC_CPU_CONV_DIRECT) {
        KC_TRY(check_workspace(be, d, ws, ws_bytes, "conv2d_backward_filter"));
        conv_direct_backward_filter(d, x, dy, dw, ws, direct_parts(d));
    } else if (kernel == KC_CPU_CONV_BLOCKED) {
        KC_TRY(check_workspace(be, d, ws, ws_bytes, "conv2d_backward_filter"));
        kc__cpu_blocked_backward_filter(d, x, dy, dw, ws);
    } else if (kernel == KC_CPU_CONV_1X1) {
        /* dW (C, F) = x^T (C, N*H*W) x dy (N*H*W, F) */
        for (int64_t r0 = 0; r0 < rows_all; r0 += KC_CPU_GEMM_MAX_ROWS) {
            int k = (int)KC_MIN(KC_CPU_GEMM_MAX_ROWS, rows_all - r0);
            kc__cpu_sgemm(be, 1, 0, d->c, f, k, 1.0f, x + (size_t)r0 * d->c, d->c, dy + (size_t)r0 * f, f,
                          r0 ? 1.0f : 0.0f, dw, f);
        }
    } else {
        KC_TRY(check_workspace(be, d, ws, ws_bytes, "conv2d_backward_filter"));
        float *col = ws; /* (nb*OH*OW, KH*KW*C) */
        const int kdim = d->kh * d->kw * d->c, nb_max = conv_chunk(d);
        const size_t img_in = (size_t)d->h * d->w * d->c, img_out = (size_t)d->oh * d->ow;
        for (int n0 = 0; n0 < d->n; n0 += nb_max) {
            int nb = KC_MIN(nb_max, d->n - n0);
            im2col(d, x + (size_t)n0 * img_in, nb, col);
            /* dW (K, F) (+)= col^T (K, rows) x dy (rows, F) */
            kc__cpu_sgemm(be, 1, 0, kdim, f, nb * d->oh * d->ow, 1.0f, col, kdim, dy + (size_t)n0 * img_out * f, f,
                          n0 ? 1.0f : 0.0f, dw, f);
        }
    }
    if (db) return kc__cpu_bias_grad(be, dy, db, rows_all, f);
    return KC_STATUS_OK;
}

kc_status kc__cpu_conv2d_describe(kc_backend *be, const kc_conv2d_desc *d, size_t ws_bytes, char *buf, size_t n) {
    KC_TRY(conv_check(d, "conv2d describe"));
    const size_t need = kc__cpu_conv2d_workspace(be, d);
    if (ws_bytes < need)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu conv2d: a workspace of %zu bytes is too small (conv2d_workspace asks %zu for this "
                        "convolution)", ws_bytes, need);
    const int wg = kc__cpu_winograd_tile_of(be, d);
    if (wg) {
        snprintf(buf, n, "cpu winograd F(%dx%d,3x3) (%d to %d channels, %s transforms, OpenBLAS)", wg, wg, d->c, d->f,
                 KC_CPU_ISA_NAME);
        return KC_STATUS_OK;
    }
    switch (kc__cpu_conv_kernel(be, d)) {
    case KC_CPU_CONV_1X1: snprintf(buf, n, "cpu 1x1 conv as one gemm (OpenBLAS)"); break;
    case KC_CPU_CONV_DIRECT:
        snprintf(buf, n, "cpu direct conv (patch %dx%dx%d, %d filters), backward-data im2col+gemm (OpenBLAS); %s",
                 d->kh, d->kw, d->c, d->f, KC_CPU_ISA_NAME);
        break;
    case KC_CPU_CONV_BLOCKED:
        snprintf(buf, n, "cpu register-blocked direct conv (patch %dx%dx%d, %d filters), backward-data "
                 "im2col+gemm (OpenBLAS); %s", d->kh, d->kw, d->c, d->f, KC_CPU_ISA_NAME);
        break;
    default:
        snprintf(buf, n, "cpu im2col+gemm (OpenBLAS, patch %dx%dx%d, %d image%s per chunk, %s)", d->kh, d->kw, d->c,
                 conv_chunk(d), conv_chunk(d) == 1 ? "" : "s", KC_CPU_ISA_NAME);
        break;
    }
    return KC_STATUS_OK;
}
