/* cpu_conv_blocked.c — register-blocked direct convolution (forward and backward-filter)
 * for undilated convolutions with few output channels (the skinny GEMMs of im2col +
 * OpenBLAS: N = F = 16..64 columns, where OpenBLAS reaches half the square SGEMM rate;
 * workload A's conv2d_1, 32 -> 64 channels, 3x3 on 13x13, is the case it is for, and
 * ResNet50's stem, 7x7 stride 2 from 3 channels, whose im2col writes 43 MB a pass).
 *
 * No col matrix: a block of PB output pixels x FB filters is accumulated in vector
 * registers while the K = KH*KW*C patch entries stream by, each pixel's entry broadcast
 * from the input image itself (the KW*C entries of one kernel row are contiguous in NHWC,
 * whatever the stride; the stride only moves where each pixel's patch starts).
 * Backward-filter is the transposed blocking: KB patch rows x FB filters in registers while
 * the output pixels stream by, dy's FB gradients loaded once per pixel. Padding ("same") is
 * handled by copying each image into a zero-bordered buffer first, so the inner loops never
 * test bounds; without padding the kernels read the input itself, rows of W floats apart.
 *
 * The blocking depends on the instruction set this copy is compiled for (cpu_isa.h):
 * AVX-512 16 floats a vector, 4 vectors of filters x 6 pixels = 24 accumulators of 32
 * registers; AVX2 8 floats, 2 x 6 = 12 of 16. The baseline (SSE2) copy, 4 floats, 2 x 6,
 * runs at 0.53-0.66x of im2col + OpenBLAS (whose own kernels use what the processor has), so
 * there it applies nowhere and im2col runs.
 * The reference is im2col + GEMM (cpu_gemm_conv.c), which runs whatever this does not
 * take; tests/test_conv_blocked.c compares the two. */
#include <stdint.h>
#include <string.h>

#include "cpu.h"

#if defined(__AVX512F__)
#define VW 16
#define NV 4
#elif defined(__AVX2__)
#define VW 8
#define NV 2
#else
#define VW 4
#define NV 2
#endif
#define FB (VW * NV) /* filters in one register block */
#define PB 6         /* output pixels (forward) or patch rows (backward-filter) in one block */

/* aligned(4): loads and stores at any float address; may_alias: they read and write floats */
typedef float vf __attribute__((vector_size(VW * 4), aligned(4), may_alias));

static inline vf vload(const float *p) { return *(const vf *)p; }
static inline void vstore(float *p, vf v) { *(vf *)p = v; }

/* Which convolutions this file runs (the caller has already taken 1x1 and the small-patch
 * direct kernel): stride 1, no dilation, filters a multiple of FB and at most 64 (above,
 * OpenBLAS's GEMM is no longer skinny), at most 32 input channels (measured there:
 * workload A's conv2d_1; from 64 channels Winograd takes 3x3 kernels, and wider inputs are
 * not measured) and a patch long enough to keep the block busy. */
int kc__cpu_blocked_applies(const kc_conv2d_desc *d) {
    if (VW < 8) return 0; /* the baseline copy: 0.53-0.66x im2col + OpenBLAS (bench_conv_blocked) */
    return d->dh == 1 && d->dw == 1 && d->f % FB == 0 && d->f <= 64 && d->c <= 32 && d->kh * d->kw * d->c >= 16;
}

/* The rows and columns the output's patches cover: (OH - 1) SH + KH by (OW - 1) SW + KW. */
static int hp_of(const kc_conv2d_desc *d) { return (d->oh - 1) * d->sh + d->kh; }
static int wp_of(const kc_conv2d_desc *d) { return (d->ow - 1) * d->sw + d->kw; }
/* Whether the kernels read a zero-bordered copy: padding, or patches past the image's edge. */
static int padded(const kc_conv2d_desc *d) {
    return d->pad_top || d->pad_left || hp_of(d) > d->h || wp_of(d) > d->w;
}
/* Pixels from one row of the image the kernels read to the next: the copy's or the input's. */
static int pitch_of(const kc_conv2d_desc *d) { return padded(d) ? wp_of(d) : d->w; }

static int nthreads_for(const kc_conv2d_desc *d) {
    const int64_t work = (int64_t)d->n * d->oh * d->ow * d->f;
    return KC_MAX(1, KC_MIN(kc__cpu_par(work) ? kc__num_threads() : 1, 64));
}

/* Workspace: per thread a padded image (when padding) and, for backward-filter, a (K, F)
 * partial sum; then the patch and pixel offsets (K int64, OH*OW int). */
