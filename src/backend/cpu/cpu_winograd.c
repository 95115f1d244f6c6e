/* cpu_winograd.c — 3x3 stride-1 convolutions by Winograd F(2x2,3x3), F(3x3,3x3) and F(4x4,3x3),
 * NHWC / HWIO.
 *
 * Each m x m block of outputs (a tile; m = 2, 3 or 4) comes from an a x a block of inputs,
 * a = m + 2. With the transforms of F(m x m, 3x3),
 *     F(2x2): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *             G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
 *             A^T = [1 1 1 0; 0 1 -1 -1]
 *     F(3x3): B^T = [2 -1 -2 1 0; 0 -2 -1 1 0; 0 2 -3 1 0; 0 -1 0 1 0; 0 2 -1 -2 1]
 *             G   = [1/2 0 0; -1/2 -1/2 -1/2; -1/6 1/6 -1/6; 1/6 1/3 2/3; 0 0 1]
 *             A^T = [1 1 1 1 0; 0 1 -1 2 0; 0 1 1 4 1]
 *             (the points 0, 1, -1, 2 and infinity; with -2 or 1/2 for 2 the error in float
 *             came out the same or larger)
 *     F(4x4): B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
 *                    0 4 0 -5 0 1]
 *             G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
 *             A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
 * a tile's output is Y = A^T [(G w G^T) . (B^T d B)] A, where "." multiplies the E = a^2
 * entries one by one. Across channels the E entries become E independent GEMMs:
 *     forward:          V[e] (T, C) = B^T d B;  U[e] (C, F) = G w G^T;  M[e] = V[e] U[e]  (T, F);
 *                       y = A^T M A (+ b, ReLU)
 *     backward_data:    the forward of dy with the kernel turned by 180 degrees and C, F swapped,
 *                       padding 2 - pad (a stride-1 3x3 convolution's transpose is one)
 *     backward_filter:  S[e] (C, F) = sum over tiles V[e]^T (A g A^T)[e];  dW = G^T S G
 * E products of C x F per m^2 outputs instead of 9 m^2: 2.25 (F(2x2)), 3.24 (F(3x3)) or 4
 * (F(4x4)) times fewer multiply-adds than im2col + GEMM, for the price of the transforms
 * (linear in C + F per tile, about 3x more per tile for F(4x4) than F(2x2)) and a larger
 * rounding error (coefficients up to 3 / 4 / 8; test_winograd measures each).
 *
 * Workspace: the E transformed kernels (E C F floats; backward_filter's sums S), then one
 * slot per thread (kc__num_threads when planned): V and M for a chunk of tiles
 * (E Tc (C + F) floats, Tc fixed by C + F: winograd_chunk) and a thread's partial S (E C F),
 * the same for all three passes so one workspace fits them.
 * One OpenMP parallel region per pass and no barrier inside it: each thread runs whole units
 * (a chunk of tiles, times a block of output channels: split) in its own slot, the input
 * transform, its columns of the E GEMMs (each an OpenBLAS call on one thread: OpenBLAS runs
 * single-threaded inside a parallel region) and of the output transform
 * (backward_filter: a group of chunks' partial S, added in group order at the end, or its own
 * columns of S). A barrier or fork/join per unit costs a time slice whenever the machine is
 * busier than its cores.
 * The transforms are vectorised over channels (ivdep: the blocks they read and write never
 * overlap). */
#include <string.h>

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu.h"

#define WG_EMAX 36 /* entries of a transformed 6x6 tile (F(4x4)) */
/* bytes of V and M per chunk of tiles: small enough to stay in a core's L2 between the
 * transforms and the GEMMs (1 MiB: 10-35 % faster than 6 MiB per pass on workload B's
 * layers, bench_conv, one thread, CPU time; bench/RESULTS.md), large enough for GEMMs of
 * tens to hundreds of rows (and at least 32 tiles, winograd_chunk) */
#define WG_CHUNK_BYTES ((size_t)1 << 20)
/* channels transformed at a time: the inner loops run over a block with no bounds test
 * (pixels outside the image read a block of zeros, outputs outside it go to a sink), so
 * that they vectorise */
#define WG_CB 64
static const float wg_zeros[WG_CB];

static int64_t tiles_of(int oh, int ow, int n, int m) { return (int64_t)n * ((oh + m - 1) / m) * ((ow + m - 1) / m); }

/* Floats from one of the E planes of U, V, M or S to the next, for planes of n floats: n
 * rounded up to a cache line, plus one. The transforms write (or read) all E planes of a
 * tile or channel pair together, E streams at once; planes a multiple of 4 KiB apart (the
 * usual case: 32 or more tiles times 64 or more channels, or C F) put every stream in the
 * same set of the L1 cache, 16-36 streams against its 8-12 ways, and each access missed.
 * One more cache line a plane spreads them over E sets: ResNet50's stages 4 and 5 at 96x96
 * (F(3x3)) ran 1.1-1.4x faster, alternately with the old layout (bench/RESULTS.md,
 * "Winograd's planes"). */
#define WG_LINE 16 /* floats per 64-byte cache line */
static size_t wg_plane(size_t n) { return (n + WG_LINE - 1) / WG_LINE * WG_LINE + WG_LINE; }

/* The cost of output tile m in rows of GEMM per (input, output) channel pair (cpu.h,
 * KC_CPU_WINOGRAD_U_TILES): E (tiles + KC_CPU_WINOGRAD_U_TILES); im2col's is 9 n oh ow. */
static double wg_cost(const kc_conv2d_desc *d, int m) {
    return (double)(m + 2) * (m + 2) * ((double)tiles_of(d->oh, d->ow, d->n, m) + KC_CPU_WINOGRAD_U_TILES);
}

static int wg_min_c(int m) { return m == 2 ? KC_CPU_WINOGRAD_MIN_C : KC_CPU_WINOGRAD4_MIN_C; }

