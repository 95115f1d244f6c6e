/* cpu_winograd.c — 3x3 stride-1 convolutions by Winograd F(2x2, 3x3), NHWC / HWIO.
 *
 * Each 2x2 block of outputs (a tile) comes from a 4x4 block of inputs. With the transforms
 *     B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *     G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
 *     A^T = [1 1 1 0; 0 1 -1 -1]
 * a tile's output is Y = A^T [(G w G^T) . (B^T d B)] A, where "." multiplies the 16
 * entries one by one. Across channels the 16 entries become 16 independent GEMMs:
 *     forward:          V[e] (T, C) = B^T d B;  U[e] (C, F) = G w G^T;  M[e] = V[e] U[e]  (T, F);
 *                       y = A^T M A (+ b, ReLU)
 *     backward_data:    the forward of dy with the kernel turned by 180 degrees and C, F swapped,
 *                       padding 2 - pad (a stride-1 3x3 convolution's transpose is one)
 *     backward_filter:  S[e] (C, F) = sum over tiles V[e]^T (A g A^T)[e];  dW = G^T S G
 * 16 products of C x F per 4 outputs instead of 36: 2.25 times fewer multiply-adds than
 * im2col + GEMM, for the price of the transforms (linear in C + F per tile).
 *
 * Workspace: the 16 transformed kernels (16 C F floats; backward_filter's sums S), then V
 * and M for a chunk of tiles (16 Tc (C + F) floats). Tiles run chunk by chunk, Tc fixed by
 * C + F (winograd_chunk), the same for all three passes so one workspace fits them.
 * The transforms run in parallel over tiles (OpenMP), vectorised over channels (ivdep: the
 * blocks they read and write never overlap); the GEMMs are OpenBLAS's, called
 * outside any parallel region so that they use every thread. The error against the direct
 * sum is a few float ulps of the sums (test_winograd measures it). */
#include <string.h>

#include <cblas.h>

#include "cpu.h"

#define WG_E 16 /* entries of a transformed 4x4 tile */
/* bytes of V and M per chunk of tiles: large enough for GEMMs of a few hundred rows,
 * small enough to stay in the last-level cache between the transforms and the GEMMs */
#define WG_CHUNK_BYTES ((size_t)6 << 20)
/* channels transformed at a time: the inner loops run over a block with no bounds test
 * (pixels outside the image read a block of zeros, outputs outside it go to a sink), so
 * that they vectorise */
#define WG_CB 64
static const float wg_zeros[WG_CB];

int kc__cpu_winograd_applies(kc_backend *be, const kc_conv2d_desc *d) {
    if (!d || !kc__cpu_winograd_enabled(be)) return 0;
    if (d->kh != 3 || d->kw != 3 || d->sh != 1 || d->sw != 1 || d->dh != 1 || d->dw != 1) return 0;
    if (d->pad_top > 2 || d->pad_left > 2 || d->oh != d->h + 2 * d->pad_top - 2 || d->ow != d->w + 2 * d->pad_left - 2)
        return 0; /* the padding after equals the padding before ("valid", "same") */
    /* the transforms cost O(C + F) per tile against the 20 C F multiply-adds they save: a
     * win once both are wide enough (cpu.h, measured with bench/bench_conv) */
    return d->c >= KC_CPU_WINOGRAD_MIN_C && d->f >= KC_CPU_WINOGRAD_MIN_C;
}

static int64_t tiles_of(int oh, int ow, int n) { return (int64_t)n * ((oh + 1) / 2) * ((ow + 1) / 2); }

/* tiles per chunk for channel counts c, f (symmetric, so backward-data's swap fits too) */
static int64_t winograd_chunk(const kc_conv2d_desc *d) {
    int64_t per = (int64_t)WG_E * (d->c + d->f) * (int64_t)sizeof(float);
    int64_t tc = (int64_t)WG_CHUNK_BYTES / per;
    int64_t most = KC_MAX(tiles_of(d->oh, d->ow, d->n), tiles_of(d->h, d->w, d->n));
    tc = KC_MAX(tc, 32);
    return KC_MIN(tc, most);
}

size_t kc__cpu_winograd_workspace(kc_backend *be, const kc_conv2d_desc *d) {
    size_t u = (size_t)WG_E * d->c * d->f, vm = (size_t)WG_E * (size_t)winograd_chunk(d) * (d->c + d->f);
    return (u + vm) * sizeof(float);
}

/* U[e] (C, F) = G w G^T per (c, f); flip: the kernel turned by 180 degrees with C and F
 * swapped (w is then (3, 3, F, C) read as the transpose of a (3, 3, C, F) one: U (F, C)). */