static size_t pad_floats(const kc_conv2d_desc *d) {
    return padded(d) ? (size_t)hp_of(d) * (size_t)wp_of(d) * (size_t)d->c : 0;
}
static size_t kdim_of(const kc_conv2d_desc *d) { return (size_t)d->kh * (size_t)d->kw * (size_t)d->c; }
size_t kc__cpu_blocked_workspace(const kc_conv2d_desc *d) {
    const size_t floats = (size_t)nthreads_for(d) * (pad_floats(d) + kdim_of(d) * (size_t)d->f);
    return floats * sizeof(float) + kdim_of(d) * sizeof(int64_t) + (size_t)d->oh * d->ow * sizeof(int) + 64;
}

/* Image img of x, or its copy with a zero border in buf (Hp, Wp, C). */
static const float *image(const kc_conv2d_desc *d, const float *x, int img, float *buf) {
    const float *xi = x + (size_t)img * d->h * d->w * d->c;
    if (!padded(d)) return xi;
    const int hp = hp_of(d), wp = wp_of(d), c = d->c;
    memset(buf, 0, (size_t)hp * wp * c * sizeof(float));
    for (int iy = 0; iy < d->h; iy++) {
        const int py = iy + d->pad_top;
        if (py < 0 || py >= hp) continue;
        const int x0 = KC_MAX(0, -d->pad_left), x1 = KC_MIN(d->w, wp - d->pad_left);
        if (x1 > x0)
            memcpy(buf + ((size_t)py * wp + x0 + d->pad_left) * c, xi + ((size_t)iy * d->w + x0) * c,
                   (size_t)(x1 - x0) * c * sizeof(float));
    }
    return buf;
}

/* y[p][f0 .. f0+FB) for the PB pixels whose patches start at xp[p] (np of them real; the
 * rest repeat pixel 0 and are not stored). w is (K, F) at column f0. */
static inline void fwd_block(const float *const xp[PB], int np, int kh, size_t kwc, size_t row, const float *w,
                             int f, const float *b, bool relu, float *const yp[PB]) {
    vf acc[PB][NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
        const vf bias = b ? vload(b + v * VW) : (vf){0};
#pragma GCC unroll 6
        for (int p = 0; p < PB; p++) acc[p][v] = bias;
    }
    for (int ki = 0; ki < kh; ki++) {
        const float *x0 = xp[0] + ki * row, *x1 = xp[1] + ki * row, *x2 = xp[2] + ki * row;
        const float *x3 = xp[3] + ki * row, *x4 = xp[4] + ki * row, *x5 = xp[5] + ki * row;
        const float *wk = w + (size_t)ki * kwc * (size_t)f;
        for (size_t j = 0; j < kwc; j++, wk += f) {
            vf wv[NV];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) wv[v] = vload(wk + v * VW);
            const float s[PB] = {x0[j], x1[j], x2[j], x3[j], x4[j], x5[j]};
#pragma GCC unroll 6
            for (int p = 0; p < PB; p++)
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) acc[p][v] += s[p] * wv[v];
        }
    }
#pragma GCC unroll 6
    for (int p = 0; p < PB; p++) /* constant indices keep acc in registers */
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            if (p >= np) continue;
            vf a = acc[p][v];
            if (relu) a = (vf)((__typeof__(a > a))a & (a > (vf){0})); /* x > 0 ? x : 0, as act_forward */
            vstore(yp[p] + v * VW, a);
        }
}

/* One image's output (padded first into buf when the convolution pads). */
static void fwd_image(const kc_conv2d_desc *d, const float *x, const float *w, const float *b, float *y, int img,
                      float *buf) {
    const int npix = d->oh * d->ow, f = d->f;
    const size_t wp = (size_t)pitch_of(d), row = wp * d->c, kwc = (size_t)d->kw * d->c;
    const bool relu = d->relu != 0;
    const float *xi = image(d, x, img, buf);
    float *yi = y + (size_t)img * npix * f;
    for (int p0 = 0; p0 < npix; p0 += PB) {
        const int np = KC_MIN(PB, npix - p0);
        const float *xp[PB];
        float *yp[PB];
        for (int p = 0; p < PB; p++) {
            const int q = p0 + (p < np ? p : 0), oy = q / d->ow, ox = q % d->ow;
            xp[p] = xi + ((size_t)oy * d->sh * wp + (size_t)ox * d->sw) * d->c;
            yp[p] = yi + (size_t)q * f;
        }
        for (int f0 = 0; f0 < f; f0 += FB) {
            float *yq[PB];
            for (int p = 0; p < PB; p++) yq[p] = yp[p] + f0;
            fwd_block(xp, np, d->kh, kwc, row, w + f0, f, b ? b + f0 : NULL, relu, yq);
        }
    }
}

/* nt parts of the batch, part t (images [n t / nt, n (t + 1) / nt)) with scratch t, whichever
 * thread runs it: a loop, so that one thread enters no OpenMP region (KC_CPU_PAR_FOR). */