/* The output tile m (2, 3 or 4) for this convolution: the backend's setting
 * (kc_device_opts.cpu_winograd_tile), else the cheapest by wg_cost among the tiles its
 * channel counts allow (any, with cpu_winograd = KC_TRUE); 0 when none. Ties go to the
 * smaller tile (cheaper transforms, smaller error). */
static int wg_tile(kc_backend *be, const kc_conv2d_desc *d) {
    const int forced = kc__cpu_winograd_tile(be);
    if (forced >= 2 && forced <= 4) return forced;
    const int any = kc__cpu_winograd_enabled(be) > 1;
    int best = 0;
    double best_cost = 0.0;
    for (int m = 2; m <= 4; m++) {
        if (!any && (d->c < wg_min_c(m) || d->f < wg_min_c(m))) continue;
        const double cost = wg_cost(d, m);
        if (!best || cost < best_cost) best = m, best_cost = cost;
    }
    return best;
}

/* Whether Winograd can run d at all: 3x3, stride 1, no dilation, the padding after equal to
 * the padding before ("valid", "same"). */
static int wg_shape_ok(const kc_conv2d_desc *d) {
    if (d->kh != 3 || d->kw != 3 || d->sh != 1 || d->sw != 1 || d->dh != 1 || d->dw != 1) return 0;
    return d->pad_top <= 2 && d->pad_left <= 2 && d->oh == d->h + 2 * d->pad_top - 2 &&
           d->ow == d->w + 2 * d->pad_left - 2;
}

int kc__cpu_winograd_applies(kc_backend *be, const kc_conv2d_desc *d) {
    if (!d || !kc__cpu_winograd_enabled(be) || !wg_shape_ok(d)) return 0;
    /* cpu_winograd = KC_TRUE runs it at any width and cost (to measure where it wins) */
    if (kc__cpu_winograd_enabled(be) > 1) return 1;
    /* the transforms cost O(C + F) per tile against the multiply-adds they save: a win once
     * both are wide enough (cpu.h, measured with bench/bench_conv), and where the tile's cost,
     * partial tiles and U's transform counted, beats im2col's by KC_CPU_WINOGRAD_MIN_SAVING */
    const int m = wg_tile(be, d);
    return m && d->c >= wg_min_c(m) && d->f >= wg_min_c(m) &&
           9.0 * d->n * d->oh * d->ow >= KC_CPU_WINOGRAD_MIN_SAVING * wg_cost(d, m);
}

int kc__cpu_winograd_tile_of(kc_backend *be, const kc_conv2d_desc *d) {
    return kc__cpu_winograd_applies(be, d) ? wg_tile(be, d) : 0;
}

int kc__cpu_winograd_may_apply(kc_backend *be, const kc_conv2d_desc *d) {
    return d && kc__cpu_winograd_enabled(be) && wg_shape_ok(d);
}

/* tiles per chunk for channel counts c, f (symmetric, so backward-data's swap fits too):
 * WG_CHUNK_BYTES of V and M, and at least 32 tiles and c f / WG_U_TILE_DIV (at most
 * WG_MAX_MIN_TILES). Each chunk's GEMMs read all of U again (E c f floats, packed anew by
 * OpenBLAS per call): with wide layers the 1 MiB bound alone gives 32-tile chunks whose
 * GEMMs mostly pack U. Measured (bench_conv, one thread, CPU time, 32 tiles against
 * c f / (c + f); bench/RESULTS.md, "ResNet50 convolutions"): 512 -> 512 on 3x3 to 7x7 outputs
 * 1.3-1.6x faster with 128+ tiles (3x3 F(2x2) forward 25 -> 18 ms, 5x5 53 -> 34 ms), 256 ->
 * 256 on 6x6 the same at 32 or 128, 128 -> 128 on 12x12 (F(4x4)) 20 % slower at 64: U[e] of
 * 64 KiB stays in cache. Hence c f / 512: 32 tiles at 128 channels, 128 at 256, 512 at 512
 * (U[e] of 1 MiB, a core's L2), capped so that a slot stays in the tens of MiB. */
#define WG_U_TILE_DIV 512
#define WG_MAX_MIN_TILES 256
static int64_t winograd_chunk(const kc_conv2d_desc *d, int m) {
    const int e = (m + 2) * (m + 2);
    int64_t per = (int64_t)e * (d->c + d->f) * (int64_t)sizeof(float);
    int64_t tc = (int64_t)WG_CHUNK_BYTES / per;
    int64_t most = KC_MAX(tiles_of(d->oh, d->ow, d->n, m), tiles_of(d->h, d->w, d->n, m));
    const int64_t wide = KC_MIN((int64_t)WG_MAX_MIN_TILES, (int64_t)d->c * d->f / WG_U_TILE_DIV);
    tc = KC_MAX(tc, KC_MAX(32, wide));
    return KC_MIN(tc, most);
}

/* floats of the E transformed kernels U (or backward_filter's sums S), planes wg_plane apart */
static size_t u_floats(const kc_conv2d_desc *d, int m) {
    return (size_t)(m + 2) * (m + 2) * wg_plane((size_t)d->c * d->f);
}

/* floats of one thread's slot: V and M of a chunk, and backward_filter's partial sums S */
static size_t slot_floats(const kc_conv2d_desc *d, int m) {
    const size_t e = (size_t)(m + 2) * (m + 2), tc = (size_t)winograd_chunk(d, m);
    return e * (wg_plane(tc * d->c) + wg_plane(tc * d->f)) + u_floats(d, m);
}

/* backward_filter's partial sums per thread: WG_FILTER_GROUPS groups of chunks each with a
 * partial S of its own (E c f floats), taken as the threads come free and added in group
 * order, while S is at most WG_FILTER_GROUP_BYTES; else one per thread (and one with
 * KERAC_CPU_BALANCE=0). The groups beyond the slots' own S follow the slots. */
#define WG_FILTER_GROUPS 4
#define WG_FILTER_GROUP_BYTES ((size_t)1 << 20)
static int filter_groups(size_t cf) {
    return kc__cpu_balance() && cf * sizeof(float) <= WG_FILTER_GROUP_BYTES ? WG_FILTER_GROUPS : 1;
}

