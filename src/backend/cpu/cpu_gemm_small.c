/* cpu_gemm_small.c — SGEMM for a small dimension: register tiles straight from the operands.
 *
 * The 1x1 convolutions of MobileNetV2 and of ResNet50's first stages are GEMMs with
 * thousands of pixel rows against 16-256 channels. OpenBLAS's blocking is made for large
 * inner dimensions: on these shapes it packs both operands, scales C in a separate pass
 * when beta = 0, and runs its microkernel over a K of 16-64; its backward-filter form
 * (A^T B, reducing over the pixel rows) reached 41-100 GFLOP/s of the two cores' ~230
 * (bench/RESULTS.md, "Small GEMMs"). Here each tile of C, MR rows x NV vectors of columns,
 * accumulates in registers (MR x NV <= 24 vectors with AVX-512's 32 registers, 12 with 16),
 * one element of op(A) broadcast against NV vectors of a row of op(B) per step, and is
 * written once, adding C when beta = 1. No packing, except op(B) = B^T, which is transposed
 * once into a stack buffer of at most KC_CPU_GEMM_SMALL_PACK floats.
 *
 *   C = A B      (trans_a 0): rows of C split across the threads in slices; every tile
 *                             runs the whole K (small here; A's MR rows stay in L1).
 *   C = A^T B    (trans_a 1): K is the long dimension (the pixel rows of a backward-filter).
 *                             K runs in chunks that fit L2 together, each chunk read through
 *                             once in address order (so it arrives at the memory's streaming
 *                             rate, not line by line down the tiles' columns), then through
 *                             every tile the thread owns; a tile's sums go to C between chunks
 *                             and back. A long K (KC_CPU_GEMM_SMALL_HALVES rows on) is reduced
 *                             in two halves, each by its own half of the threads (its tiles
 *                             dealt among them), the second into a stack copy of C added at
 *                             the end: each thread then streams only its half of A and B.
 *
 * Each element of C is one chain of fused multiply-adds over k in order (over each half in
 * order, the halves then added), whatever the tiles, the chunks or the thread count: the
 * result does not depend on the thread count.
 * kc__cpu_sgemm (cpu_gemm_conv.c) asks kc__cpu_gemm_small_applies first; the rule's bounds
 * come from bench/RESULTS.md's measurements against OpenBLAS. */
#include <stdint.h>
#include <string.h>
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu.h"

/* SACC accumulators + SNV vectors of a row of op(B) + one broadcast fit the registers */
#if defined(__AVX512F__)
#define SV 16   /* floats per vector */
#define SACC 24 /* accumulator vectors per tile (32 registers) */
#define SNV 4   /* vectors per tile row at most */
#elif defined(__AVX2__)
#define SV 8
#define SACC 12 /* 16 registers */
#define SNV 3
#else
#define SV 4
#define SACC 12
#define SNV 3
#endif
typedef float sv_t __attribute__((vector_size(SV * sizeof(float))));
typedef int32_t sv_vi __attribute__((vector_size(SV * sizeof(float))));

static inline sv_t sv_load(const float *p) {
    sv_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void sv_store(float *p, sv_t v) { memcpy(p, &v, sizeof v); }
/* the first n (0 < n < SV) floats at p, zeros after; reads nothing past p + n */
static inline sv_t sv_load_n(const float *p, int n) {
#if defined(__AVX512F__)
    return (sv_t)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1u), p);
#elif defined(__AVX2__)
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return (sv_t)_mm256_maskload_ps(p, m);
#else
    sv_t v = {0};
    for (int i = 0; i < n; i++) v[i] = p[i];
    return v;
#endif
}
static inline void sv_store_n(float *p, sv_t v, int n) {
#if defined(__AVX512F__)
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1u), (__m512)v);
#elif defined(__AVX2__)
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(p, m, (__m256)v);
#else
    for (int i = 0; i < n; i++) p[i] = v[i];
#endif
}