static void filter_transform(const float *w, int c, int f, int flip, float *u) {
    const int rows = flip ? f : c, cols = flip ? c : f; /* U[e] is (rows, cols) */
#pragma omp parallel for schedule(static) if (kc__cpu_par((int64_t)rows * cols * 9))
    for (int r = 0; r < rows; r++)
        for (int q = 0; q < cols; q++) {
            float g[3][3], t[4][3];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++)
                    g[i][j] = flip ? w[(((size_t)(2 - i) * 3 + (2 - j)) * c + q) * f + r]
                                   : w[(((size_t)i * 3 + j) * c + r) * f + q];
            for (int j = 0; j < 3; j++) { /* t = G g */
                t[0][j] = g[0][j];
                t[1][j] = 0.5f * (g[0][j] + g[1][j] + g[2][j]);
                t[2][j] = 0.5f * (g[0][j] - g[1][j] + g[2][j]);
                t[3][j] = g[2][j];
            }
            for (int i = 0; i < 4; i++) { /* U = t G^T */
                float *ue = u + ((size_t)i * 4 * rows + r) * cols + q;
                const size_t step = (size_t)rows * cols;
                ue[0] = t[i][0];
                ue[step] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
                ue[2 * step] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
                ue[3 * step] = t[i][2];
            }
        }
}

/* The geometry of one pass: input (n, h, w, c), output (n, oh, ow) in 2x2 tiles. */
typedef struct wg_geom {
    int n, h, w, c, oh, ow, pt, pl, tw, th; /* th, tw: tiles down and across */
} wg_geom;

static wg_geom geom(int n, int h, int w, int c, int oh, int ow, int pt, int pl) {
    return (wg_geom){.n = n, .h = h, .w = w, .c = c, .oh = oh, .ow = ow, .pt = pt, .pl = pl, .th = (oh + 1) / 2,
                     .tw = (ow + 1) / 2};
}

/* The tile's image and its top-left corner in tile units. */
static inline void tile_at(const wg_geom *g, int64_t tile, int *img, int *ty, int *tx) {
    const int64_t per = (int64_t)g->th * g->tw;
    *img = (int)(tile / per);
    *ty = (int)(tile % per / g->tw);
    *tx = (int)(tile % g->tw);
}

/* B^T d B for cb channels of one tile (p: its 16 input pixels): out[e * step + ch] */
static inline void input_block(const float *const p[4][4], int cb, float *out, size_t step) {
#pragma GCC ivdep
    for (int ch = 0; ch < cb; ch++) {
        float d[4][4], b[4][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) d[i][j] = p[i][j][ch];
        for (int j = 0; j < 4; j++) { /* b = B^T d */
            b[0][j] = d[0][j] - d[2][j];
            b[1][j] = d[1][j] + d[2][j];
            b[2][j] = d[2][j] - d[1][j];
            b[3][j] = d[1][j] - d[3][j];
        }
        for (int i = 0; i < 4; i++) { /* (B^T d) B */
            float *o = out + (size_t)i * 4 * step + ch;
            o[0] = b[i][0] - b[i][2];
            o[step] = b[i][1] + b[i][2];
            o[2 * step] = b[i][2] - b[i][1];
            o[3 * step] = b[i][1] - b[i][3];
        }
    }
}

/* V[e] (tc, C) for tiles [t0, t0 + tc): B^T d B of each tile's 4x4 input, zeros outside. */
static void input_transform(const wg_geom *g, const float *x, int64_t t0, int64_t tc, float *v) {
    const int c = g->c;
    const size_t step = (size_t)tc * c;
#pragma omp parallel for schedule(static) if (kc__cpu_par(tc * 16 * c))
    for (int64_t t = 0; t < tc; t++) {
        int img, ty, tx;
        tile_at(g, t0 + t, &img, &ty, &tx);
        const int y0 = 2 * ty - g->pt, x0 = 2 * tx - g->pl;
        const float *at[4][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                const int iy = y0 + i, ix = x0 + j;
                at[i][j] = (iy >= 0 && iy < g->h && ix >= 0 && ix < g->w)
                               ? x + (((size_t)img * g->h + iy) * g->w + ix) * c
                               : NULL;
            }
        for (int c0 = 0; c0 < c; c0 += WG_CB) {
            const float *p[4][4];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) p[i][j] = at[i][j] ? at[i][j] + c0 : wg_zeros;
            input_block((const float *const(*)[4])p, KC_MIN(WG_CB, c - c0), v + (size_t)t * c + c0, step);
        }
    }
}