size_t kc__cpu_winograd_workspace(const kc_conv2d_desc *d, int m) {
    const size_t u = u_floats(d, m), slots = (size_t)KC_MAX(1, KC_MIN(kc__num_threads(), 64));
    const size_t extra = slots > 1 ? slots * (size_t)(filter_groups(u) - 1) * u : 0;
    return (u + slots * slot_floats(d, m) + extra) * sizeof(float);
}

/* The threads a pass runs on: the team, at most one per slot the workspace holds (a workspace
 * planned for fewer threads caps the team instead of overflowing); split() caps it by the
 * pass's units. */
static int pass_threads(const kc_conv2d_desc *d, int m, size_t ws_bytes) {
    const size_t u = u_floats(d, m), slot = slot_floats(d, m);
    const int64_t slots = (int64_t)((ws_bytes / sizeof(float) - u) / slot);
#ifdef _OPENMP
    const int64_t team = kc__num_threads(); /* what the other kernels' parallel loops get */
#else
    const int64_t team = 1;
#endif
    return (int)KC_MAX(1, KC_MIN(team, slots));
}

/* ---- the one-dimensional transforms of F(2x2) (m = 2: 4 <-> 2 values), F(3x3) (m = 3:
 * 5 <-> 3) and F(4x4) (m = 4: 6 <-> 4); every 2-D transform applies one to the columns, then
 * to the rows. Always inlined with a constant m, so each block below compiles to straight-line
 * code per channel and its channel loop vectorises. */
#define WG_INLINE static inline __attribute__((always_inline))
#define WG_UNROLL _Pragma("GCC unroll 8")
/* fn(m, ...) with m a constant, so that each tile size gets its own straight-line copy */
#define WG_BY_M(m, fn, ...)                                                                                           \
    do {                                                                                                              \
        if ((m) == 4)                                                                                                 \
            fn(4, __VA_ARGS__);                                                                                       \
        else if ((m) == 3)                                                                                            \
            fn(3, __VA_ARGS__);                                                                                       \
        else                                                                                                          \
            fn(2, __VA_ARGS__);                                                                                       \
    } while (0)

/* r (a) = B^T d (a) */
WG_INLINE void wg_bt(int m, const float *d, float *r) {
    if (m == 2) {
        r[0] = d[0] - d[2], r[1] = d[1] + d[2], r[2] = d[2] - d[1], r[3] = d[1] - d[3];
        return;
    }
    if (m == 3) {
        r[0] = 2.0f * (d[0] - d[2]) + d[3] - d[1];
        r[1] = d[3] - d[2] - 2.0f * d[1];
        r[2] = d[3] - 3.0f * d[2] + 2.0f * d[1];
        r[3] = d[3] - d[1];
        r[4] = d[4] - d[2] + 2.0f * (d[1] - d[3]);
        return;
    }
    r[0] = 4.0f * d[0] - 5.0f * d[2] + d[4];
    r[1] = d[3] + d[4] - 4.0f * (d[1] + d[2]);
    r[2] = d[4] - d[3] + 4.0f * (d[1] - d[2]);
    r[3] = d[4] - d[2] + 2.0f * (d[3] - d[1]);
    r[4] = d[4] - d[2] + 2.0f * (d[1] - d[3]);
    r[5] = 4.0f * d[1] - 5.0f * d[3] + d[5];
}

/* o (m) = A^T s (a) */
WG_INLINE void wg_at(int m, const float *s, float *o) {
    if (m == 2) {
        o[0] = s[0] + s[1] + s[2], o[1] = s[1] - s[2] - s[3];
        return;
    }
    if (m == 3) {
        const float p1 = s[1] + s[2];
        o[0] = s[0] + p1 + s[3];
        o[1] = s[1] - s[2] + 2.0f * s[3];
        o[2] = p1 + 4.0f * s[3] + s[4];
        return;
    }
    const float p1 = s[1] + s[2], m1 = s[1] - s[2], p3 = s[3] + s[4], m3 = s[3] - s[4];
    o[0] = s[0] + p1 + p3;
    o[1] = m1 + 2.0f * m3;
    o[2] = p1 + 4.0f * p3;
    o[3] = m1 + 8.0f * m3 + s[5];
}

/* r (a) = A v (m) */
WG_INLINE void wg_a(int m, const float *v, float *r) {
    if (m == 2) {
        r[0] = v[0], r[1] = v[0] + v[1], r[2] = v[0] - v[1], r[3] = -v[1];
        return;
    }
    if (m == 3) {
        const float pe = v[0] + v[2];
        r[0] = v[0], r[1] = pe + v[1], r[2] = pe - v[1], r[3] = v[0] + 2.0f * v[1] + 4.0f * v[2], r[4] = v[2];
        return;
    }
    const float pe = v[0] + v[2], po = v[1] + v[3], qe = v[0] + 4.0f * v[2], qo = 2.0f * v[1] + 8.0f * v[3];
    r[0] = v[0], r[1] = pe + po, r[2] = pe - po, r[3] = qe + qo, r[4] = qe - qo, r[5] = v[3];
}

/* u (a) = G g (3) */
WG_INLINE void wg_g(int m, const float *g, float *u) {
    if (m == 2) {
        u[0] = g[0], u[1] = 0.5f * (g[0] + g[1] + g[2]), u[2] = 0.5f * (g[0] - g[1] + g[2]), u[3] = g[2];
        return;
    }
    if (m == 3) {
        u[0] = 0.5f * g[0];
        u[1] = -0.5f * (g[0] + g[1] + g[2]);
        u[2] = (g[1] - g[0] - g[2]) * (1.0f / 6.0f);
        u[3] = (g[0] + 2.0f * g[1] + 4.0f * g[2]) * (1.0f / 6.0f);
        u[4] = g[2];
        return;
    }
    const float e = g[0] + g[2];
    u[0] = 0.25f * g[0];
    u[1] = -(e + g[1]) * (1.0f / 6.0f);
    u[2] = -(e - g[1]) * (1.0f / 6.0f);
    u[3] = g[0] * (1.0f / 24.0f) + g[1] * (1.0f / 12.0f) + g[2] * (1.0f / 6.0f);
    u[4] = g[0] * (1.0f / 24.0f) - g[1] * (1.0f / 12.0f) + g[2] * (1.0f / 6.0f);
    u[5] = g[2];
}