/* What a tile does to its sums before it stores them (C = A B only; add_c 0): adds the bias
 * (the tile's columns of it; NULL: none), then max(0, .) when relu, as the separate pass
 * over C did (the same float additions, and v > 0 ? v : 0 as act_forward's ReLU). */
typedef struct small_epi {
    const float *bias;
    int relu;
} small_epi;
static const small_epi SMALL_NO_EPI = {NULL, 0};

static inline sv_t sv_epilogue(small_epi ep, sv_t v, sv_t bias) {
    if (ep.bias) v += bias;
    if (ep.relu) v = (sv_t)((sv_vi)v & (sv_vi)(v > (sv_t){0}));
    return v;
}

/* One tile: C rows r < MR, vectors v < NV (ldc apart) (+)= sum over kk < k of
 * a[r * ar + kk * ak] * (row kk of op(B), at b + kk * ldb). With TAIL the last vector holds
 * only n_last floats: loaded and stored masked, so nothing past a row's end is touched.
 * MR, NV and TAIL are literals (each instantiation below): the accumulators are then plain
 * registers (a parameter would make the array a VLA, kept in memory). */
#define SMALL_TILE_BODY(MR, NV, TAIL)                                                                               \
    {                                                                                                               \
        sv_t acc[MR][NV];                                                                                           \
        _Pragma("GCC unroll 24") for (int r = 0; r < MR; r++) _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) \
            acc[r][v] = (sv_t){0};                                                                                  \
        for (int64_t kk = 0; kk < k; kk++) {                                                                        \
            const float *brow = b + kk * ldb;                                                                       \
            sv_t bv[NV];                                                                                            \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] =                                            \
                (TAIL && v == NV - 1) ? sv_load_n(brow + v * SV, n_last) : sv_load(brow + v * SV);                  \
            _Pragma("GCC unroll 24") for (int r = 0; r < MR; r++) {                                                 \
                const float x = a[r * ar + kk * ak];                                                                \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[r][v] += x * bv[v];                        \
            }                                                                                                       \
        }                                                                                                           \
        if (ep.bias || ep.relu) {                                                                                   \
            sv_t bv[NV];                                                                                            \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] =                                            \
                !ep.bias ? (sv_t){0} : (TAIL && v == NV - 1) ? sv_load_n(ep.bias + v * SV, n_last)                   \
                                                             : sv_load(ep.bias + v * SV);                            \
            _Pragma("GCC unroll 24") for (int r = 0; r < MR; r++) _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) \
                acc[r][v] = sv_epilogue(ep, acc[r][v], bv[v]);                                                      \
        }                                                                                                           \
        _Pragma("GCC unroll 24") for (int r = 0; r < MR; r++) _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) { \
            float *p = c + r * ldc + v * SV;                                                                        \
            if (TAIL && v == NV - 1)                                                                                \
                sv_store_n(p, add_c ? acc[r][v] + sv_load_n(p, n_last) : acc[r][v], n_last);                        \
            else                                                                                                    \
                sv_store(p, add_c ? acc[r][v] + sv_load(p) : acc[r][v]);                                            \
        }                                                                                                           \
    }

typedef void (*small_tile_fn)(int64_t k, const float *a, int64_t ar, int64_t ak, const float *b, int64_t ldb,
                              float *c, int64_t ldc, int n_last, int add_c, small_epi ep);
#define SMALL_TILE(MR, NV, T)                                                                                       \
    static void small_tile_##MR##_##NV##_##T(int64_t k, const float *a, int64_t ar, int64_t ak, const float *b,    \
                                             int64_t ldb, float *c, int64_t ldc, int n_last, int add_c,            \
                                             small_epi ep) SMALL_TILE_BODY(MR, NV, T)