/* A^T M A (+ b, ReLU) for fb filters of one tile (m: its row of M[0]): out[i][j][q] */
static inline void output_block(const float *m, size_t step, int fb, const float *bias, int relu, float *const out[2][2]) {
#pragma GCC ivdep
    for (int q = 0; q < fb; q++) {
        float s[4][2];
        for (int i = 0; i < 4; i++) { /* s = M A, row i */
            const float *mi = m + (size_t)i * 4 * step + q;
            s[i][0] = mi[0] + mi[step] + mi[2 * step];
            s[i][1] = mi[step] - mi[2 * step] - mi[3 * step];
        }
        const float b = bias ? bias[q] : 0.0f;
        for (int j = 0; j < 2; j++) {
            float r0 = s[0][j] + s[1][j] + s[2][j] + b, r1 = s[1][j] - s[2][j] - s[3][j] + b;
            if (relu) { /* as act_forward's ReLU */
                r0 = r0 > 0.0f ? r0 : 0.0f;
                r1 = r1 > 0.0f ? r1 : 0.0f;
            }
            out[0][j][q] = r0;
            out[1][j][q] = r1;
        }
    }
}

/* y tiles [t0, t0 + tc) = A^T M A (+ b, ReLU), the parts inside (oh, ow). */
static void output_transform(const wg_geom *g, const float *m, int64_t t0, int64_t tc, int f, const float *bias,
                             int relu, float *y) {
    const size_t step = (size_t)tc * f;
#pragma omp parallel for schedule(static) if (kc__cpu_par(tc * 16 * f))
    for (int64_t t = 0; t < tc; t++) {
        int img, ty, tx;
        tile_at(g, t0 + t, &img, &ty, &tx);
        float sink[WG_CB];
        float *at[2][2];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                const int oy = 2 * ty + i, ox = 2 * tx + j;
                at[i][j] = (oy < g->oh && ox < g->ow) ? y + (((size_t)img * g->oh + oy) * g->ow + ox) * f : NULL;
            }
        for (int q0 = 0; q0 < f; q0 += WG_CB) {
            float *o[2][2];
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) o[i][j] = at[i][j] ? at[i][j] + q0 : sink;
            output_block(m + (size_t)t * f + q0, step, KC_MIN(WG_CB, f - q0), bias ? bias + q0 : NULL, relu,
                         (float *const(*)[2])o);
        }
    }
}

/* The forward pass for geometry g: x (n, h, w, c) -> y (n, oh, ow, f) with U already in ws. */
static void winograd_run(const wg_geom *g, int f, int64_t tc_max, const float *x, const float *u,
                         const float *bias, int relu, float *y, float *vm) {
    const int c = g->c;
    const int64_t total = (int64_t)g->n * g->th * g->tw;
    for (int64_t t0 = 0; t0 < total; t0 += tc_max) {
        const int64_t tc = KC_MIN(tc_max, total - t0);
        float *v = vm, *m = vm + (size_t)WG_E * tc * c;
        input_transform(g, x, t0, tc, v);
        for (int e = 0; e < WG_E; e++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)tc, f, c, 1.0f, v + (size_t)e * tc * c, c,
                        u + (size_t)e * c * f, f, 0.0f, m + (size_t)e * tc * f, f);
        output_transform(g, m, t0, tc, f, bias, relu, y);
    }
}

static kc_status check_ws(kc_backend *be, const kc_conv2d_desc *d, const void *ws, size_t ws_bytes, const char *what) {
    size_t need = kc__cpu_winograd_workspace(be, d);
    if (ws && ws_bytes >= need) return KC_STATUS_OK;
    return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                    "cpu %s (winograd): a workspace of %zu bytes is too small (conv2d_workspace asks %zu for this "
                    "convolution)", what, ws ? ws_bytes : 0, need);
}

kc_status kc__cpu_winograd_forward(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *w,
                                   const float *b, float *y, void *ws, size_t ws_bytes) {
    KC_TRY(check_ws(be, d, ws, ws_bytes, "conv2d_forward"));
    float *u = ws, *vm = u + (size_t)WG_E * d->c * d->f;
    filter_transform(w, d->c, d->f, 0, u);
    const wg_geom g = geom(d->n, d->h, d->w, d->c, d->oh, d->ow, d->pad_top, d->pad_left);
    winograd_run(&g, d->f, winograd_chunk(d), x, u, b, d->relu != 0, y, vm);
    return KC_STATUS_OK;
}

kc_status kc__cpu_winograd_backward_data(kc_backend *be, const kc_conv2d_desc *d, const float *dy, const float *w,
                                         float *dx, void *ws, size_t ws_bytes) {
    KC_TRY(check_ws(be, d, ws, ws_bytes, "conv2d_backward_data"));
    float *u = ws, *vm = u + (size_t)WG_E * d->c * d->f;
    filter_transform(w, d->c, d->f, 1, u); /* U[e] (F, C) */
    const wg_geom g = geom(d->n, d->oh, d->ow, d->f, d->h, d->w, 2 - d->pad_top, 2 - d->pad_left);
    winograd_run(&g, d->c, winograd_chunk(d), dy, u, NULL, 0, dx, vm);
    return KC_STATUS_OK;
}

