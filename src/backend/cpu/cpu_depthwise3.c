/* cpu_depthwise3.c — the fast path of depthwise convolution: 3x3 kernels, depth multiplier
 * 1, no dilation (MobileNet's, EfficientNet's 3x3 stages), any strides and padding.
 *
 * cpu_depthwise.c calls these for the channels [0, cv) that fill whole vectors of DW_VW
 * floats (kc__cpu_dw3_channels) and runs its general kernels on the rest. Each works on one
 * vector of channels at a time and keeps what it reuses in registers: the nine weight
 * vectors in forward and backward_data, the nine per-tap gradient sums of a whole image in
 * backward_filter (the general kernel keeps them in memory and loads and stores them for
 * every multiply-add). Interior pixels read their nine taps unchecked; pixels whose window
 * crosses the padding read zeros for the missing taps (dw_tap).
 *
 *   forward_row        y row (n, oy) = bias + sum over taps of x * w (stride 1: each row's
 *                      window of three columns slides along the output row, dw3_row_s1)
 *   backward_data_row  stride 1: dx row (n, iy) is the same sum over dy with the kernel
 *                      turned by 180 degrees, as a forward pass over dy; stride 2: each dx
 *                      pixel sums its one, two or four taps in a register
 *                      (dw3_backward_data_row_s2)
 *   filter_rows        output rows [i0, i1) added into a group's partial sums, every channel
 *                      of a pixel together (the rows stream through once)
 *   filter_chunk       dw[., ., k .. k + DW_VW), db: per image in float, across images in
 *                      double, as the general kernel (without a workspace) */
#include <string.h>

#include "cpu.h"

#define DW_VW KC_CPU_VW

typedef float dw_vf __attribute__((vector_size(DW_VW * sizeof(float))));
typedef int32_t dw_vi __attribute__((vector_size(DW_VW * sizeof(float))));

static const float dw_zero[DW_VW]; /* the taps in the padding */

#define DW_INLINE static inline __attribute__((always_inline))