/* t (3) = G^T s (a) */
WG_INLINE void wg_gt(int m, const float *s, float *t) {
    if (m == 2) {
        t[0] = s[0] + 0.5f * (s[1] + s[2]), t[1] = 0.5f * (s[1] - s[2]), t[2] = 0.5f * (s[1] + s[2]) + s[3];
        return;
    }
    if (m == 3) {
        t[0] = 0.5f * (s[0] - s[1]) + (s[3] - s[2]) * (1.0f / 6.0f);
        t[1] = -0.5f * s[1] + s[2] * (1.0f / 6.0f) + s[3] * (1.0f / 3.0f);
        t[2] = s[4] - 0.5f * s[1] - s[2] * (1.0f / 6.0f) + s[3] * (2.0f / 3.0f);
        return;
    }
    const float p1 = s[1] + s[2], m1 = s[2] - s[1], p3 = s[3] + s[4], m3 = s[3] - s[4];
    t[0] = 0.25f * s[0] - p1 * (1.0f / 6.0f) + p3 * (1.0f / 24.0f);
    t[1] = m1 * (1.0f / 6.0f) + m3 * (1.0f / 12.0f);
    t[2] = (p3 - p1) * (1.0f / 6.0f) + s[5];
}

/* The geometry of one pass: input (n, h, w, c), output (n, oh, ow) in m x m tiles. */
typedef struct wg_geom {
    int n, h, w, c, oh, ow, pt, pl, tw, th, m; /* th, tw: tiles down and across */
} wg_geom;

static wg_geom geom(int m, int n, int h, int w, int c, int oh, int ow, int pt, int pl) {
    return (wg_geom){.n = n, .h = h, .w = w, .c = c, .oh = oh, .ow = ow, .pt = pt, .pl = pl,
                     .th = (oh + m - 1) / m, .tw = (ow + m - 1) / m, .m = m};
}

/* The tile's image and its top-left corner in tile units. */
static inline void tile_at(const wg_geom *g, int64_t tile, int *img, int *ty, int *tx) {
    const int64_t per = (int64_t)g->th * g->tw;
    *img = (int)(tile / per);
    *ty = (int)(tile % per / g->tw);
    *tx = (int)(tile % g->tw);
}

/* G g G^T for fb filters of one input channel (p[k]: tap k = 3 i + j of the 3x3 kernel, fb
 * filters wide): out[e * step + q] */
WG_INLINE void kernel_block(int m, const float *const *p, int fb, float *out, size_t step) {
    const int a = m + 2;
#pragma GCC ivdep
    for (int q = 0; q < fb; q++) {
        float t[6][3];
        WG_UNROLL for (int j = 0; j < 3; j++) { /* t = G g, column j */
            float col[3] = {p[j][q], p[3 + j][q], p[6 + j][q]}, o[6];
            wg_g(m, col, o);
            WG_UNROLL for (int i = 0; i < a; i++) t[i][j] = o[i];
        }
        WG_UNROLL for (int i = 0; i < a; i++) { /* (G g) G^T, row i */
            float o[6];
            wg_g(m, t[i], o);
            float *dst = out + (size_t)i * a * step + q;
            WG_UNROLL for (int j = 0; j < a; j++) dst[j * step] = o[j];
        }
    }
}

/* U[e] rows [r0, r0 + WG_CB) (input channels), columns [q0, q0 + WG_CB) (filters); turn:
 * of the kernel turned by 180 degrees */
static void kernel_rows(int m, const float *w, int c, int f, int r0, int q0, int turn, float *u) {
    const size_t step = wg_plane((size_t)c * f);
    const int fb = KC_MIN(WG_CB, f - q0);
    for (int r = r0; r < KC_MIN(c, r0 + WG_CB); r++) {
        const float *p[9];
        for (int k = 0; k < 9; k++) p[k] = w + ((size_t)(turn ? 8 - k : k) * c + r) * f + q0;
        WG_BY_M(m, kernel_block, p, fb, u + (size_t)r * f + q0, step);
    }
}

/* The transposed store's block: WG_TB input channels x WG_TB filters. */
#define WG_TB 16

/* U[e] (F, C) of the kernel turned by 180 degrees, rows [q0, q0 + WG_TB) (filters), columns
 * [r0, r0 + WG_TB) (input channels): transformed along the filters into a block on the stack,
 * then stored a row of WG_TB input channels (a cache line) at a time. */
static void kernel_rows_flipped(int m, const float *w, int c, int f, int r0, int q0, float *u) {
    const size_t step = wg_plane((size_t)c * f);
    const int ne = (m + 2) * (m + 2), rb = KC_MIN(WG_TB, c - r0), fb = KC_MIN(WG_TB, f - q0);
    float tmp[WG_TB][WG_EMAX * WG_TB];
    for (int i = 0; i < rb; i++) {
        const float *p[9];
        for (int k = 0; k < 9; k++) p[k] = w + ((size_t)(8 - k) * c + r0 + i) * f + q0;
        WG_BY_M(m, kernel_block, p, fb, tmp[i], WG_TB);
    }
    for (int e = 0; e < ne; e++)
        for (int q = 0; q < fb; q++) {
            float *dst = u + (size_t)e * step + (size_t)(q0 + q) * c + r0;
            for (int i = 0; i < rb; i++) dst[i] = tmp[i][e * WG_TB + q];
        }
}

