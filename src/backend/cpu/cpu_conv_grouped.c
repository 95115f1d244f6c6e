/* cpu_conv_grouped.c — grouped 2-D convolution (Conv2D with 1 < groups < C), NHWC, kernel
 * (KH, KW, C / G, F) as Keras stores it.
 *
 * Output channel k belongs to group g = k / (F / G) and reads the CG = C / G input channels
 * of that group. A group is a small dense convolution, so im2col would build G column
 * matrices of CG channels each for GEMMs too thin to pay for it; these kernels are direct:
 * per pixel and kernel tap, each input value of a group is multiplied into the FG = F / G
 * contiguous kernel entries of its group (contiguous in Keras's kernel and in NHWC), so the
 * innermost loop runs over FG outputs and vectorises. Groups == C (one input channel per
 * group: ConvNeXt) is depthwise convolution; the layer sends it to cpu_depthwise.c.
 *
 *   forward          parallel over output rows (n, oy)
 *   backward_data    parallel over blocks of input rows: a gather, each thread owns rows of
 *                    dx; tap by tap, with the tap transposed so that the multiply-adds run
 *                    along the group's input channels
 *   backward_filter  parallel over tiles (tap, group, input-channel block, filter block):
 *                    each thread owns its tile of dw; sums per image in float, across
 *                    images in double; db by the column sum of dy
 * No workspace: the per-thread tiles are on the stack. */
#include <string.h>

#include "cpu.h"

#define GC_TILE 4096 /* entries of one backward_filter tile (cin block x filter block) */
#define GC_FBLOCK 64 /* filters per tile */
#define GC_TTAP 16384 /* backward_data: a kernel tap (CG x F) up to this size is transposed on the stack */
#define GC_ROWS 8     /* ... once per block of this many input rows */

static kc_status gc_check(const kc_conv2d_desc *d, int groups, const char *what) {
    if (!d) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: the descriptor is NULL", what);
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->f <= 0 || d->kh <= 0 || d->kw <= 0 || d->sh <= 0 ||
        d->sw <= 0 || d->dh <= 0 || d->dw <= 0 || d->oh <= 0 || d->ow <= 0 || d->pad_top < 0 || d->pad_left < 0 ||
        groups <= 0 || d->c % groups || d->f % groups)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu %s: bad grouped convolution (input %dx%dx%dx%d, %d filters, %d groups, kernel %dx%d, "
                        "strides %dx%d, dilation %dx%d, pad %d,%d, output %dx%d): every size must be positive, "
                        "padding >= 0 and channels and filters multiples of the groups",
                        what, d->n, d->h, d->w, d->c, d->f, groups, d->kh, d->kw, d->sh, d->sw, d->dh, d->dw,
                        d->pad_top, d->pad_left, d->oh, d->ow);
    return KC_STATUS_OK;
}

/* acc[F] += the taps of pixel xp (C) with the kernel tap wt (CG, F), group by group. */
static inline void gc_pixel_fma(float *restrict acc, const float *restrict xp, const float *restrict wt, int c,
                                int f, int groups) {
    const int cg = c / groups, fg = f / groups;
    for (int g = 0; g < groups; g++) {
        float *ag = acc + (size_t)g * fg;
        for (int ci = 0; ci < cg; ci++) {
            const float xv = xp[g * cg + ci];
            const float *wr = wt + (size_t)ci * f + (size_t)g * fg;
            for (int k = 0; k < fg; k++) ag[k] += xv * wr[k];
        }
    }
}

static void gc_forward_row(const kc_conv2d_desc *d, int groups, const float *x, const float *w, const float *b,
                           float *yr, int n, int oy) {
    const int f = d->f, cg = d->c / groups;
    int r0, r1;
    kc__cpu_tap_range(oy, d->sh, d->pad_top, d->dh, d->kh, d->h, &r0, &r1);
    const float *xi = x + (size_t)n * d->h * d->w * d->c;
    for (int ox = 0; ox < d->ow; ox++) {
        float *acc = yr + (size_t)ox * f;
        if (b) memcpy(acc, b, (size_t)f * sizeof(float));
        else memset(acc, 0, (size_t)f * sizeof(float));
        int s0, s1;
        kc__cpu_tap_range(ox, d->sw, d->pad_left, d->dw, d->kw, d->w, &s0, &s1);
        for (int r = r0; r < r1; r++) {
            const float *xrow = xi + (size_t)(oy * d->sh - d->pad_top + r * d->dh) * d->w * d->c;
            for (int s = s0; s < s1; s++)
                gc_pixel_fma(acc, xrow + (size_t)(ox * d->sw - d->pad_left + s * d->dw) * d->c,
                             w + ((size_t)r * d->kw + s) * cg * f, d->c, f, groups);
        }
        if (d->relu)
            for (int k = 0; k < f; k++) acc[k] = acc[k] > 0.0f ? acc[k] : 0.0f;
    }
}