static inline dw_vf dw_ld(const float *p) {
    dw_vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void dw_st(float *p, dw_vf v) { memcpy(p, &v, sizeof v); }

/* max(v, 0) as act_forward's ReLU (v > 0 ? v : 0) */
static inline dw_vf dw_relu(dw_vf v) { return (dw_vf)((dw_vi)v & (dw_vi)(v > (dw_vf){0})); }

int kc__cpu_dw3_channels(const kc_conv2d_desc *d, int backward_data) {
    if (d->kh != 3 || d->kw != 3 || d->dh != 1 || d->dw != 1 || d->f != d->c) return 0;
    if (backward_data && (d->sh != d->sw || d->sh > 2)) return 0;
    return d->c - d->c % DW_VW;
}

/* The three rows of a window whose top input row is iy0 (NULL: in the padding); whether all are real. */
static int dw_rows(const float *plane, int ph, int pw, int c, int iy0, const float *row[3]) {
    int full = 1;
    for (int r = 0; r < 3; r++) {
        const int iy = iy0 + r;
        row[r] = iy >= 0 && iy < ph ? plane + (size_t)iy * pw * c : NULL;
        full &= row[r] != NULL;
    }
    return full;
}

/* Channel k of pixel ix of a row, or zeros outside the plane. */
static inline const float *dw_tap(const float *row, int ix, int pw, int c, int k) {
    return row && ix >= 0 && ix < pw ? row + (size_t)ix * c + k : dw_zero;
}

/* The vector of channels [k, k + DW_VW) of pixel ix of a real row, zeros left or right of it
 * (chk 0: ix is inside, no test). */
DW_INLINE dw_vf dw_col(int chk, const float *row, int ix, int pw, int c, int k) {
    return !chk || (ix >= 0 && ix < pw) ? dw_ld(row + (size_t)ix * c + k) : (dw_vf){0};
}

/* A row's window of three columns sliding along the output row at stride 1: each output pixel
 * loads one column, the two others are the previous pixel's, and the columns in the padding
 * are zeros. dw_win_start sets it up for the window at column ix0; dw_win_next returns the
 * window at ix (the previous one's plus 1) in a, b, c. */
typedef struct dw_win {
    dw_vf v0, v1;
} dw_win;

DW_INLINE void dw_win_start(dw_win *s, const float *row, int ix0, int pw, int c, int k) {
    s->v0 = dw_col(1, row, ix0, pw, c, k);
    s->v1 = dw_col(1, row, ix0 + 1, pw, c, k);
}

DW_INLINE void dw_win_next(int chk, dw_win *s, const float *row, int ix, int pw, int c, int k, dw_vf *a, dw_vf *b,
                              dw_vf *cc) {
    *a = s->v0, *b = s->v1, *cc = dw_col(chk, row, ix + 2, pw, c, k);
    s->v0 = s->v1, s->v1 = *cc;
}

/* At stride 1, the output columns [*lo, *hi) of a row of ow whose windows (from column ox - px,
 * three wide) read no padding of a plane pw wide: no bounds tests there. */
DW_INLINE void dw_s1_inside(int pw, int px, int ow, int *lo, int *hi) {
    *lo = KC_MIN(ow, px);
    *hi = pw - 3 + px < 0 ? *lo : KC_MAX(*lo, KC_MIN(ow, pw - 2 + px));
}

/* out[ox] (ox < ow, channels [0, cv)) = bias + sum_{r,s} plane[iy0 + r][ox - px + s] * tap(r, s), where
 * tap(r, s) = w[r][s] or, flipped, w[2 - r][2 - s]; plane is ph x pw pixels of c channels; stride 1. The
 * rows in the padding are left out, the columns there read zeros (dw_win). Measured against dw3_row_taps
 * (one thread, CPU time, MobileNetV2's shapes at batch 32): 0.5-0.6x the time on 6x6 and 3x3 maps, where
 * most pixels touch the padding, 0.8-0.9x on 24x24 and 48x48. */
static void dw3_row_s1(const float *plane, int ph, int pw, int c, int iy0, int px, const float *w, int flip,
                       const float *b, int relu, float *out, int ow, int cv) {
    const float *row[3];
    (void)dw_rows(plane, ph, pw, c, iy0, row);
    int lo, hi;
    dw_s1_inside(pw, px, ow, &lo, &hi);
    for (int k = 0; k < cv; k += DW_VW) {
        dw_vf wv[9];
        for (int t = 0; t < 9; t++) wv[t] = dw_ld(w + (size_t)(flip ? 8 - t : t) * c + k);
        const dw_vf bv = b ? dw_ld(b + k) : (dw_vf){0};
        dw_win win[3] = {{(dw_vf){0}, (dw_vf){0}}, {(dw_vf){0}, (dw_vf){0}}, {(dw_vf){0}, (dw_vf){0}}};
        for (int r = 0; r < 3; r++)
            if (row[r]) dw_win_start(&win[r], row[r], -px, pw, c, k);
        int ox = 0;
#define DW_OUT(chk)                                                                                                   \
    do {                                                                                                              \
        const int ix = ox - px;                                                                                       \
        dw_vf acc = bv;                                                                                               \
        for (int r = 0; r < 3; r++) {                                                                                 \
            if (!row[r]) continue;                                                                                    \
            dw_vf v0, v1, v2;                                                                                         \
            dw_win_next(chk, &win[r], row[r], ix, pw, c, k, &v0, &v1, &v2);                                           \
            acc += v0 * wv[3 * r] + v1 * wv[3 * r + 1] + v2 * wv[3 * r + 2];                                          \
        }                                                                                                             \
        dw_st(out + (size_t)ox * c + k, relu ? dw_relu(acc) : acc);                                                   \
    } while (0)
        for (; ox < lo; ox++) DW_OUT(1);
        for (; ox < hi; ox++) DW_OUT(0);
        for (; ox < ow; ox++) DW_OUT(1);
#undef DW_OUT
    }
}

/* The same sums, each output reading its nine taps: interior pixels unchecked, those whose
 * window crosses the padding through dw_tap. Measured faster than the sliding window at stride 2
 * (one thread, CPU time: 96 channels on 48x48 4.5 against 5.3 ms), slower at stride 1. */
static void dw3_row_taps(const float *plane, int ph, int pw, int c, int iy0, int sx, int px, const float *w, int flip,
                    const float *b, int relu, float *out, int ow, int cv) {
    const float *row[3];
    const int full = dw_rows(plane, ph, pw, c, iy0, row);
    for (int k = 0; k < cv; k += DW_VW) {
        dw_vf wv[9];
        for (int t = 0; t < 9; t++) wv[t] = dw_ld(w + (size_t)(flip ? 8 - t : t) * c + k);
        const dw_vf bv = b ? dw_ld(b + k) : (dw_vf){0};
        for (int ox = 0; ox < ow; ox++) {
            const int ix0 = ox * sx - px;
            dw_vf acc = bv;
            if (full && ix0 >= 0 && ix0 + 2 < pw) {
                for (int r = 0; r < 3; r++) {
                    const float *p = row[r] + (size_t)ix0 * c + k;
                    acc += dw_ld(p) * wv[3 * r] + dw_ld(p + c) * wv[3 * r + 1] + dw_ld(p + 2 * c) * wv[3 * r + 2];
                }
            } else {
                for (int r = 0; r < 3; r++)
                    for (int s = 0; s < 3; s++) acc += dw_ld(dw_tap(row[r], ix0 + s, pw, c, k)) * wv[3 * r + s];
            }
            dw_st(out + (size_t)ox * c + k, relu ? dw_relu(acc) : acc);
        }
    }
}

static void dw3_row(const float *plane, int ph, int pw, int c, int iy0, int sx, int px, const float *w, int flip,
                    const float *b, int relu, float *out, int ow, int cv) {
    if (sx == 1)
        dw3_row_s1(plane, ph, pw, c, iy0, px, w, flip, b, relu, out, ow, cv);
    else
        dw3_row_taps(plane, ph, pw, c, iy0, sx, px, w, flip, b, relu, out, ow, cv);
}

void kc__cpu_dw3_forward_row(const kc_conv2d_desc *d, const float *x, const float *w, const float *b, float *yr,
                             int n, int oy, int cv) {
    const float *xi = x + (size_t)n * d->h * d->w * d->c;
    dw3_row(xi, d->h, d->w, d->c, oy * d->sh - d->pad_top, d->sw, d->pad_left, w, 0, b, d->relu, yr, d->ow, cv);
}

/* stride 2: dy[oy][ox] reaches dx[iy][ix] through tap (r, s) when 2 oy = iy + pad_top - r and
 * 2 ox = ix + pad_left - s: one or two rows r of the same parity as iy + pad_top, and per pixel
 * tap s = 1 (u = ix + pad_left odd: ox = (u - 1) / 2) or taps s = 0, 2 (u even: ox = u / 2,
 * u / 2 - 1). Pixel by pixel, all its channels (dx and dy are walked in memory order, so the
 * hardware prefetches them; a vector of channels at a time along the row left every store
 * waiting for its line, 0.8x the general kernel on a cold 24x24x144 dx), each dx vector summed
 * in a register, r then s ascending (the general kernel's order), and written once: the general
 * kernel clears the row and adds into it tap by tap (bench/RESULTS.md, "Depthwise backward at
 * stride 2"). */
static void dw3_backward_data_row_s2(const kc_conv2d_desc *d, const float *dy, const float *w, float *dxr, int n,
                                     int iy, int cv) {
    const int c = d->c, ow = d->ow;
    const float *dyi = dy + (size_t)n * d->oh * ow * c;
    const float *grow[3];
    int rs[3], nr = 0;
    for (int r = 0; r < 3; r++) {
        const int t = iy + d->pad_top - r;
        if (t < 0 || (t & 1) || t / 2 >= d->oh) continue;
        grow[nr] = dyi + (size_t)(t / 2) * ow * c;
        rs[nr++] = r;
    }
    for (int ix = 0; ix < d->w; ix++) {
        /* this pixel's taps, in the order they are added: (the dy pixel, the tap's weights) */
        const float *tg[4], *tw[4]; /* two rows at most, two taps each */
        int nt = 0;
        const int u = ix + d->pad_left;
        for (int q = 0; q < nr; q++) {
            const float *wr = w + (size_t)3 * rs[q] * c;
            if (u & 1) {
                if ((u - 1) / 2 < ow) tg[nt] = grow[q] + (size_t)((u - 1) / 2) * c, tw[nt++] = wr + c;
            } else {
                if (u / 2 < ow) tg[nt] = grow[q] + (size_t)(u / 2) * c, tw[nt++] = wr;
                if (u / 2 >= 1 && u / 2 - 1 < ow) tg[nt] = grow[q] + (size_t)(u / 2 - 1) * c, tw[nt++] = wr + 2 * c;
            }
        }
        float *o = dxr + (size_t)ix * c;
        for (int k = 0; k < cv; k += DW_VW) {
            dw_vf acc = (dw_vf){0};
            for (int t = 0; t < nt; t++) acc += dw_ld(tg[t] + k) * dw_ld(tw[t] + k);
            dw_st(o + k, acc);
        }
    }
}

/* stride 1 (stride 2: dw3_backward_data_row_s2): dy[oy][ox] reaches dx[iy][ix] through tap (r, s)
 * when oy = iy + pad_top - r, ox = ix + pad_left - s: with r' = 2 - r, s' = 2 - s that is a
 * forward window starting at dy row iy + pad_top - 2, column ix + pad_left - 2. */
void kc__cpu_dw3_backward_data_row(const kc_conv2d_desc *d, const float *dy, const float *w, float *dxr, int n,
                                   int iy, int cv) {
    if (d->sh == 2) {
        dw3_backward_data_row_s2(d, dy, w, dxr, n, iy, cv);
        return;
    }
    const float *dyi = dy + (size_t)n * d->oh * d->ow * d->f;
    dw3_row(dyi, d->oh, d->ow, d->f, iy + d->pad_top - 2, 1, 2 - d->pad_left, w, 1, NULL, 0, dxr, d->w, cv);
}

/* One image's nine per-tap sums x * dy and the sum of dy, for channels [k, k + DW_VW). */
static void dw3_filter_image(const kc_conv2d_desc *d, const float *xi, const float *dyi, int k, dw_vf a[10]) {
    const int c = d->c, pw = d->w;
    for (int t = 0; t < 10; t++) a[t] = (dw_vf){0};
    for (int oy = 0; oy < d->oh; oy++) {
        const float *row[3];
        const int full = dw_rows(xi, d->h, pw, c, oy * d->sh - d->pad_top, row);
        const float *grow = dyi + (size_t)oy * d->ow * c + k;
        for (int ox = 0; ox < d->ow; ox++) {
            const dw_vf g = dw_ld(grow + (size_t)ox * c);
            const int ix0 = ox * d->sw - d->pad_left;
            a[9] += g;
            if (full && ix0 >= 0 && ix0 + 2 < pw) {
                for (int r = 0; r < 3; r++) {
                    const float *p = row[r] + (size_t)ix0 * c + k;
                    a[3 * r] += dw_ld(p) * g;
                    a[3 * r + 1] += dw_ld(p + c) * g;
                    a[3 * r + 2] += dw_ld(p + 2 * c) * g;
                }
            } else {
                for (int r = 0; r < 3; r++)
                    for (int s = 0; s < 3; s++) a[3 * r + s] += dw_ld(dw_tap(row[r], ix0 + s, pw, c, k)) * g;
            }
        }
    }
}

void kc__cpu_dw3_filter_chunk(const kc_conv2d_desc *d, const float *x, const float *dy, float *dw, float *db, int k) {
    const int c = d->c;
    double tot[10][DW_VW];
    memset(tot, 0, sizeof tot);
    for (int n = 0; n < d->n; n++) {
        dw_vf a[10];
        dw3_filter_image(d, x + (size_t)n * d->h * d->w * c, dy + (size_t)n * d->oh * d->ow * c, k, a);
        for (int t = 0; t < 10; t++)
            for (int j = 0; j < DW_VW; j++) tot[t][j] += a[t][j];
    }
    for (int t = 0; t < 9; t++)
        for (int j = 0; j < DW_VW; j++) dw[(size_t)t * c + k + j] = (float)tot[t][j];
    if (db)
        for (int j = 0; j < DW_VW; j++) db[k + j] = (float)tot[9][j];
}

/* Output rows [i0, i1) (row i: image i / oh, output row i % oh) added into part (10 x cv floats:
 * the nine per-tap sums x * dy, then the sum of dy, per channel), channels [0, cv). A row's
 * inputs and gradients are read once, all channels of a pixel together (the channel-block
 * kernel above walks the whole tensor once per block of DW_VW channels, a 64-byte line in
 * every pixel's). */
void kc__cpu_dw3_filter_rows(const kc_conv2d_desc *d, const float *x, const float *dy, float *part, int64_t i0,
                             int64_t i1, int cv) {
    const int c = d->c, pw = d->w, px = d->pad_left;
    for (int64_t i = i0; i < i1; i++) {
        const int n = (int)(i / d->oh), oy = (int)(i % d->oh);
        const float *row[3];
        const int full = dw_rows(x + (size_t)n * d->h * pw * c, d->h, pw, c, oy * d->sh - d->pad_top, row);
        const float *grow = dy + ((size_t)n * d->oh + oy) * d->ow * c;
        for (int k = 0; k < cv; k += DW_VW) {
            dw_vf a[10];
            for (int t = 0; t < 10; t++) a[t] = dw_ld(part + (size_t)t * cv + k);
            if (d->sw == 1) { /* sliding windows, rows in the padding left out */
                dw_win win[3] = {{(dw_vf){0}, (dw_vf){0}}, {(dw_vf){0}, (dw_vf){0}}, {(dw_vf){0}, (dw_vf){0}}};
                for (int r = 0; r < 3; r++)
                    if (row[r]) dw_win_start(&win[r], row[r], -px, pw, c, k);
                int lo, hi, ox = 0;
                dw_s1_inside(pw, px, d->ow, &lo, &hi);
#define DW_GRAD(chk)                                                                                                  \
    do {                                                                                                              \
        const dw_vf g = dw_ld(grow + (size_t)ox * c + k);                                                             \
        a[9] += g;                                                                                                    \
        for (int r = 0; r < 3; r++) {                                                                                 \
            if (!row[r]) continue;                                                                                    \
            dw_vf v0, v1, v2;                                                                                         \
            dw_win_next(chk, &win[r], row[r], ox - px, pw, c, k, &v0, &v1, &v2);                                      \
            a[3 * r] += v0 * g, a[3 * r + 1] += v1 * g, a[3 * r + 2] += v2 * g;                                       \
        }                                                                                                             \
    } while (0)
                for (; ox < lo; ox++) DW_GRAD(1);
                for (; ox < hi; ox++) DW_GRAD(0);
                for (; ox < d->ow; ox++) DW_GRAD(1);
#undef DW_GRAD
            } else {
                for (int ox = 0; ox < d->ow; ox++) {
                    const dw_vf g = dw_ld(grow + (size_t)ox * c + k);
                    const int ix0 = ox * d->sw - px;
                    a[9] += g;
                    if (full && ix0 >= 0 && ix0 + 2 < pw) {
                        for (int r = 0; r < 3; r++) {
                            const float *p = row[r] + (size_t)ix0 * c + k;
                            a[3 * r] += dw_ld(p) * g, a[3 * r + 1] += dw_ld(p + c) * g;
                            a[3 * r + 2] += dw_ld(p + 2 * c) * g;
                        }
                    } else {
                        for (int r = 0; r < 3; r++)
                            for (int q = 0; q < 3; q++) a[3 * r + q] += dw_ld(dw_tap(row[r], ix0 + q, pw, c, k)) * g;
                    }
                }
            }
            for (int t = 0; t < 10; t++) dw_st(part + (size_t)t * cv + k, a[t]);
        }
    }
}

int kc__cpu_dw3_width(void) { return DW_VW; }