/* U[e] (C, F) = G w G^T per (c, f); flip 1: the kernel turned by 180 degrees with C and F
 * swapped (U[e] (F, C), backward-data's); flip 2: the turned kernel's, stored (C, F) like the
 * forward's; by blocks (kernel_rows, kernel_rows_flipped): the
 * transform runs along the filters (vectorised, contiguous reads of w). Reading w with a
 * stride of F floats instead, as this once did, cost 5 % of a ResNet50 training step (perf,
 * one thread); storing the flipped U one float at a time along F (a stride of C floats, the
 * E planes a power of two apart) thrashed the cache and doubled stage 5's backward-data. */
static void filter_transform(int m, const float *w, int c, int f, int flip, float *u) {
    const int b = flip == 1 ? WG_TB : WG_CB, rblocks = (c + b - 1) / b, qblocks = (f + b - 1) / b;
    KC_CPU_PAR_FOR(kc__cpu_par((int64_t)c * f * 9), schedule(static),
    for (int blk = 0; blk < rblocks * qblocks; blk++) {
        const int q0 = blk % qblocks * b, r0 = blk / qblocks * b;
        if (flip == 1)
            kernel_rows_flipped(m, w, c, f, r0, q0, u);
        else
            kernel_rows(m, w, c, f, r0, q0, flip == 2, u);
    });
}

/* G^T S G for kb (c, f) pairs (s: S[0] at the first, entries sstep apart): dw[k * step + i] */
WG_INLINE void kernel_grad_block(int m, const float *s, size_t sstep, int kb, float *dw, size_t step) {
    const int a = m + 2;
#pragma GCC ivdep
    for (int i = 0; i < kb; i++) {
        float t[3][6];
        WG_UNROLL for (int j = 0; j < a; j++) { /* t = G^T s, column j */
            float col[6], o[3];
            WG_UNROLL for (int r = 0; r < a; r++) col[r] = s[(size_t)(r * a + j) * sstep + i];
            wg_gt(m, col, o);
            WG_UNROLL for (int r = 0; r < 3; r++) t[r][j] = o[r];
        }
        WG_UNROLL for (int r = 0; r < 3; r++) { /* t G, row r */
            float o[3];
            wg_gt(m, t[r], o);
            WG_UNROLL for (int j = 0; j < 3; j++) dw[(size_t)(r * 3 + j) * step + i] = o[j];
        }
    }
}

/* dW (3, 3, C, F) = G^T S G per (c, f), in blocks of WG_CB pairs along (C, F). */
static void filter_grad_transform(int m, const float *s, int c, int f, float *dw) {
    const int64_t step = (int64_t)c * f, blocks = (step + WG_CB - 1) / WG_CB;
    const size_t sstep = wg_plane((size_t)step);
    KC_CPU_PAR_FOR(kc__cpu_par(step * 16), schedule(static), for (int64_t k = 0; k < blocks; k++) {
        const int64_t k0 = k * WG_CB;
        const int kb = (int)KC_MIN(WG_CB, step - k0);
        WG_BY_M(m, kernel_grad_block, s + k0, sstep, kb, dw + k0, (size_t)step);
    });
}

/* B^T d B for cb channels of one tile (p: its a x a input pixels): out[e * step + ch] */
WG_INLINE void input_block(int m, const float *const *p, int cb, float *out, size_t step) {
    const int a = m + 2;
#pragma GCC ivdep
    for (int ch = 0; ch < cb; ch++) {
        float b[6][6];
        WG_UNROLL for (int j = 0; j < a; j++) { /* b = B^T d, column j */
            float col[6], r[6];
            WG_UNROLL for (int i = 0; i < a; i++) col[i] = p[i * a + j][ch];
            wg_bt(m, col, r);
            WG_UNROLL for (int i = 0; i < a; i++) b[i][j] = r[i];
        }
        WG_UNROLL for (int i = 0; i < a; i++) { /* (B^T d) B, row i */
            float r[6];
            wg_bt(m, b[i], r);
            float *o = out + (size_t)i * a * step + ch;
            WG_UNROLL for (int j = 0; j < a; j++) o[j * step] = r[j];
        }
    }
}

/* A^T M A (+ b, ReLU) for fb filters of one tile (mm: its row of M[0]): out[i * m + j][q] */
WG_INLINE void output_block(int m, const float *mm, size_t step, int fb, const float *bias, int relu,
                            float *const *out) {
    const int a = m + 2;
#pragma GCC ivdep
    for (int q = 0; q < fb; q++) {
        float s[6][4];
        WG_UNROLL for (int i = 0; i < a; i++) { /* s = M A, row i */
            float row[6];
            WG_UNROLL for (int j = 0; j < a; j++) row[j] = mm[(size_t)(i * a + j) * step + q];
            wg_at(m, row, s[i]);
        }
        const float b = bias ? bias[q] : 0.0f;
        WG_UNROLL for (int j = 0; j < m; j++) { /* A^T s, column j */
            float col[6], r[4];
            WG_UNROLL for (int i = 0; i < a; i++) col[i] = s[i][j];
            wg_at(m, col, r);
            WG_UNROLL for (int i = 0; i < m; i++) {
                float v = r[i] + b;
                if (relu) v = v > 0.0f ? v : 0.0f; /* as act_forward's ReLU */
                out[i * m + j][q] = v;
            }
        }
    }
}

/* A v A^T for fb filters of one tile (v4: its m x m output gradients): out[e * step + q] */
WG_INLINE void grad_block(int m, const float *const *v4, int fb, float *out, size_t step) {
    const int a = m + 2;
#pragma GCC ivdep
    for (int q = 0; q < fb; q++) {
        float t[6][4];
        WG_UNROLL for (int j = 0; j < m; j++) { /* t = A v, column j */
            float col[4], r[6];
            WG_UNROLL for (int i = 0; i < m; i++) col[i] = v4[i * m + j][q];
            wg_a(m, col, r);
            WG_UNROLL for (int i = 0; i < a; i++) t[i][j] = r[i];
        }
        WG_UNROLL for (int i = 0; i < a; i++) { /* t A^T, row i */
            float r[6];
            wg_a(m, t[i], r);
            float *o = out + (size_t)i * a * step + q;
            WG_UNROLL for (int j = 0; j < a; j++) o[j * step] = r[j];
        }
    }
}