void kc__cpu_blocked_forward(const kc_conv2d_desc *d, const float *x, const float *w, const float *b, float *y,
                             void *ws) {
    const int nt = nthreads_for(d);
    KC_CPU_PAR_FOR_TEAM(nt > 1, nt, schedule(static, 1), for (int t = 0; t < nt; t++) {
        float *buf = (float *)ws + (size_t)t * pad_floats(d);
        const int i0 = (int)((int64_t)d->n * t / nt), i1 = (int)((int64_t)d->n * (t + 1) / nt);
        for (int img = i0; img < i1; img++) fwd_image(d, x, w, b, y, img, buf);
    });
}

/* part[k0 + r][f0 ..] += sum over the image's pixels of patch[k0 + r] * dy[f0 ..], for the PB
 * patch rows whose offsets in the (padded) image are off[r] (nk of them real). */
static inline void bwf_block(const float *xi, const int64_t off[PB], int nk, const int *pix, int npix,
                             const float *dyi, int f, float *part) {
    vf acc[PB][NV];
#pragma GCC unroll 6
    for (int r = 0; r < PB; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[r][v] = (vf){0};
    const float *x0 = xi + off[0], *x1 = xi + off[1], *x2 = xi + off[2];
    const float *x3 = xi + off[3], *x4 = xi + off[4], *x5 = xi + off[5];
    for (int p = 0; p < npix; p++) {
        const float *g = dyi + (size_t)p * f;
        vf gv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) gv[v] = vload(g + v * VW);
        const int o = pix[p];
        const float s[PB] = {x0[o], x1[o], x2[o], x3[o], x4[o], x5[o]};
#pragma GCC unroll 6
        for (int r = 0; r < PB; r++)
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[r][v] += s[r] * gv[v];
    }
#pragma GCC unroll 6
    for (int r = 0; r < PB; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            if (r >= nk) continue;
            float *q = part + (size_t)r * f + v * VW;
            vstore(q, vload(q) + acc[r][v]);
        }
}

/* Offsets in the (padded) image: of each patch entry k from its patch's corner, and of
 * each output pixel's corner. */
static void offsets(const kc_conv2d_desc *d, int64_t *koff, int *pix) {
    const int64_t wp = pitch_of(d), c = d->c;
    for (int ki = 0, k = 0; ki < d->kh; ki++)
        for (int kj = 0; kj < d->kw; kj++)
            for (int ci = 0; ci < d->c; ci++) koff[k++] = (ki * wp + kj) * c + ci;
    for (int oy = 0, q = 0; oy < d->oh; oy++)
        for (int ox = 0; ox < d->ow; ox++) pix[q++] = (int)(((int64_t)oy * d->sh * wp + (int64_t)ox * d->sw) * c);
}

/* dW (K, F) = sum over images and pixels of patch (K) x dy (F): nt partial sums, part t over
 * images [n t / nt, n (t + 1) / nt) with scratch t (whichever thread runs it), combined in a
 * fixed order (reproducible for a given nt). */
void kc__cpu_blocked_backward_filter(const kc_conv2d_desc *d, const float *x, const float *dy, float *dw,
                                     void *ws) {
    const int nt = nthreads_for(d), npix = d->oh * d->ow, f = d->f, kdim = (int)kdim_of(d);
    const size_t kf = (size_t)kdim * f, padf = pad_floats(d);
    float *const parts = (float *)ws + (size_t)nt * padf; /* nt x (K, F) */
    /* the offsets start on 8 bytes after an odd number of floats (the workspace's 64 spare
     * bytes cover the rounding) */
    int64_t *const koff = (int64_t *)(((uintptr_t)(parts + (size_t)nt * kf) + 7) & ~(uintptr_t)7);
    int *const pix = (int *)(koff + kdim);
    offsets(d, koff, pix);
    memset(parts, 0, (size_t)nt * kf * sizeof(float)); /* a part with no images stays zero */
    KC_CPU_PAR_FOR_TEAM(nt > 1, nt, schedule(static, 1), for (int t = 0; t < nt; t++) {
        float *part = parts + (size_t)t * kf;
        float *buf = (float *)ws + (size_t)t * padf;
        const int i0 = (int)((int64_t)d->n * t / nt), i1 = (int)((int64_t)d->n * (t + 1) / nt);
        for (int img = i0; img < i1; img++) {
            const float *xi = image(d, x, img, buf), *dyi = dy + (size_t)img * npix * f;
            for (int k0 = 0; k0 < kdim; k0 += PB) {
                const int nk = KC_MIN(PB, kdim - k0);
                int64_t off[PB];
                for (int r = 0; r < PB; r++) off[r] = koff[k0 + (r < nk ? r : 0)];
                for (int f0 = 0; f0 < f; f0 += FB)
                    bwf_block(xi, off, nk, pix, npix, dyi + f0, f, part + (size_t)k0 * f + f0);
            }
        }
    });
    for (size_t i = 0; i < kf; i++) {
        float s = 0.0f;
        for (int t = 0; t < nt; t++) s += parts[(size_t)t * kf + i];
        dw[i] = s;
    }
}