/* A v A^T for fb filters of one tile (v: its 2x2 output gradients): out[e * step + q] */
static inline void grad_block(const float *const v4[2][2], int fb, float *out, size_t step) {
#pragma GCC ivdep
    for (int q = 0; q < fb; q++) {
        float v[2][2], a[4][2];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) v[i][j] = v4[i][j][q];
        for (int j = 0; j < 2; j++) { /* a = A v, A = [1 0; 1 1; 1 -1; 0 -1] */
            a[0][j] = v[0][j];
            a[1][j] = v[0][j] + v[1][j];
            a[2][j] = v[0][j] - v[1][j];
            a[3][j] = -v[1][j];
        }
        for (int i = 0; i < 4; i++) { /* a A^T */
            float *oi = out + (size_t)i * 4 * step + q;
            oi[0] = a[i][0];
            oi[step] = a[i][0] + a[i][1];
            oi[2 * step] = a[i][0] - a[i][1];
            oi[3 * step] = -a[i][1];
        }
    }
}

/* G[e] (tc, F) = A g A^T of each tile's 2x2 output gradient, zeros outside (oh, ow). */
static void grad_transform(const wg_geom *g, const float *dy, int64_t t0, int64_t tc, int f, float *gt) {
    const size_t step = (size_t)tc * f;
#pragma omp parallel for schedule(static) if (kc__cpu_par(tc * 16 * f))
    for (int64_t t = 0; t < tc; t++) {
        int img, ty, tx;
        tile_at(g, t0 + t, &img, &ty, &tx);
        const float *at[2][2];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                const int oy = 2 * ty + i, ox = 2 * tx + j;
                at[i][j] = (oy < g->oh && ox < g->ow) ? dy + (((size_t)img * g->oh + oy) * g->ow + ox) * f : NULL;
            }
        for (int q0 = 0; q0 < f; q0 += WG_CB) {
            const float *p[2][2];
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) p[i][j] = at[i][j] ? at[i][j] + q0 : wg_zeros;
            grad_block((const float *const(*)[2])p, KC_MIN(WG_CB, f - q0), gt + (size_t)t * f + q0, step);
        }
    }
}

/* dW (3, 3, C, F) = G^T S G per (c, f). */
static void filter_grad_transform(const float *s, int c, int f, float *dw) {
    const size_t step = (size_t)c * f;
#pragma omp parallel for schedule(static) if (kc__cpu_par((int64_t)step * 16))
    for (int64_t k = 0; k < (int64_t)step; k++) {
        float m[4][4], t[3][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) m[i][j] = s[(size_t)(i * 4 + j) * step + k];
        for (int j = 0; j < 4; j++) { /* t = G^T m, G^T = [1 1/2 1/2 0; 0 1/2 -1/2 0; 0 1/2 1/2 1] */
            t[0][j] = m[0][j] + 0.5f * (m[1][j] + m[2][j]);
            t[1][j] = 0.5f * (m[1][j] - m[2][j]);
            t[2][j] = 0.5f * (m[1][j] + m[2][j]) + m[3][j];
        }
        for (int i = 0; i < 3; i++) { /* t G */
            dw[(size_t)(i * 3 + 0) * step + k] = t[i][0] + 0.5f * (t[i][1] + t[i][2]);
            dw[(size_t)(i * 3 + 1) * step + k] = 0.5f * (t[i][1] - t[i][2]);
            dw[(size_t)(i * 3 + 2) * step + k] = 0.5f * (t[i][1] + t[i][2]) + t[i][3];
        }
    }
}

kc_status kc__cpu_winograd_backward_filter(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *dy,
                                           float *dw, void *ws, size_t ws_bytes) {
    KC_TRY(check_ws(be, d, ws, ws_bytes, "conv2d_backward_filter"));
    const int c = d->c, f = d->f;
    float *s = ws, *vm = s + (size_t)WG_E * c * f;
    const wg_geom g = geom(d->n, d->h, d->w, c, d->oh, d->ow, d->pad_top, d->pad_left);
    const int64_t total = (int64_t)g.n * g.th * g.tw, tc_max = winograd_chunk(d);
    for (int64_t t0 = 0; t0 < total; t0 += tc_max) {
        const int64_t tc = KC_MIN(tc_max, total - t0);
        float *v = vm, *gt = vm + (size_t)WG_E * tc * c;
        input_transform(&g, x, t0, tc, v);
        grad_transform(&g, dy, t0, tc, f, gt);
        for (int e = 0; e < WG_E; e++) /* S[e] (C, F) (+)= V[e]^T G[e] */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, f, (int)tc, 1.0f, v + (size_t)e * tc * c, c,
                        gt + (size_t)e * tc * f, f, t0 ? 1.0f : 0.0f, s + (size_t)e * c * f, f);
    }
    filter_grad_transform(s, c, f, dw);
    return KC_STATUS_OK;
}