/* V[e] row t (C) for tile `tile`: B^T d B of its a x a input, zeros outside; vstep = tc C. */
static void input_tile(const wg_geom *g, const float *x, int64_t tile, int64_t t, size_t vstep, float *v) {
    const int m = g->m, a = m + 2, c = g->c;
    int img, ty, tx;
    tile_at(g, tile, &img, &ty, &tx);
    const int y0 = m * ty - g->pt, x0 = m * tx - g->pl;
    const float *at[WG_EMAX], *p[WG_EMAX];
    for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++) {
            const int iy = y0 + i, ix = x0 + j;
            at[i * a + j] = (iy >= 0 && iy < g->h && ix >= 0 && ix < g->w)
                                ? x + (((size_t)img * g->h + iy) * g->w + ix) * c
                                : NULL;
        }
    for (int c0 = 0; c0 < c; c0 += WG_CB) {
        for (int k = 0; k < a * a; k++) p[k] = at[k] ? at[k] + c0 : wg_zeros;
        float *o = v + (size_t)t * c + c0;
        WG_BY_M(m, input_block, p, KC_MIN(WG_CB, c - c0), o, vstep);
    }
}

/* The m x m outputs of tile `tile` (the parts inside (oh, ow)) from row t of M (mstep = tc F),
 * channels [f0, f1) of f: A^T M A (+ b, ReLU) when out is y, or, dy given, row t of
 * G[e] = A dy A^T from them. */
static void output_tile(const wg_geom *g, float *mm, int64_t tile, int64_t t, size_t mstep, int f, int f0, int f1,
                        const float *bias, int relu, float *y, const float *dy) {
    const int m = g->m;
    int img, ty, tx;
    tile_at(g, tile, &img, &ty, &tx);
    float sink[WG_CB];
    const float *base = dy ? dy : y;
    const float *at[16];
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) {
            const int oy = m * ty + i, ox = m * tx + j;
            at[i * m + j] = (oy < g->oh && ox < g->ow) ? base + (((size_t)img * g->oh + oy) * g->ow + ox) * f : NULL;
        }
    for (int q0 = f0; q0 < f1; q0 += WG_CB) {
        const int fb = KC_MIN(WG_CB, f1 - q0);
        float *row = mm + (size_t)t * f + q0;
        if (dy) { /* the gradient's transform: zeros outside */
            const float *p[16];
            for (int k = 0; k < m * m; k++) p[k] = at[k] ? at[k] + q0 : wg_zeros;
            WG_BY_M(m, grad_block, p, fb, row, mstep);
            continue;
        }
        float *o[16];
        for (int k = 0; k < m * m; k++) o[k] = at[k] ? (float *)at[k] + q0 : sink;
        const float *bq = bias ? bias + q0 : NULL;
        WG_BY_M(m, output_block, row, mstep, fb, bq, relu, o);
    }
}

static int thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* A pass split into units: chunks of tiles (chunk k: tiles [k tc, min((k + 1) tc, total)))
 * times blocks of the pass's output channels (block j: [j fb, min((j + 1) fb, f)), fb a
 * multiple of WG_CB). A unit transforms its chunk's inputs (all C), runs its columns of the E
 * GEMMs and transforms its columns of the outputs; any thread may run any unit. */
typedef struct wg_split {
    int64_t total, tc, chunks;
    int nf, fb; /* column blocks and their width (nf 1: fb = f) */
    int threads;
    int ut; /* U[e] stored transposed (f x c: the pass's output channels by its input's) */
} wg_split;

/* tc at most tc_max (the workspace's), in chunks of equal size whose count is a multiple of
 * the threads, so that each thread gets the same number of tiles: with few chunks a plain
 * split is lopsided (288 tiles in chunks of 128: 256 tiles on one thread, 32 on the other).
 * At least WG_CHUNKS_PER_THREAD chunks per thread where chunks of WG_MIN_TILES tiles allow:
 * forward and backward-data hand them out as the threads come free (winograd_run), so that
 * a thread whose core runs slower for a while (a virtual CPU sharing its core with another
 * guest) takes fewer of them instead of holding the others at the end of the pass.
 * Where the tiles are too few for that and the layer is wider (F) than it has tiles, the
 * output channels are split too (at most WG_MAX_COL_BLOCKS blocks): another chunk would read
 * all of U (E C F) again, another column block only transforms the inputs (E tiles C) again.
 * ResNet50's stage 5 at 96x96: 32 tiles of F(3x3) at 512 -> 512 channels, 1 chunk x 4 blocks
 * instead of 2 chunks of 16 tiles that each read U's 26 MB. Each block transforms the
 * chunk's inputs again and OpenBLAS packs its V[e] again: against 8 blocks, 4 ran that
 * layer's backward passes 2-25 % faster and its forward slower in 2 of 3 rounds, the three
 * passes together about even (bench/RESULTS.md, "Winograd's planes"). */