#define SMALL_TILE2(MR, NV) SMALL_TILE(MR, NV, 0) SMALL_TILE(MR, NV, 1)
#define SMALL_ROWS4(NV) SMALL_TILE2(1, NV) SMALL_TILE2(2, NV) SMALL_TILE2(3, NV) SMALL_TILE2(4, NV)
#define SMALL_ROWS6(NV) SMALL_ROWS4(NV) SMALL_TILE2(5, NV) SMALL_TILE2(6, NV)
#define SMALL_ROWS8(NV) SMALL_ROWS6(NV) SMALL_TILE2(7, NV) SMALL_TILE2(8, NV)
#define SMALL_ROWS12(NV) SMALL_ROWS8(NV) SMALL_TILE2(9, NV) SMALL_TILE2(10, NV) SMALL_TILE2(11, NV) SMALL_TILE2(12, NV)
#define SMALL_ROWS24(NV)                                                                                            \
    SMALL_ROWS12(NV) SMALL_TILE2(13, NV) SMALL_TILE2(14, NV) SMALL_TILE2(15, NV) SMALL_TILE2(16, NV)               \
    SMALL_TILE2(17, NV) SMALL_TILE2(18, NV) SMALL_TILE2(19, NV) SMALL_TILE2(20, NV) SMALL_TILE2(21, NV)            \
    SMALL_TILE2(22, NV) SMALL_TILE2(23, NV) SMALL_TILE2(24, NV)
#define E(MR, NV) {small_tile_##MR##_##NV##_0, small_tile_##MR##_##NV##_1}
#define Z {0, 0}
/* k_tiles[NV - 1][MR][TAIL], MR up to SACC / NV (4 vectors and 3 rows on 16 registers
 * spilled: 12 + 4 + 1 > 16) */
#if SACC == 24
SMALL_ROWS24(1)
SMALL_ROWS12(2)
SMALL_ROWS8(3)
SMALL_ROWS6(4)
static const small_tile_fn k_tiles[SNV][SACC + 1][2] = {
    {Z, E(1, 1), E(2, 1), E(3, 1), E(4, 1), E(5, 1), E(6, 1), E(7, 1), E(8, 1), E(9, 1), E(10, 1), E(11, 1),
     E(12, 1), E(13, 1), E(14, 1), E(15, 1), E(16, 1), E(17, 1), E(18, 1), E(19, 1), E(20, 1), E(21, 1), E(22, 1),
     E(23, 1), E(24, 1)},
    {Z, E(1, 2), E(2, 2), E(3, 2), E(4, 2), E(5, 2), E(6, 2), E(7, 2), E(8, 2), E(9, 2), E(10, 2), E(11, 2),
     E(12, 2)},
    {Z, E(1, 3), E(2, 3), E(3, 3), E(4, 3), E(5, 3), E(6, 3), E(7, 3), E(8, 3)},
    {Z, E(1, 4), E(2, 4), E(3, 4), E(4, 4), E(5, 4), E(6, 4)},
};
#else
SMALL_ROWS12(1)
SMALL_ROWS6(2)
SMALL_ROWS4(3)
static const small_tile_fn k_tiles[SNV][SACC + 1][2] = {
    {Z, E(1, 1), E(2, 1), E(3, 1), E(4, 1), E(5, 1), E(6, 1), E(7, 1), E(8, 1), E(9, 1), E(10, 1), E(11, 1),
     E(12, 1)},
    {Z, E(1, 2), E(2, 2), E(3, 2), E(4, 2), E(5, 2), E(6, 2)},
    {Z, E(1, 3), E(2, 3), E(3, 3), E(4, 3)},
};
#endif
#undef E
#undef Z

/* C's columns in nblk blocks of whole vectors, as even as they go (at most SNV vectors each);
 * C's rows in blocks of at most mr (SACC / the widest block's vectors). */
typedef struct small_plan {
    int n, nvec, nblk, mr;
} small_plan;

static small_plan small_plan_of(int n) {
    small_plan p;
    p.n = n;
    p.nvec = (n + SV - 1) / SV;
    p.nblk = (p.nvec + SNV - 1) / SNV;
    p.mr = SACC / ((p.nvec + p.nblk - 1) / p.nblk);
    return p;
}