kc_status kc__cpu_grouped_conv_forward(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                       const float *w, const float *b, float *y, void *ws, size_t ws_bytes) {
    (void)be, (void)ws, (void)ws_bytes;
    KC_TRY(gc_check(d, groups, "grouped_conv_forward"));
    if (!x || !w || !y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu grouped_conv_forward: NULL x, kernel or y");
    const int64_t rows = (int64_t)d->n * d->oh;
    const size_t row = (size_t)d->ow * d->f;
    const int64_t work = rows * (int64_t)row * d->kh * d->kw * (d->c / groups);
    KC_CPU_PAR_FOR(kc__cpu_par(work), schedule(static), for (int64_t i = 0; i < rows; i++) {
        gc_forward_row(d, groups, x, w, b, y + (size_t)i * row, (int)(i / d->oh), (int)(i % d->oh));
    });
    return KC_STATUS_OK;
}

/* acc[C] += the group-by-group products of the output gradient gp (F) with one kernel tap:
 * by dot products over each group's filters (wt: the tap as stored, (CG, F)), or, with
 * the tap transposed group by group (wtt: (G, FG, CG), as gc_transpose_tap writes it), by
 * multiply-adds along each group's input channels, which vectorise without reordering. */
static inline void gc_pixel_bwd(float *restrict acc, const float *restrict gp, const float *restrict wt,
                                const float *restrict wtt, int cg, int fg, int groups) {
    const int f = fg * groups;
    for (int g = 0; g < groups; g++) {
        const float *gg = gp + (size_t)g * fg;
        float *ag = acc + (size_t)g * cg;
        if (wtt) {
            const float *tg = wtt + (size_t)g * fg * cg;
            for (int k = 0; k < fg; k++) {
                const float gv = gg[k];
                const float *tr = tg + (size_t)k * cg;
                for (int ci = 0; ci < cg; ci++) ag[ci] += gv * tr[ci];
            }
            continue;
        }
        for (int ci = 0; ci < cg; ci++) {
            const float *wr = wt + (size_t)ci * f + (size_t)g * fg;
            float sum = 0.0f;
            for (int k = 0; k < fg; k++) sum += gg[k] * wr[k];
            ag[ci] += sum;
        }
    }
}

/* wtt[g][k][ci] = wt[ci][g * FG + k]: one tap, transposed group by group. */
static void gc_transpose_tap(const float *wt, float *wtt, int cg, int fg, int groups) {
    const int f = fg * groups;
    for (int g = 0; g < groups; g++)
        for (int k = 0; k < fg; k++)
            for (int ci = 0; ci < cg; ci++) wtt[((size_t)g * fg + k) * cg + ci] = wt[(size_t)ci * f + g * fg + k];
}

/* dx rows [iy0, iy1) of image n: every output pixel whose window covers an input pixel,
 * through its tap; tap by tap, each tap transposed once per block of rows when it fits on
 * the stack (GC_TTAP). */
static void gc_backward_data_rows(const kc_conv2d_desc *d, int groups, const float *dy, const float *w, float *dx,
                                  int n, int iy0, int iy1) {
    const int c = d->c, f = d->f, cg = c / groups, fg = f / groups;
    const float *dyi = dy + (size_t)n * d->oh * d->ow * f;
    float wtt_buf[GC_TTAP];
    float *wtt = (size_t)cg * f <= GC_TTAP && fg > 1 ? wtt_buf : NULL;
    float *dxi = dx + (size_t)n * d->h * d->w * c;
    memset(dxi + (size_t)iy0 * d->w * c, 0, (size_t)(iy1 - iy0) * d->w * c * sizeof(float));
    for (int r = 0; r < d->kh; r++)
        for (int s = 0; s < d->kw; s++) {
            const float *wt = w + ((size_t)r * d->kw + s) * cg * f;
            if (wtt) gc_transpose_tap(wt, wtt, cg, fg, groups);
            for (int iy = iy0; iy < iy1; iy++) {
                int t = iy + d->pad_top - r * d->dh;
                if (t < 0 || t % d->sh || t / d->sh >= d->oh) continue;
                const float *dyrow = dyi + (size_t)(t / d->sh) * d->ow * f;
                float *dxr = dxi + (size_t)iy * d->w * c;
                for (int ix = 0; ix < d->w; ix++) {
                    int u = ix + d->pad_left - s * d->dw;
                    if (u < 0 || u % d->sw || u / d->sw >= d->ow) continue;
                    gc_pixel_bwd(dxr + (size_t)ix * c, dyrow + (size_t)(u / d->sw) * f, wt, wtt, cg, fg, groups);
                }
            }
        }
}

kc_status kc__cpu_grouped_conv_backward_data(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *dy,
                                             const float *w, float *dx, void *ws, size_t ws_bytes) {
    (void)be, (void)ws, (void)ws_bytes;
    KC_TRY(gc_check(d, groups, "grouped_conv_backward_data"));
    if (!dy || !w || !dx)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu grouped_conv_backward_data: NULL dy, kernel or dx");
    const int blocks = (d->h + GC_ROWS - 1) / GC_ROWS; /* row blocks per image */
    const int64_t items = (int64_t)d->n * blocks;
    const int64_t work = (int64_t)d->n * d->oh * d->ow * d->f * d->kh * d->kw * (d->c / groups);
    KC_CPU_PAR_FOR(kc__cpu_par(work), schedule(static), for (int64_t i = 0; i < items; i++) {
        int n = (int)(i / blocks), b = (int)(i % blocks);
        gc_backward_data_rows(d, groups, dy, w, dx, n, b * GC_ROWS, KC_MIN(d->h, (b + 1) * GC_ROWS));
    });
    return KC_STATUS_OK;
}

/* One tile of dw: tap (r, s), group g, input channels [c0, c0 + nc) of the group, filters
 * [k0, k0 + nk) of the group. */
typedef struct gc_tile {
    int r, s, g, c0, nc, k0, nk;
} gc_tile;

static void gc_filter_tile(const kc_conv2d_desc *d, int groups, const float *x, const float *dy, float *dw,
                           gc_tile t) {
    const int f = d->f, cg = d->c / groups, fg = f / groups;
    float acc[GC_TILE];
    double tot[GC_TILE];
    const size_t m = (size_t)t.nc * t.nk;
    memset(tot, 0, m * sizeof(double));
    const int xoff = t.g * cg + t.c0, koff = t.g * fg + t.k0;
    for (int n = 0; n < d->n; n++) {
        const float *xi = x + (size_t)n * d->h * d->w * d->c;
        const float *dyi = dy + (size_t)n * d->oh * d->ow * f;
        memset(acc, 0, m * sizeof(float));
        for (int oy = 0; oy < d->oh; oy++) {
            int iy = oy * d->sh - d->pad_top + t.r * d->dh;
            if (iy < 0 || iy >= d->h) continue;
            for (int ox = 0; ox < d->ow; ox++) {
                int ix = ox * d->sw - d->pad_left + t.s * d->dw;
                if (ix < 0 || ix >= d->w) continue;
                const float *xp = xi + ((size_t)iy * d->w + ix) * d->c + xoff;
                const float *gp = dyi + ((size_t)oy * d->ow + ox) * f + koff;
                for (int ci = 0; ci < t.nc; ci++) {
                    const float xv = xp[ci];
                    float *a = acc + (size_t)ci * t.nk;
                    for (int k = 0; k < t.nk; k++) a[k] += xv * gp[k];
                }
            }
        }
        for (size_t i = 0; i < m; i++) tot[i] += acc[i];
    }
    float *wt = dw + ((size_t)t.r * d->kw + t.s) * cg * f;
    for (int ci = 0; ci < t.nc; ci++)
        for (int k = 0; k < t.nk; k++) wt[(size_t)(t.c0 + ci) * f + koff + k] = (float)tot[(size_t)ci * t.nk + k];
}

kc_status kc__cpu_grouped_conv_backward_filter(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                               const float *dy, float *dw, float *db, void *ws, size_t ws_bytes) {
    (void)ws, (void)ws_bytes;
    KC_TRY(gc_check(d, groups, "grouped_conv_backward_filter"));
    if (!x || !dy || !dw)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu grouped_conv_backward_filter: NULL x, dy or dw");
    const int cg = d->c / groups, fg = d->f / groups;
    const int nk = KC_MIN(fg, GC_FBLOCK), nc = KC_MIN(cg, GC_TILE / nk);
    const int kb = (fg + nk - 1) / nk, cb = (cg + nc - 1) / nc;
    const int64_t tiles = (int64_t)d->kh * d->kw * groups * cb * kb;
    const int64_t work = (int64_t)d->n * d->oh * d->ow * d->f * d->kh * d->kw * cg;
    KC_CPU_PAR_FOR(kc__cpu_par(work) && tiles > 1, schedule(dynamic), for (int64_t i = 0; i < tiles; i++) {
        int64_t q = i;
        gc_tile t;
        int kbi = (int)(q % kb), cbi;
        q /= kb;
        cbi = (int)(q % cb), q /= cb;
        t.g = (int)(q % groups), q /= groups;
        t.s = (int)(q % d->kw), t.r = (int)(q / d->kw);
        t.c0 = cbi * nc, t.nc = KC_MIN(nc, cg - t.c0);
        t.k0 = kbi * nk, t.nk = KC_MIN(nk, fg - t.k0);
        gc_filter_tile(d, groups, x, dy, dw, t);
    });
    if (db) KC_TRY(kc__cpu_bias_grad(be, dy, db, (int64_t)d->n * d->oh * d->ow, d->f));
    return KC_STATUS_OK;
}