#define WG_CHUNKS_PER_THREAD 4
#define WG_MIN_TILES 32
#define WG_MAX_COL_BLOCKS 4
static wg_split split(const kc_conv2d_desc *d, int m, const wg_geom *g, int f, size_t ws_bytes) {
    wg_split sp = {.total = (int64_t)g->n * g->th * g->tw, .nf = 1, .fb = f};
    const int64_t tc_max = winograd_chunk(d, m);
    const int nt = pass_threads(d, m, ws_bytes);
    const int par = kc__cpu_par(sp.total * (m + 2) * (m + 2) * (int64_t)(d->c + d->f));
    sp.threads = par ? nt : 1;
    int64_t chunks = (sp.total + tc_max - 1) / tc_max;
    if (sp.threads > 1) {
        const int64_t want = kc__cpu_balance() ? (int64_t)WG_CHUNKS_PER_THREAD * sp.threads : sp.threads;
        chunks = KC_MAX(chunks, KC_MIN(want, sp.total / WG_MIN_TILES));
        if (chunks < want && f > sp.total) { /* few tiles, wide layer: split the columns */
            const int blocks = (f + WG_CB - 1) / WG_CB;
            sp.nf = (int)KC_MIN((int64_t)KC_MIN(blocks, WG_MAX_COL_BLOCKS), (want + chunks - 1) / chunks);
            sp.fb = (f + sp.nf - 1) / sp.nf;
            sp.fb = (sp.fb + WG_CB - 1) / WG_CB * WG_CB;
            sp.nf = (f + sp.fb - 1) / sp.fb;
        }
        if (sp.nf == 1) { /* at most one thread per 16 tiles */
            sp.threads = (int)KC_MAX(1, KC_MIN((int64_t)sp.threads, sp.total / 16));
            chunks = (chunks + sp.threads - 1) / sp.threads * sp.threads;
        }
    }
    sp.tc = KC_MAX(1, (sp.total + chunks - 1) / chunks);
    sp.chunks = (sp.total + sp.tc - 1) / sp.tc;
    sp.threads = (int)KC_MIN((int64_t)sp.threads, sp.chunks * sp.nf);
    return sp;
}

/* Unit (k, j) of a forward pass for geometry g: x (n, h, w, c) -> y (n, oh, ow, f) with U
 * already in ws: the input transform of chunk k into the thread's slot (v), columns
 * [f0, f1) of the E GEMMs (OpenBLAS on one thread inside the parallel region) and of the
 * output transform. */
static void run_unit(const wg_geom *g, int f, const wg_split *sp, const float *x, const float *u, const float *bias,
                     int relu, float *y, float *v, int64_t unit) {
    const int c = g->c, ne = (g->m + 2) * (g->m + 2);
    const int64_t k = unit / sp->nf, t0 = k * sp->tc, tc = KC_MIN(sp->tc, sp->total - t0);
    const int f0 = (int)(unit % sp->nf) * sp->fb, f1 = KC_MIN(f, f0 + sp->fb);
    const size_t vstep = wg_plane((size_t)tc * c), mstep = wg_plane((size_t)tc * f), ustep = wg_plane((size_t)c * f);
    float *mm = v + (size_t)ne * vstep;
    for (int64_t t = 0; t < tc; t++) input_tile(g, x, t0 + t, t, vstep, v);
    for (int e = 0; e < ne; e++) /* M[e] = V[e] U[e], columns [f0, f1) */
        if (sp->ut)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)tc, f1 - f0, c, 1.0f, v + (size_t)e * vstep, c,
                        u + (size_t)e * ustep + (size_t)f0 * c, c, 0.0f, mm + (size_t)e * mstep + f0, f);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)tc, f1 - f0, c, 1.0f, v + (size_t)e * vstep, c,
                        u + (size_t)e * ustep + f0, f, 0.0f, mm + (size_t)e * mstep + f0, f);
    for (int64_t t = 0; t < tc; t++) output_tile(g, mm, t0 + t, t, mstep, f, f0, f1, bias, relu, y, NULL);
}

/* Each thread runs whole units in its own slot of the workspace (vm + thread * slot), taken
 * as the threads come free, with no barrier between them. */
static void winograd_run(const wg_geom *g, int f, const wg_split *sp, const float *x, const float *u,
                         const float *bias, int relu, float *y, float *vm, size_t slot) {
    const int64_t units = sp->chunks * sp->nf;
    if (sp->threads > 1) { /* one thread: no OpenMP region (libgomp mallocs a one-thread team) */
#pragma omp parallel num_threads(sp->threads)
        {
            float *v = vm + (size_t)thread_id() * slot;
            /* each unit writes its own tiles and columns of y: any thread may run any unit */
#pragma omp for schedule(dynamic, 1)
            for (int64_t k = 0; k < units; k++) run_unit(g, f, sp, x, u, bias, relu, y, v, k);
        }
    } else {
        for (int64_t k = 0; k < units; k++) run_unit(g, f, sp, x, u, bias, relu, y, vm, k);
    }
}

kc_status kc__cpu_winograd_forward(const kc_conv2d_desc *d, int m, const float *x, const float *w, const float *b,
                                   float *y, void *ws, size_t ws_bytes) {
    float *u = ws, *vm = u + u_floats(d, m);
    filter_transform(m, w, d->c, d->f, 0, u);
    const wg_geom g = geom(m, d->n, d->h, d->w, d->c, d->oh, d->ow, d->pad_top, d->pad_left);
    const wg_split sp = split(d, m, &g, d->f, ws_bytes);
    winograd_run(&g, d->f, &sp, x, u, b, d->relu != 0, y, vm, slot_floats(d, m));
    return KC_STATUS_OK;
}

/* Backward-data's U[e] is the turned kernel's transform, F x C. Stored so (kernel_rows_flipped:
 * a transposed store, 16 x 16 blocks through the stack) it costs a pass over E C F floats
 * written across; stored C x F instead (kernel_rows with the taps turned: the forward's
 * vectorised rows), the GEMMs read it transposed, which OpenBLAS packs more slowly, once per
 * chunk of tiles. So the C x F store where the tiles come in at most WG_UT_CHUNKS chunks
 * (alternating in one process, 64 MiB read before each call, 2 threads: ResNet50's stage 5,
 * 1 chunk, 1.22x faster, stage 4, 4 chunks, 1.02x; 1 thread, 1 chunk each: 1.28x and 1.13x;
 * stages 2-3, more chunks, 0.72-0.80x: bench/RESULTS.md, "Backward-data's U"). The same
 * products in the same order either way: the same bits. */
#define WG_UT_CHUNKS 2