/* rows [r, r + rows) (rows <= p->mr) by column block cb, over k steps of the reduction */
static inline void small_tile(const small_plan *p, int64_t r, int rows, int cb, int64_t k, const float *a,
                              int64_t ar, int64_t ak, const float *b, int64_t ldb, float *c, int64_t ldc, int add_c,
                              small_epi ep) {
    const int base = p->nvec / p->nblk, extra = p->nvec % p->nblk;
    const int nv = base + (cb < extra), j0 = SV * (cb * base + KC_MIN(cb, extra));
    const int n_last = KC_MIN(p->n - j0, nv * SV) - (nv - 1) * SV;
    if (ep.bias) ep.bias += j0;
    k_tiles[nv - 1][rows][n_last < SV](k, a + r * ar, ar, ak, b + j0, ldb, c + r * ldc + j0, ldc, n_last, add_c, ep);
}

/* The rule's bounds: where these tiles beat OpenBLAS (bench/RESULTS.md, "Small GEMMs", and
 * "The backward-filter GEMM read in address order" for A^T B's C up to 32,768 floats). With
 * 16 registers (AVX2, the baseline) the tiles are half as tall, and OpenBLAS's own AVX2
 * kernels were as fast from a K of 256 or a C of 16,384 floats on. */
#define KC_CPU_GEMM_SMALL_N 256 /* columns of C at most (A B^T, A^T B) */
#if SV == 16
#define KC_CPU_GEMM_SMALL_NN_N 512   /* A B: columns of C at most */
#define KC_CPU_GEMM_SMALL_K 512      /* A B and A B^T: inner dimension at most */
#define KC_CPU_GEMM_SMALL_TN_C 32768 /* A^T B: floats of C at most */
#define KC_CPU_GEMM_SMALL_HALF_C 16384 /* A^T B in halves: floats of C at most (the second half's on the stack) */
#else
#define KC_CPU_GEMM_SMALL_NN_N 256
#define KC_CPU_GEMM_SMALL_K 192
#define KC_CPU_GEMM_SMALL_TN_C 8192
#define KC_CPU_GEMM_SMALL_HALF_C 8192
#endif
#define KC_CPU_GEMM_SMALL_PACK 16384             /* A B^T: floats of B at most (64 KiB on the stack) */
#define KC_CPU_GEMM_SMALL_CHUNK 65536            /* A^T B: floats of A and B per chunk of K (256 KiB) */
#define KC_CPU_GEMM_SMALL_HALVES 4096            /* A^T B: K from which it is reduced in two halves */
#define KC_CPU_GEMM_SMALL_PAR ((int64_t)1 << 21) /* multiply-adds below which the call runs on one thread */
#define KC_CPU_GEMM_SMALL_SLICE 16               /* A B: row blocks per slice handed to a thread, at most */

int kc__cpu_gemm_small_applies(int trans_a, int trans_b, int m, int n, int k, float alpha, float beta) {
    if (alpha != 1.0f || (beta != 0.0f && beta != 1.0f) || m <= 0 || n <= 0 || k <= 0) return 0;
    if (n > (trans_a || trans_b ? KC_CPU_GEMM_SMALL_N : KC_CPU_GEMM_SMALL_NN_N)) return 0;
    if (trans_a) /* A^T B: C (m x n) held tile by tile, K streamed */
        return !trans_b && (int64_t)m * n <= KC_CPU_GEMM_SMALL_TN_C;
    if (trans_b && (int64_t)k * n > KC_CPU_GEMM_SMALL_PACK) return 0; /* B^T transposed on the stack */
    return k <= KC_CPU_GEMM_SMALL_K;
}

static int small_threads(int64_t work) {
#ifdef _OPENMP
    return work >= KC_CPU_GEMM_SMALL_PAR && kc__cpu_team() && !omp_in_parallel() ? kc__num_threads() : 1;
#else
    (void)work;
    return 1;
#endif
}

/* C = A B: slices of row blocks (KC_CPU_GEMM_SMALL_SLICE at most, and 4 slices per thread
 * at least), taken as the threads come free */