kc_status kc__cpu_winograd_backward_data(const kc_conv2d_desc *d, int m, const float *dy, const float *w, float *dx,
                                         void *ws, size_t ws_bytes) {
    float *u = ws, *vm = u + u_floats(d, m);
    const wg_geom g = geom(m, d->n, d->oh, d->ow, d->f, d->h, d->w, 2 - d->pad_top, 2 - d->pad_left);
    wg_split sp = split(d, m, &g, d->c, ws_bytes);
    sp.ut = sp.chunks <= WG_UT_CHUNKS;
    filter_transform(m, w, d->c, d->f, sp.ut ? 2 : 1, u); /* U[e] (F, C), or stored (C, F) */
    winograd_run(&g, d->c, &sp, dy, u, NULL, 0, dx, vm, slot_floats(d, m));
    return KC_STATUS_OK;
}

/* Chunk k of the filter gradient, columns [f0, f1): S[e] (C, F) in part += V[e]^T G[e] over
 * its tiles. */
static void grad_chunk(const wg_geom *g, int f, int f0, int f1, const wg_split *sp, const float *x, const float *dy,
                       float *v, float *part, int64_t k) {
    const int c = g->c, ne = (g->m + 2) * (g->m + 2);
    const int64_t t0 = k * sp->tc, tc = KC_MIN(sp->tc, sp->total - t0);
    const size_t vstep = wg_plane((size_t)tc * c), gstep = wg_plane((size_t)tc * f), sstep = wg_plane((size_t)c * f);
    float *gt = v + (size_t)ne * vstep;
    for (int64_t t = 0; t < tc; t++) {
        input_tile(g, x, t0 + t, t, vstep, v);
        output_tile(g, gt, t0 + t, t, gstep, f, f0, f1, NULL, 0, NULL, dy);
    }
    for (int e = 0; e < ne; e++) /* S[e] (C, F) += V[e]^T G[e] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, f1 - f0, (int)tc, 1.0f, v + (size_t)e * vstep, c,
                    gt + (size_t)e * gstep + f0, f, 1.0f, part + (size_t)e * sstep + f0, f);
}

/* Columns [f0, f1) of S's E planes (C rows each, sstep apart) zeroed; all of them, the
 * planes' padding too, when [f0, f1) is every column. */
static void zero_columns(float *part, int ne, int c, size_t sstep, int f, int f0, int f1) {
    if (f0 == 0 && f1 == f) {
        memset(part, 0, (size_t)ne * sstep * sizeof(float));
        return;
    }
    for (int e = 0; e < ne; e++)
        for (int r = 0; r < c; r++) memset(part + e * sstep + (size_t)r * f + f0, 0, (size_t)(f1 - f0) * sizeof(float));
}

kc_status kc__cpu_winograd_backward_filter(const kc_conv2d_desc *d, int m, const float *x, const float *dy, float *dw,
                                           void *ws, size_t ws_bytes) {
    const int c = d->c, f = d->f, ne = (m + 2) * (m + 2);
    const size_t cf = u_floats(d, m), sstep = wg_plane((size_t)c * f), slot = slot_floats(d, m);
    float *s = ws, *vm = s + cf;
    const wg_geom g = geom(m, d->n, d->h, d->w, c, d->oh, d->ow, d->pad_top, d->pad_left);
    const wg_split sp = split(d, m, &g, f, ws_bytes);
    /* groups of consecutive chunks, each summing its chunks' V[e]^T G[e] into a partial S of
     * its own (zeroed first), whichever thread runs it; the partials are then added in group
     * order: reproducible for a given thread count. A thread's scratch is its slot's V and M;
     * group j < threads sums into slot j's S, the others into the partials after the slots
     * (when the workspace holds them: filter_groups, kc__cpu_winograd_workspace). Split by
     * columns (sp.nf > 1: few tiles, a wide layer), one group: each unit sums all the tiles
     * into its own columns of S, with no partials to add. */
    int64_t groups = 1;
    if (sp.threads > 1 && sp.nf == 1) {
        groups = (int64_t)sp.threads * filter_groups(cf);
        const size_t room = ws_bytes / sizeof(float) - cf - (size_t)sp.threads * slot;
        if ((size_t)(groups - sp.threads) * cf > room) groups = sp.threads;
    }
    float *const extra = vm + (size_t)sp.threads * slot;
#define WG_PART(j)                                                                                                    \
    (groups == 1 ? s : (j) < sp.threads ? vm + (size_t)(j) * slot + slot - cf : extra + (size_t)((j) - sp.threads) * cf)
    const int64_t units = groups * sp.nf;
    if (sp.threads > 1) { /* one thread: no OpenMP region (libgomp mallocs a one-thread team) */
#pragma omp parallel num_threads((int)KC_MIN((int64_t)sp.threads, units))
        {
            float *v = vm + (size_t)thread_id() * slot;
#pragma omp for schedule(dynamic, 1)
            for (int64_t u = 0; u < units; u++) {
                const int64_t j = u / sp.nf;
                const int f0 = (int)(u % sp.nf) * sp.fb, f1 = KC_MIN(f, f0 + sp.fb);
                float *part = WG_PART(j);
                zero_columns(part, ne, c, sstep, f, f0, f1);
                for (int64_t k = sp.chunks * j / groups; k < sp.chunks * (j + 1) / groups; k++)
                    grad_chunk(&g, f, f0, f1, &sp, x, dy, v, part, k);
            }
        }
    } else {
        memset(s, 0, cf * sizeof(float));
        for (int64_t k = 0; k < sp.chunks; k++) grad_chunk(&g, f, 0, f, &sp, x, dy, vm, s, k);
    }
    if (groups > 1)
        KC_CPU_PAR_FOR(kc__cpu_par((int64_t)cf * groups), KC_CPU_BALANCED((int64_t)cf),
                       for (int64_t i = 0; i < (int64_t)cf; i++) {
                           float sum = 0.0f;
                           for (int64_t j = 0; j < groups; j++) sum += WG_PART(j)[i];
                           s[i] = sum;
                       });
#undef WG_PART
    filter_grad_transform(m, s, c, f, dw);
    return KC_STATUS_OK;
}