static void small_nn(const small_plan *p, int m, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                     float *c, int64_t ldc, int add_c, small_epi ep, int nt) {
    const int64_t rblocks = (m + p->mr - 1) / p->mr;
    const int64_t per = KC_MAX((int64_t)1, KC_MIN((int64_t)KC_CPU_GEMM_SMALL_SLICE, rblocks / (4 * nt)));
    const int64_t slices = (rblocks + per - 1) / per;
    KC_CPU_PAR_FOR_TEAM(nt > 1, nt, schedule(dynamic, 1), for (int64_t s = 0; s < slices; s++) {
        const int64_t rb1 = KC_MIN(rblocks, (s + 1) * per);
        for (int64_t rb = s * per; rb < rb1; rb++) {
            const int64_t r = rb * p->mr;
            const int rows = (int)KC_MIN((int64_t)p->mr, m - r);
            for (int cb = 0; cb < p->nblk; cb++) small_tile(p, r, rows, cb, k, a, lda, 1, b, ldb, c, ldc, add_c, ep);
        }
    });
}

/* one load from each 64-byte line of rows x width floats (row r at p + r * ld), in address
 * order: the hardware streams them in ahead of the loads, which a tile's walk down a column
 * of lines 1 KiB apart defeats. The sum only keeps the loads. */
static float touch_rows(const float *p, int64_t rows, int64_t ld, int64_t width) {
    float s = 0.0f;
    if (rows <= 0) return s;
    if (ld == width) {
        width *= rows;
        rows = 1;
    }
    for (int64_t r = 0; r < rows; r++) {
        const float *row = p + r * ld;
        for (int64_t j = 0; j < width; j += 64 / sizeof(float)) s += row[j];
        s += row[width - 1];
    }
    return s;
}

/* C = A^T B (A stored k x m), the tiles t0, t0 + step, ...: K in chunks that fit L2, each
 * chunk read through in address order, then through every tile */
static void small_tn_tiles(const small_plan *p, int m, int rblocks, int64_t k, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float *c, int64_t ldc, int add_c, int t0, int step) {
    const int tiles = rblocks * p->nblk;
    const int64_t kc = KC_MAX((int64_t)64, KC_CPU_GEMM_SMALL_CHUNK / ((int64_t)m + p->n)); /* rows of A and B */
    for (int64_t k0 = 0; k0 < k; k0 += kc) {
        const int64_t kl = KC_MIN(kc, k - k0);
        if (tiles > 2) { /* with 2 tiles or fewer, each tile's walk is close to address order already */
            const int64_t s0 = k0 + kl * t0 / step, s1 = k0 + kl * (t0 + 1) / step; /* this thread's slice */
            volatile float keep =
                touch_rows(a + s0 * lda, s1 - s0, lda, m) + touch_rows(b + s0 * ldb, s1 - s0, ldb, p->n);
            (void)keep;
        }
        for (int t = t0; t < tiles; t += step) {
            const int rb = t / p->nblk, cb = t % p->nblk;
            const int r0 = (int)((int64_t)m * rb / rblocks), r1 = (int)((int64_t)m * (rb + 1) / rblocks);
            small_tile(p, r0, r1 - r0, cb, kl, a + k0 * lda, 1, lda, b + k0 * ldb, ldb, c, ldc, add_c || k0 > 0,
                       SMALL_NO_EPI);
        }
    }
}

/* C's row blocks for a group of nt threads: as even as they go; on a team, more of them
 * (down to 4 rows) until the tiles deal evenly to the threads, at least 2 each */
static int small_tn_rblocks(const small_plan *p, int m, int nt) {
    int rblocks = (m + p->mr - 1) / p->mr;
    while (nt > 1 && rblocks < m && ((rblocks * p->nblk) % nt || rblocks * p->nblk < 2 * nt) &&
           (m + rblocks) / (rblocks + 1) >= 4)
        rblocks++;
    return rblocks;
}

/* C = A^T B on one thread: the halves (if two) one after the other */
static void small_tn_alone(const small_plan *p, int m, int64_t k, int64_t k1, int halves, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float *c, int64_t ldc, int add_c, float *half2) {
    const int rblocks = small_tn_rblocks(p, m, 1), n = p->n;
    small_tn_tiles(p, m, rblocks, k1, a, lda, b, ldb, c, ldc, add_c, 0, 1);
    if (halves == 2) {
        small_tn_tiles(p, m, rblocks, k - k1, a + k1 * lda, lda, b + k1 * ldb, ldb, half2, n, 0, 0, 1);
        for (int r = 0; r < m; r++)
            for (int j = 0; j < n; j++) c[(int64_t)r * ldc + j] += half2[(size_t)r * n + j];
    }
}

/* C = A^T B: K in one piece or two halves (KC_CPU_GEMM_SMALL_HALVES), each half's tiles dealt
 * to its own group of threads (each tile to one thread, so no partial sums within a half);
 * the second half's sums go to half2 (m x n, on the caller's stack) and then onto C */
static void small_tn(const small_plan *p, int m, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                     float *c, int64_t ldc, int add_c, int nt) {
    const int halves = k >= KC_CPU_GEMM_SMALL_HALVES && (int64_t)m * p->n <= KC_CPU_GEMM_SMALL_HALF_C ? 2 : 1;
    const int64_t k1 = halves == 2 ? k / 2 : k; /* rows of the first half */
    const int n = p->n;
    float half2[halves == 2 ? (size_t)m * (size_t)n : 1]; /* <= KC_CPU_GEMM_SMALL_HALF_C floats */
    if (nt <= 1) { /* no region: libgomp would allocate a team for a one-thread one */
        small_tn_alone(p, m, k, k1, halves, a, lda, b, ldb, c, ldc, add_c, half2);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num(), team = omp_get_num_threads();
        if (team == 1) {
            small_tn_alone(p, m, k, k1, halves, a, lda, b, ldb, c, ldc, add_c, half2);
        } else if (halves == 1) {
            small_tn_tiles(p, m, small_tn_rblocks(p, m, team), k, a, lda, b, ldb, c, ldc, add_c, t, team);
        } else {
            /* threads [0, g1) take the first half, [g1, team) the second */
            const int g1 = team / 2, second = t >= g1, size = second ? team - g1 : g1, id = second ? t - g1 : t;
            const int rblocks = small_tn_rblocks(p, m, size);
            if (!second)
                small_tn_tiles(p, m, rblocks, k1, a, lda, b, ldb, c, ldc, add_c, id, size);
            else
                small_tn_tiles(p, m, rblocks, k - k1, a + k1 * lda, lda, b + k1 * ldb, ldb, half2, n, 0, id, size);
#pragma omp barrier
            const int r0 = (int)((int64_t)m * t / team), r1 = (int)((int64_t)m * (t + 1) / team);
            for (int r = r0; r < r1; r++)
                for (int j = 0; j < n; j++) c[(int64_t)r * ldc + j] += half2[(size_t)r * n + j];
        }
    }
#endif
}

void kc__cpu_gemm_small(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda, const float *b,
                        int ldb, float beta, float *c, int ldc) {
    float bt[trans_b ? (size_t)k * (size_t)n : 1]; /* op(B) = B^T (k x n), <= KC_CPU_GEMM_SMALL_PACK floats */
    if (trans_b) {
        for (int j = 0; j < n; j++)
            for (int kk = 0; kk < k; kk++) bt[(size_t)kk * n + j] = b[(size_t)j * ldb + kk];
        b = bt;
        ldb = n;
    }
    const small_plan p = small_plan_of(n);
    const int nt = small_threads((int64_t)m * n * k);
    if (trans_a)
        small_tn(&p, m, k, a, lda, b, ldb, c, ldc, beta != 0.0f, nt);
    else
        small_nn(&p, m, k, a, lda, b, ldb, c, ldc, beta != 0.0f, SMALL_NO_EPI, nt);
}

void kc__cpu_gemm_small_bias_relu(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                                  const float *bias, int relu, float *c, int ldc) {
    const small_plan p = small_plan_of(n);
    small_nn(&p, m, k, a, lda, b, ldb, c, ldc, 0, (small_epi){bias, relu}, small_threads((int64_t)m * n * k));
}
